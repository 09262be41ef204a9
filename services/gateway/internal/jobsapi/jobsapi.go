// Package jobsapi serves GET /api/jobs/{id}, the app's poll of a
// background job: here, an agent-group run (the command service's job
// bucket), in the run's shape plus the original client's field names.
//
// Who may call: locally anyone the edge lets through; on a team server a
// member of the job's team (a job of another team, or of none, is not
// found, like an unknown id).
package jobsapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/forward"
	"github.com/waggle-os/core/services/gateway/internal/respond"
	"github.com/waggle-os/core/services/gateway/internal/teamauth"
)

// Mount adds the routes to r (mounted at /api).
func Mount(r chi.Router, d forward.Deps) {
	h := handlers{d: d}
	r.Get("/jobs/{id}", h.get)
}

type handlers struct{ d forward.Deps }

var errJobNotFound = protocol.Errorf(protocol.NotFound, "Job not found")

// Job is a group run with the names the original client reads.
type Job struct {
	protocol.GroupJob
	// CompletedAt is FinishedAt; Output is Result.
	CompletedAt string `json:"completedAt,omitempty"`
	Output      string `json:"output,omitempty"`
}

func (h handlers) get(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if !protocol.ValidID(id) {
		respond.Error(w, h.d.Log, errJobNotFound)
		return
	}
	job, ok := forward.Call(h.d, w, r, protocol.GetGroupJob, protocol.GroupJobRequest{JobID: id})
	if !ok {
		return
	}
	if u, team := teamauth.UserFrom(r.Context()); team && (job.TeamID == "" || u.Role(job.TeamID) == "") {
		respond.Error(w, h.d.Log, errJobNotFound)
		return
	}
	respond.JSON(w, http.StatusOK, Job{GroupJob: job, CompletedAt: job.FinishedAt, Output: job.Result})
}
