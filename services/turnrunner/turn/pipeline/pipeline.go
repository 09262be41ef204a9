// Package pipeline is what an agent turn adds around its model loop
// (reference §1.9 (4)–(9)): which helper features the loop gets (the
// vault's model key, GEPA, context compression), the vague-first-message
// check, and what a finished run leads to — its usage in the ledger,
// workflow capture, the workspace budget warning, auto-saved facts.
package pipeline

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/autosave"
	"github.com/waggle-os/core/services/turnrunner/notices"
)

// Settings is what the pipeline reads of config.json's settings and the
// vault (turn.Settings).
type Settings interface {
	// ModelKey is the vault's key for model in workspace ("" for none).
	ModelKey(ctx context.Context, workspace, model string) string
	// AutoSaveOn reports whether auto-save is on for workspace.
	AutoSaveOn(workspace string) bool
}

// Turn is the agent turn the pipeline serves: its request and context,
// and how it reaches the bus, its stream and its user. The turn builds
// one when it needs a step (package turn, Turn.pipeline).
type Turn struct {
	Ctx context.Context
	Req protocol.TurnRequest
	// Conn reaches the session store; StoreTimeout bounds one request.
	Conn         *nats.Conn
	StoreTimeout time.Duration
	// APIKey is the runner's model-server key (--llm-api-key): with none,
	// the vault's key for the model is used.
	APIKey   string
	Settings Settings
	// Emit publishes an event in the turn's stream.
	Emit    func(event string, data any) error
	Notices notices.Publisher
	// Log is the turn's logger.
	Log *slog.Logger
}

// LoopOptions sets the pipeline fields of an agent request. GEPA runs on
// the session's first user message only, never on a slash command or the
// prompt a command rerouted to the model (message differs from what the
// user typed).
func (t Turn) LoopOptions(req *agent.Request, mc agent.ModelConfig, history []protocol.Message, message string) {
	req.APIKeys = mc.APIKeys
	if len(req.APIKeys) == 0 && t.APIKey == "" {
		// No key configured: the one saved in the app's vault, if any
		// (asked per turn, cached briefly; a new key applies at once).
		if key := t.Settings.ModelKey(t.Ctx, t.Req.Workspace, req.Model.Model); key != "" {
			req.APIKeys = []string{key}
		}
	}
	if mc.GEPAEnabled() && message == t.Req.Message && !protocol.IsSlashCommand(message) && !hasUserMessage(history) {
		req.Expand = &agent.ExpandOptions{Model: cmp.Or(mc.BudgetModel, req.Model.Model)}
	}
	if mc.BudgetModel != "" {
		c := mc.Compression
		req.Compress = &agent.CompressOptions{
			Model: mc.BudgetModel, Session: t.Req.Workspace + "/" + t.Req.Session,
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

// CaptureWorkflow reports the turn's tool sequence to the session store
// and announces a pattern it completed for the first time. Capture is a
// suggestion: a failure is logged, never shown.
func (t Turn) CaptureWorkflow(res agent.Result) {
	if len(res.ToolsUsed) < workflowMinSteps {
		return
	}
	rep, err := bus.Call(t.Ctx, t.Conn, protocol.ObserveWorkflow,
		protocol.WorkflowObserveRequest{Workspace: t.Req.Workspace, Session: t.Req.Session, Tools: res.ToolsUsed}, bus.Within(t.StoreTimeout))
	if err != nil {
		if !errors.Is(err, protocol.ErrUnavailable) {
			t.Log.Warn("workflow capture", "err", err)
		}
		return
	}
	if rep.Pattern == nil {
		return
	}
	if err := t.Emit(protocol.EventNotification, notices.Workflow(*rep.Pattern)); err != nil {
		t.Log.Error("publish notification", "err", err)
	}
	t.Notices.WorkflowCaptured(t.Req, rep.Pattern.Name)
}

// RecordUsage adds the turn's tokens to the usage ledger. The ledger is
// bookkeeping: a failure is logged, never shown to the user.
func (t Turn) RecordUsage(res agent.Result) {
	if res.Usage.InputTokens == 0 && res.Usage.OutputTokens == 0 {
		return
	}
	_, err := bus.Call(context.Background(), t.Conn, protocol.RecordUsage, protocol.UsageRecord{
		Workspace: t.Req.Workspace, Session: t.Req.Session, TurnID: t.Req.TurnID, Model: res.Model,
		InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens, Cost: res.Cost,
		Timestamp: protocol.Timestamp(time.Now()),
	}, bus.Within(t.StoreTimeout))
	if err != nil && !errors.Is(err, protocol.ErrUnavailable) {
		t.Log.Warn("record usage", "err", err)
	}
}

// RecordExtraUsage adds the turn's helper calls (GEPA, compression) to the
// usage ledger, each under its own model.
func (t Turn) RecordExtraUsage(res agent.Result) {
	for _, x := range res.Extra {
		t.RecordUsage(agent.Result{Model: x.Model, Usage: agent.Usage{InputTokens: x.InputTokens, OutputTokens: x.OutputTokens}, Cost: x.Cost})
	}
}

// WarnWorkspaceBudget tells the user when the workspace reached its
// workspace.json budget (notices.WorkspaceBudget). The turn still runs.
func (t Turn) WarnWorkspaceBudget(ws protocol.Workspace) {
	if text := notices.WorkspaceBudget(t.Ctx, t.Conn, t.StoreTimeout, t.Log, t.Req.Workspace, ws.Budget); text != "" {
		if err := t.Emit(protocol.EventStep, protocol.TokenData{Content: text}); err != nil {
			t.Log.Error("publish step", "err", err)
		}
	}
}

// Vague reports whether message is a vague first message (the ambiguity
// guard's case; GEPA may still expand it).
func (t Turn) Vague(message string, history []protocol.Message) bool {
	return message == t.Req.Message && !protocol.IsSlashCommand(message) && !hasUserMessage(history) && agent.IsVague(message)
}

// AutoSave keeps what an agent turn that did not call save_memory said
// worth keeping (autosave.Extract, autosave.Save) and reports it in a step
// before done. The turn waits for no model; failures are logged, never
// the turn's.
func (t Turn) AutoSave(message string, res agent.Result) {
	if slices.Contains(res.ToolsUsed, "save_memory") || !t.Settings.AutoSaveOn(t.Req.Workspace) {
		return
	}
	facts := autosave.Extract(message, res.Content)
	if len(facts) == 0 {
		return
	}
	store := autosave.Store{Conn: t.Conn, Timeout: t.StoreTimeout, Log: t.Log}
	if n := store.Save(t.Ctx, t.Req.Workspace, t.Req.User, facts); n > 0 {
		if err := t.Emit(protocol.EventStep, protocol.TokenData{Content: autosave.Step(n)}); err != nil {
			t.Log.Warn("publish auto-save step", "err", err)
		}
	}
}
