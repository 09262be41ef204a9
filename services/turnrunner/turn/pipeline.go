package turn

import (
	"cmp"
	"errors"
	"slices"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/autosave"
	"github.com/waggle-os/core/services/turnrunner/notices"
)

// The parts of a turn around the agent loop (reference §1.9 (4)–(9)):
// which helper features a turn gets (GEPA, context compression, the
// credential pool), and what happens to a finished reply (workflow
// capture, regulated-persona disclaimers, the schedule hint).

// loopOptions sets the pipeline fields of an agent request. GEPA runs on
// the session's first user message only, never on a slash command or the
// prompt a command rerouted to the model (message differs from what the
// user typed).
func (t *Turn) loopOptions(req *agent.Request, mc agent.ModelConfig, history []protocol.Message, message string) {
	req.APIKeys = mc.APIKeys
	if len(req.APIKeys) == 0 && t.deps.Config.LLMAPIKey == "" {
		// No key configured: the one saved in the app's vault, if any
		// (asked per turn, cached briefly; a new key applies at once).
		if key := t.deps.Settings.ModelKey(t.ctx, t.req.Workspace, req.Model.Model); key != "" {
			req.APIKeys = []string{key}
		}
	}
	if mc.GEPAEnabled() && message == t.req.Message && !protocol.IsSlashCommand(message) && !hasUserMessage(history) {
		req.Expand = &agent.ExpandOptions{Model: cmp.Or(mc.BudgetModel, req.Model.Model)}
	}
	if mc.BudgetModel != "" {
		c := mc.Compression
		req.Compress = &agent.CompressOptions{
			Model: mc.BudgetModel, Session: t.req.Workspace + "/" + t.req.Session,
			MaxContextTokens: c.MaxContextTokens, Threshold: c.Threshold,
			HeadMessages: c.HeadMessages, TailTokens: c.TailTokens,
		}
	}
}

func hasUserMessage(history []protocol.Message) bool {
	for _, m := range history {
		if m.Role == protocol.RoleUser {
			return true
		}
	}
	return false
}

// workflowMinSteps is the shortest tool sequence worth reporting (the
// session store's rule needs at least 3 calls).
const workflowMinSteps = 3

// captureWorkflow reports the turn's tool sequence to the session store
// and announces a pattern it completed for the first time. Capture is a
// suggestion: a failure is logged, never shown.
func (t *Turn) captureWorkflow(res agent.Result) {
	if len(res.ToolsUsed) < workflowMinSteps {
		return
	}
	rep, err := bus.Call(t.ctx, t.deps.Conn, protocol.ObserveWorkflow,
		protocol.WorkflowObserveRequest{Workspace: t.req.Workspace, Session: t.req.Session, Tools: res.ToolsUsed}, bus.Within(t.deps.Config.StoreTimeout))
	if err != nil {
		if !errors.Is(err, protocol.ErrUnavailable) {
			t.logger().Warn("workflow capture", "err", err)
		}
		return
	}
	if rep.Pattern == nil {
		return
	}
	if err := t.pub.Emit(protocol.EventNotification, notices.Workflow(*rep.Pattern)); err != nil {
		t.logger().Error("publish notification", "err", err)
	}
	t.notices().WorkflowCaptured(t.req, rep.Pattern.Name)
}

// recordExtraUsage adds the turn's helper calls (GEPA, compression) to the
// usage ledger, each under its own model.
func (t *Turn) recordExtraUsage(res agent.Result) {
	for _, x := range res.Extra {
		t.recordUsage(agent.Result{Model: x.Model, Usage: agent.Usage{InputTokens: x.InputTokens, OutputTokens: x.OutputTokens}, Cost: x.Cost})
	}
}

// warnWorkspaceBudget tells the user when the workspace reached its
// workspace.json budget (notices.WorkspaceBudget). The turn still runs.
func (t *Turn) warnWorkspaceBudget(ws protocol.Workspace) {
	if text := notices.WorkspaceBudget(t.ctx, t.deps.Conn, t.deps.Config.StoreTimeout, t.logger(), t.req.Workspace, ws.Budget); text != "" {
		if err := t.pub.Emit(protocol.EventStep, protocol.TokenData{Content: text}); err != nil {
			t.logger().Error("publish step", "err", err)
		}
	}
}

// vague reports whether message is a vague first message (the ambiguity
// guard's case; GEPA may still expand it).
func (t *Turn) vague(message string, history []protocol.Message) bool {
	return message == t.req.Message && !protocol.IsSlashCommand(message) && !hasUserMessage(history) && agent.IsVague(message)
}

// autoSave keeps what an agent turn that did not call save_memory said
// worth keeping (autosave.Extract, autosave.Save) and reports it in a step
// before done. The turn waits for no model; failures are logged, never
// the turn's.
func (t *Turn) autoSave(message string, res agent.Result) {
	if slices.Contains(res.ToolsUsed, "save_memory") || !t.deps.Settings.AutoSaveOn(t.req.Workspace) {
		return
	}
	facts := autosave.Extract(message, res.Content)
	if len(facts) == 0 {
		return
	}
	store := autosave.Store{Conn: t.deps.Conn, Timeout: t.deps.Config.StoreTimeout, Log: t.logger()}
	if n := store.Save(t.ctx, t.req.Workspace, t.req.User, facts); n > 0 {
		if err := t.pub.Emit(protocol.EventStep, protocol.TokenData{Content: autosave.Step(n)}); err != nil {
			t.logger().Warn("publish auto-save step", "err", err)
		}
	}
}
