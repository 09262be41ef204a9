package turn

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/autosave"
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

// NotificationData is the data of a notification event.
type NotificationData struct {
	Type    string                   `json:"type"`
	Title   string                   `json:"title"`
	Message string                   `json:"message"`
	Pattern protocol.WorkflowPattern `json:"pattern"`
}

// Workflow-capture notification texts.
const (
	workflowCapturedType  = "workflow_captured"
	workflowCapturedTitle = "Pattern detected"
)

// workflowCapturedMessage is the notification's message for a pattern.
func workflowCapturedMessage(name string) string {
	return "Detected repeating workflow: " + name + ". Save as a reusable skill?"
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
	if err := t.pub.Emit(protocol.EventNotification, NotificationData{
		Type: workflowCapturedType, Title: workflowCapturedTitle, Message: workflowCapturedMessage(rep.Pattern.Name), Pattern: *rep.Pattern,
	}); err != nil {
		t.logger().Error("publish notification", "err", err)
	}
	t.notify(protocol.NotifyWorkflow, workflowCapturedTitle, workflowCapturedMessage(rep.Pattern.Name))
}

// recordExtraUsage adds the turn's helper calls (GEPA, compression) to the
// usage ledger, each under its own model.
func (t *Turn) recordExtraUsage(res agent.Result) {
	for _, x := range res.Extra {
		t.recordUsage(agent.Result{Model: x.Model, Usage: agent.Usage{InputTokens: x.InputTokens, OutputTokens: x.OutputTokens}, Cost: x.Cost})
	}
}

// BudgetWarning is the step of a workspace that spent its budget
// (reference §1.9 (1)), or "" while it has not.
func BudgetWarning(spent, budget float64) string {
	if budget <= 0 || spent < budget {
		return ""
	}
	return fmt.Sprintf("\u26a0\ufe0f Budget limit reached ($%.2f / $%.2f). Responses may be limited.", spent, budget)
}

// warnWorkspaceBudget tells the user when the workspace's recorded spend
// (the usage ledger since the last cost reset) reached its workspace.json
// budget. The turn still runs; an unreadable ledger warns no one.
func (t *Turn) warnWorkspaceBudget(ws protocol.Workspace) {
	if t.req.Workspace == "default" || ws.Budget <= 0 {
		return
	}
	sum, err := bus.Call(t.ctx, t.deps.Conn, protocol.SummarizeUsage,
		protocol.UsageSummaryRequest{Workspace: t.req.Workspace}, bus.Within(t.deps.Config.StoreTimeout))
	if err != nil {
		if !errors.Is(err, protocol.ErrUnavailable) {
			t.logger().Warn("workspace spend unavailable; no budget warning", "err", err)
		}
		return
	}
	if text := BudgetWarning(sum.EstimatedCost, ws.Budget); text != "" {
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
// worth keeping (autosave.Extract) and reports it in a step before done.
// Saving is one store append per fact, in parallel; the store embeds them
// in the background, so the turn waits for no model. Failures are logged,
// never the turn's.
func (t *Turn) autoSave(message string, res agent.Result) {
	if slices.Contains(res.ToolsUsed, "save_memory") || !t.deps.Settings.AutoSaveOn(t.req.Workspace) {
		return
	}
	facts := autosave.Extract(message, res.Content)
	if len(facts) == 0 {
		return
	}
	var saved atomic.Int32
	var wg sync.WaitGroup
	for _, f := range facts {
		wg.Go(func() {
			rep, err := bus.Call(t.ctx, t.deps.Conn, protocol.SaveMemory, protocol.MemorySaveRequest{
				Workspace: t.req.Workspace, User: t.req.User, Content: f.Content, Importance: f.Importance,
				Source: protocol.SourceAgentInferred, Personal: f.Personal,
			}, bus.Within(t.deps.Config.StoreTimeout))
			switch {
			case err != nil:
				t.logger().Warn("auto-save memory", "err", err)
			case !rep.Duplicate:
				saved.Add(1)
			}
		})
	}
	wg.Wait()
	if n := int(saved.Load()); n > 0 {
		if err := t.pub.Emit(protocol.EventStep, protocol.TokenData{Content: autosave.Step(n)}); err != nil {
			t.logger().Warn("publish auto-save step", "err", err)
		}
	}
}
