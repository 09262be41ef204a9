// Package agentapi serves agent status, cost and model (contract §3) and
// agent groups (contract §7). Usage and the model come from the session
// store's ledger, groups from its group store, and group runs and active
// agents from the command service.
package agentapi

import (
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/httpx"
)

// Mount adds the routes to r (mounted at /api).
func Mount(r chi.Router, d httpx.Deps) {
	h := handlers{d: d}
	r.Get("/agent/status", h.status)
	r.Get("/agent/cost", h.cost)
	r.Post("/agent/cost/reset", h.costReset)
	r.Get("/agent/model", h.getModel)
	r.Put("/agent/model", h.putModel)
	r.Get("/agents/active", h.active)

	r.Get("/agent-groups", h.listGroups)
	r.Post("/agent-groups", h.createGroup)
	r.Get("/agent-groups/{id}", h.getGroup)
	r.Patch("/agent-groups/{id}", h.updateGroup)
	r.Delete("/agent-groups/{id}", h.deleteGroup)
	r.Post("/agent-groups/{id}/run", h.runGroup)
	r.Get("/agent-groups/{id}/runs/{jobId}", h.getJob)
}

type handlers struct{ d httpx.Deps }

func (h handlers) fail(w http.ResponseWriter, err error) { httpx.WriteError(w, h.d.Log, err) }

func (h handlers) badRequest(w http.ResponseWriter, msg string) {
	httpx.WriteJSON(w, http.StatusBadRequest, httpx.ErrorBody{Error: msg})
}

type statusReply struct {
	Running       bool                  `json:"running"`
	Model         string                `json:"model"`
	TokensUsed    int                   `json:"tokensUsed"`
	EstimatedCost float64               `json:"estimatedCost"`
	Turns         int                   `json:"turns"`
	Usage         protocol.UsageSummary `json:"usage"`
}

func (h handlers) status(w http.ResponseWriter, r *http.Request) {
	u, ok := httpx.Call[protocol.UsageSummary](h.d, w, r, protocol.SubjStoreUsageSummary, protocol.UsageSummaryRequest{})
	if !ok {
		return
	}
	m, ok := httpx.Call[protocol.AgentModel](h.d, w, r, protocol.SubjStoreModelGet, protocol.Empty{})
	if !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusOK, statusReply{
		Running: true, Model: m.Model, TokensUsed: u.TotalInputTokens + u.TotalOutputTokens,
		EstimatedCost: u.EstimatedCost, Turns: u.Turns, Usage: withByModel(u),
	})
}

// costReply is {summary, ...usage}: the embedded summary's fields are
// flattened into the object, as the original spread them.
type costReply struct {
	Summary string `json:"summary"`
	protocol.UsageSummary
}

// costSummary formats the usage line of reference §5.2.
func costSummary(u protocol.UsageSummary) string {
	return fmt.Sprintf("Tokens: %d in / %d out (%d turns) | Est. cost: $%.4f",
		u.TotalInputTokens, u.TotalOutputTokens, u.Turns, u.EstimatedCost)
}

func (h handlers) cost(w http.ResponseWriter, r *http.Request) {
	u, ok := httpx.Call[protocol.UsageSummary](h.d, w, r, protocol.SubjStoreUsageSummary, protocol.UsageSummaryRequest{})
	if !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusOK, costReply{Summary: costSummary(u), UsageSummary: withByModel(u)})
}

func withByModel(u protocol.UsageSummary) protocol.UsageSummary {
	if u.ByModel == nil {
		u.ByModel = map[string]protocol.ModelUsage{}
	}
	return u
}

type resetReply struct {
	OK      bool   `json:"ok"`
	Message string `json:"message"`
	ResetAt string `json:"resetAt"`
}

// costReset really resets the totals (the original's was a no-op whose
// message said so); the records stay in the ledger.
func (h handlers) costReset(w http.ResponseWriter, r *http.Request) {
	rep, ok := httpx.Call[protocol.UsageReset](h.d, w, r, protocol.SubjStoreUsageReset, protocol.Empty{})
	if !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusOK, resetReply{OK: true, Message: "Cost tracking reset", ResetAt: rep.ResetAt})
}

func (h handlers) getModel(w http.ResponseWriter, r *http.Request) {
	m, ok := httpx.Call[protocol.AgentModel](h.d, w, r, protocol.SubjStoreModelGet, protocol.Empty{})
	if !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusOK, m)
}

type modelReply struct {
	OK    bool   `json:"ok"`
	Model string `json:"model"`
}

func (h handlers) putModel(w http.ResponseWriter, r *http.Request) {
	f, err := httpx.DecodeBody(w, r, h.d.BodyLimit)
	if err != nil {
		h.fail(w, err)
		return
	}
	model, _, ok := f.Str("model")
	if !ok || model == "" {
		h.badRequest(w, "model is required")
		return
	}
	m, ok := httpx.Call[protocol.AgentModel](h.d, w, r, protocol.SubjStoreModelSet, protocol.AgentModel{Model: model})
	if !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusOK, modelReply{OK: true, Model: m.Model})
}

func (h handlers) active(w http.ResponseWriter, r *http.Request) {
	rep, ok := httpx.Call[protocol.ActiveAgents](h.d, w, r, protocol.SubjCommandAgentsActive, protocol.Empty{})
	if !ok {
		return
	}
	if rep.Workers == nil {
		rep.Workers = []protocol.ActiveAgent{}
	}
	if rep.Active == nil {
		rep.Active = []protocol.ActiveAgent{}
	}
	httpx.WriteJSON(w, http.StatusOK, rep)
}

func (h handlers) listGroups(w http.ResponseWriter, r *http.Request) {
	rep, ok := httpx.Call[protocol.AgentGroupList](h.d, w, r, protocol.SubjStoreGroupList, protocol.Empty{})
	if !ok {
		return
	}
	if rep.Groups == nil {
		rep.Groups = []protocol.AgentGroup{}
	}
	httpx.WriteJSON(w, http.StatusOK, rep.Groups)
}

func (h handlers) createGroup(w http.ResponseWriter, r *http.Request) {
	f, err := httpx.DecodeBody(w, r, h.d.BodyLimit)
	if err != nil {
		h.fail(w, err)
		return
	}
	g, ok := httpx.Call[protocol.AgentGroup](h.d, w, r, protocol.SubjStoreGroupCreate, protocol.AgentGroupWrite{Fields: f})
	if !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusCreated, g)
}

// groupID reads {id}. An id that is not a safe segment cannot name a
// stored group, so it is a 404 like any unknown id.
func (h handlers) groupID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := chi.URLParam(r, "id")
	if !protocol.ValidID(id) {
		httpx.WriteJSON(w, http.StatusNotFound, httpx.ErrorBody{Error: "Group not found"})
		return "", false
	}
	return id, true
}

func (h handlers) getGroup(w http.ResponseWriter, r *http.Request) {
	id, ok := h.groupID(w, r)
	if !ok {
		return
	}
	g, ok := httpx.Call[protocol.AgentGroup](h.d, w, r, protocol.SubjStoreGroupGet, protocol.AgentGroupRef{ID: id})
	if !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusOK, g)
}

func (h handlers) updateGroup(w http.ResponseWriter, r *http.Request) {
	id, ok := h.groupID(w, r)
	if !ok {
		return
	}
	f, err := httpx.DecodeBody(w, r, h.d.BodyLimit)
	if err != nil {
		h.fail(w, err)
		return
	}
	g, ok := httpx.Call[protocol.AgentGroup](h.d, w, r, protocol.SubjStoreGroupUpdate, protocol.AgentGroupWrite{ID: id, Fields: f})
	if !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusOK, g)
}

func (h handlers) deleteGroup(w http.ResponseWriter, r *http.Request) {
	id, ok := h.groupID(w, r)
	if !ok {
		return
	}
	rep, ok := httpx.Call[protocol.Deleted](h.d, w, r, protocol.SubjStoreGroupDelete, protocol.AgentGroupRef{ID: id})
	if !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusOK, rep)
}

// runReply is the queued job of contract §7.
type runReply struct {
	JobID       string `json:"jobId"`
	GroupID     string `json:"groupId"`
	GroupName   string `json:"groupName"`
	Strategy    string `json:"strategy"`
	MemberCount int    `json:"memberCount"`
	Task        string `json:"task"`
	Status      string `json:"status"`
}

// runGroup answers 404 for an unknown group before it looks at the body
// (reference §5.3), then queues the run and returns at once with 200.
func (h handlers) runGroup(w http.ResponseWriter, r *http.Request) {
	id, ok := h.groupID(w, r)
	if !ok {
		return
	}
	f, err := httpx.DecodeBody(w, r, h.d.BodyLimit)
	if err != nil {
		h.fail(w, err)
		return
	}
	if _, ok := httpx.Call[protocol.AgentGroup](h.d, w, r, protocol.SubjStoreGroupGet, protocol.AgentGroupRef{ID: id}); !ok {
		return
	}
	task, _, ok := f.Str("task")
	if !ok || task == "" {
		h.badRequest(w, "task is required")
		return
	}
	teamID, _, err := f.OptString("teamId")
	if err != nil {
		h.fail(w, err)
		return
	}
	ws, present, err := f.OptString("workspaceId")
	if err != nil {
		h.fail(w, err)
		return
	}
	if present {
		if err := httpx.CheckSegment("workspaceId", ws); err != nil {
			h.fail(w, err)
			return
		}
	}
	job, ok := httpx.Call[protocol.GroupJob](h.d, w, r, protocol.SubjCommandGroupRun,
		protocol.GroupRunRequest{GroupID: id, Task: task, TeamID: teamID, Workspace: ws})
	if !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusOK, runReply{
		JobID: job.JobID, GroupID: job.GroupID, GroupName: job.GroupName, Strategy: job.Strategy,
		MemberCount: job.MemberCount, Task: job.Task, Status: job.Status,
	})
}

func (h handlers) getJob(w http.ResponseWriter, r *http.Request) {
	id, ok := h.groupID(w, r)
	if !ok {
		return
	}
	jobID := chi.URLParam(r, "jobId")
	if !protocol.ValidID(jobID) {
		httpx.WriteJSON(w, http.StatusNotFound, httpx.ErrorBody{Error: "Job not found"})
		return
	}
	job, ok := httpx.Call[protocol.GroupJob](h.d, w, r, protocol.SubjCommandGroupJob, protocol.GroupJobRequest{GroupID: id, JobID: jobID})
	if !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusOK, job)
}
