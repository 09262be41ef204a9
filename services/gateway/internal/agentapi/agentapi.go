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
	"github.com/waggle-os/core/services/gateway/internal/forward"
	"github.com/waggle-os/core/services/gateway/internal/input"
	"github.com/waggle-os/core/services/gateway/internal/respond"
	"github.com/waggle-os/core/services/gateway/internal/teamauth"
)

// Mount adds the routes to r (mounted at /api).
func Mount(r chi.Router, d forward.Deps) {
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

type handlers struct{ d forward.Deps }

func (h handlers) fail(w http.ResponseWriter, err error) { respond.Error(w, h.d.Log, err) }

type statusReply struct {
	Running       bool                  `json:"running"`
	Model         string                `json:"model"`
	TokensUsed    int                   `json:"tokensUsed"`
	EstimatedCost float64               `json:"estimatedCost"`
	Turns         int                   `json:"turns"`
	Usage         protocol.UsageSummary `json:"usage"`
}

func (h handlers) status(w http.ResponseWriter, r *http.Request) {
	u, ok := forward.Call(h.d, w, r, protocol.SummarizeUsage, protocol.UsageSummaryRequest{})
	if !ok {
		return
	}
	m, ok := forward.Call(h.d, w, r, protocol.GetModel, protocol.Empty{})
	if !ok {
		return
	}
	respond.JSON(w, http.StatusOK, statusReply{
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
	forward.Serve(h.d, w, r, usageTotals, protocol.SummarizeUsage, http.StatusOK, func(u protocol.UsageSummary) any {
		return costReply{Summary: costSummary(u), UsageSummary: withByModel(u)}
	})
}

func usageTotals(http.ResponseWriter, *http.Request) (protocol.UsageSummaryRequest, error) {
	return protocol.UsageSummaryRequest{}, nil
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
	forward.Serve(h.d, w, r, forward.NoInput, protocol.ResetUsage, http.StatusOK, func(rep protocol.UsageReset) any {
		return resetReply{OK: true, Message: "Cost tracking reset", ResetAt: rep.ResetAt}
	})
}

func (h handlers) getModel(w http.ResponseWriter, r *http.Request) {
	forward.Serve(h.d, w, r, forward.NoInput, protocol.GetModel, http.StatusOK, nil)
}

type modelReply struct {
	OK    bool   `json:"ok"`
	Model string `json:"model"`
}

func (h handlers) putModel(w http.ResponseWriter, r *http.Request) {
	forward.Serve(h.d, w, r, h.modelChoice, protocol.SetModel, http.StatusOK, func(m protocol.AgentModel) any {
		return modelReply{OK: true, Model: m.Model}
	})
}

func (h handlers) modelChoice(w http.ResponseWriter, r *http.Request) (protocol.AgentModel, error) {
	f, err := input.Decode(w, r, h.d.BodyLimit)
	if err != nil {
		return protocol.AgentModel{}, err
	}
	model, _, ok := f.Str("model")
	if !ok || model == "" {
		return protocol.AgentModel{}, protocol.Errorf(protocol.Invalid, "model is required")
	}
	return protocol.AgentModel{Model: model}, nil
}

// active lists the running group steps and the running sub-agents of
// chat turns (spawn_agent); on a team server only those in the user's
// teams' workspaces (a workspace of no team is the operator's).
func (h handlers) active(w http.ResponseWriter, r *http.Request) {
	u, team := teamauth.UserFrom(r.Context())
	visible := func(teamID string) bool { return !team || (teamID != "" && u.Role(teamID) != "") }
	groups, ok := forward.Call(h.d, w, r, protocol.ListActiveAgents, protocol.Empty{})
	if !ok {
		return
	}
	subs, ok := forward.Call(h.d, w, r, protocol.ListSubAgents, protocol.Empty{})
	if !ok {
		return
	}
	rep := protocol.ActiveAgents{
		Workers:   keep(groups.Workers, func(a protocol.ActiveAgent) bool { return visible(a.TeamID) }),
		Active:    keep(groups.Active, func(a protocol.ActiveAgent) bool { return visible(a.TeamID) }),
		SubAgents: keep(subs.SubAgents, func(a protocol.SubAgent) bool { return visible(a.TeamID) }),
	}
	respond.JSON(w, http.StatusOK, rep)
}

// keep is the elements of s that pass, never nil (an empty JSON array).
func keep[T any](s []T, pass func(T) bool) []T {
	out := []T{}
	for _, v := range s {
		if pass(v) {
			out = append(out, v)
		}
	}
	return out
}

// listGroups lists the groups; on a team server only those of the user's
// teams (a group of no team is the operator's).
func (h handlers) listGroups(w http.ResponseWriter, r *http.Request) {
	u, team := teamauth.UserFrom(r.Context())
	forward.Serve(h.d, w, r, forward.NoInput, protocol.ListGroups, http.StatusOK,
		func(rep protocol.AgentGroupList) any {
			if !team {
				return forward.OrEmpty(rep.Groups)
			}
			kept := []protocol.AgentGroup{}
			for _, g := range rep.Groups {
				if g.TeamID != "" && u.Role(g.TeamID) != "" {
					kept = append(kept, g)
				}
			}
			return kept
		})
}

func (h handlers) createGroup(w http.ResponseWriter, r *http.Request) {
	forward.Serve(h.d, w, r, h.groupWrite(false), protocol.CreateGroup, http.StatusCreated, nil)
}

// groupWrite reads a group's fields from the body, and its {id} when
// withID.
func (h handlers) groupWrite(withID bool) forward.Reader[protocol.AgentGroupWrite] {
	return func(w http.ResponseWriter, r *http.Request) (protocol.AgentGroupWrite, error) {
		var gw protocol.AgentGroupWrite
		if withID {
			ref, err := groupRef(w, r)
			if err != nil {
				return gw, err
			}
			gw.ID = ref.ID
		}
		f, err := input.Decode(w, r, h.d.BodyLimit)
		gw.Fields = f
		return gw, err
	}
}

// errGroupNotFound is the answer for an id that cannot name a stored group
// (not a safe segment): NotFound like any unknown id.
var errGroupNotFound = protocol.Errorf(protocol.NotFound, "Group not found")

// groupRef reads {id}.
func groupRef(_ http.ResponseWriter, r *http.Request) (protocol.AgentGroupRef, error) {
	id := chi.URLParam(r, "id")
	if !protocol.ValidID(id) {
		return protocol.AgentGroupRef{}, errGroupNotFound
	}
	return protocol.AgentGroupRef{ID: id}, nil
}

func (h handlers) getGroup(w http.ResponseWriter, r *http.Request) {
	forward.Serve(h.d, w, r, groupRef, protocol.GetGroup, http.StatusOK, nil)
}

func (h handlers) updateGroup(w http.ResponseWriter, r *http.Request) {
	forward.Serve(h.d, w, r, h.groupWrite(true), protocol.UpdateGroup, http.StatusOK, nil)
}

func (h handlers) deleteGroup(w http.ResponseWriter, r *http.Request) {
	forward.Serve(h.d, w, r, groupRef, protocol.DeleteGroup, http.StatusOK, nil)
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
	ref, err := groupRef(w, r)
	if err != nil {
		h.fail(w, err)
		return
	}
	id := ref.ID
	f, err := input.Decode(w, r, h.d.BodyLimit)
	if err != nil {
		h.fail(w, err)
		return
	}
	if _, ok := forward.Call(h.d, w, r, protocol.GetGroup, ref); !ok {
		return
	}
	task, _, ok := f.Str("task")
	if !ok || task == "" {
		h.fail(w, protocol.Errorf(protocol.Invalid, "task is required"))
		return
	}
	teamID, _, err := f.OptString("teamId")
	if err != nil {
		h.fail(w, err)
		return
	}
	// The workspace and user the authorization step resolved: the
	// members' turns run as that user, under the workspace team's
	// governance.
	sc, _ := teamauth.ScopeFrom(r.Context())
	if sc.Field != "" {
		if err := input.CheckSegment(sc.Field, sc.Workspace); err != nil {
			h.fail(w, err)
			return
		}
	}
	if sc.User != "" {
		teamID = sc.Team
	}
	job, ok := forward.Call(h.d, w, r, protocol.RunGroup,
		protocol.GroupRunRequest{GroupID: id, Task: task, TeamID: teamID, Workspace: sc.Workspace, User: sc.User})
	if !ok {
		return
	}
	respond.JSON(w, http.StatusOK, runReply{
		JobID: job.JobID, GroupID: job.GroupID, GroupName: job.GroupName, Strategy: job.Strategy,
		MemberCount: job.MemberCount, Task: job.Task, Status: job.Status,
	})
}

// getJob reads a run of the group. On a team server the group's team is
// not enough: the run worked in its workspace (whose team the job
// carries), so its task and outputs are that team's, and a member of the
// group's team who is not in it is told the job does not exist, as GET
// /api/jobs/{id} does.
func (h handlers) getJob(w http.ResponseWriter, r *http.Request) {
	ref, err := jobRef(w, r)
	if err != nil {
		h.fail(w, err)
		return
	}
	job, ok := forward.Call(h.d, w, r, protocol.GetGroupJob, ref)
	if !ok {
		return
	}
	if u, team := teamauth.UserFrom(r.Context()); team && (job.TeamID == "" || u.Role(job.TeamID) == "") {
		h.fail(w, errJobNotFound)
		return
	}
	respond.JSON(w, http.StatusOK, job)
}

// errJobNotFound is the answer for a job the caller may not see.
var errJobNotFound = protocol.Errorf(protocol.NotFound, "Job not found")

func jobRef(w http.ResponseWriter, r *http.Request) (protocol.GroupJobRequest, error) {
	ref, err := groupRef(w, r)
	if err != nil {
		return protocol.GroupJobRequest{}, err
	}
	jobID := chi.URLParam(r, "jobId")
	if !protocol.ValidID(jobID) {
		return protocol.GroupJobRequest{}, errJobNotFound
	}
	return protocol.GroupJobRequest{GroupID: ref.ID, JobID: jobID}, nil
}
