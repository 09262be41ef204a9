// Package jobsapi serves GET /api/jobs/{id}, the app's poll of a
// background job — here, an agent-group run (the command service's job
// bucket), in the run's shape plus the original client's field names —
// and POST /api/jobs/{id}/cancel, which stops one.
//
// Who may call: locally anyone the edge lets through (the trust boundary
// refuses a cross-site cancel); on a team server a member of the job's
// team reads it (a job of another team, or of none, is not found, like an
// unknown id) and one who may write in the run's workspace cancels it
// (viewers may not).
package jobsapi

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/forward"
	"github.com/waggle-os/core/services/gateway/internal/respond"
	"github.com/waggle-os/core/services/gateway/internal/teamauth"
)

// Mount adds the routes to r (mounted at /api).
func Mount(r chi.Router, d forward.Deps) {
	h := handlers{d: d}
	r.Get("/jobs/{id}", h.get)
	r.Post("/jobs/{id}/cancel", h.cancel)
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
	job, ok := h.read(w, r)
	if !ok {
		return
	}
	respond.JSON(w, http.StatusOK, Job{GroupJob: job, CompletedAt: job.FinishedAt, Output: job.Result})
}

// cancel answers the original's {cancelled: true, jobId}; 404 for an
// unknown job (or another team's), 409 `Cannot cancel job with status
// "completed"` for one that has ended.
func (h handlers) cancel(w http.ResponseWriter, r *http.Request) {
	job, ok := h.read(w, r)
	if !ok {
		return
	}
	if u, team := teamauth.UserFrom(r.Context()); team {
		// Cancelling changes the run's workspace (its member turns stop
		// mid-way): the workspace's team decides, so a viewer gets the
		// team server's usual 403.
		ctx, cancel := context.WithTimeout(r.Context(), h.d.Timeout)
		_, err := bus.Call(ctx, h.d.NC, protocol.Authorize,
			protocol.AuthorizeRequest{User: u.ID, Workspace: job.Workspace, Action: protocol.ActionWrite})
		cancel()
		if err != nil {
			respond.Error(w, h.d.Log, err)
			return
		}
	}
	forward.Reply(h.d, w, r, http.StatusOK, protocol.CancelGroupJob, protocol.GroupJobRequest{JobID: job.JobID})
}

// read finds the job of the path's id that the caller may see: on a team
// server a job of a team the user is not in is not found.
func (h handlers) read(w http.ResponseWriter, r *http.Request) (protocol.GroupJob, bool) {
	id := chi.URLParam(r, "id")
	if !protocol.ValidID(id) {
		respond.Error(w, h.d.Log, errJobNotFound)
		return protocol.GroupJob{}, false
	}
	job, ok := forward.Call(h.d, w, r, protocol.GetGroupJob, protocol.GroupJobRequest{JobID: id})
	if !ok {
		return job, false
	}
	if u, team := teamauth.UserFrom(r.Context()); team && (job.TeamID == "" || u.Role(job.TeamID) == "") {
		respond.Error(w, h.d.Log, errJobNotFound)
		return protocol.GroupJob{}, false
	}
	return job, true
}
