package turn

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/telemetry"
	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/agentcontext"
	"github.com/waggle-os/core/services/turnrunner/approvalgate"
	"github.com/waggle-os/core/services/turnrunner/epilogue"
	"github.com/waggle-os/core/services/turnrunner/subagent"
	"github.com/waggle-os/core/services/turnrunner/tools"
	"github.com/waggle-os/core/services/turnrunner/turn/pipeline"
	"github.com/waggle-os/core/services/turnrunner/turntools"
)

// errPublish cancels a turn whose events can no longer be published.
var errPublish = errors.New("turn events could not be published")

// governanceText is shown when a team user's tool policy cannot be read:
// the turn does not run tools it cannot vouch for.
const governanceText = "Could not check your team's tool policy. Try again in a moment."

// runAgent runs the agent loop for message (the user's text, or the prompt
// a slash command rerouted to the model) and ends the turn. resume, when
// set, continues from another runner's checkpoint.
func (t *Turn) runAgent(message string, resume *agent.Resume) {
	log := t.logger()
	mc, in, policy, ok := t.prepareAgent(log, resume)
	if !ok {
		return
	}
	if mc.DefaultModel == "" {
		mc.DefaultModel = t.deps.FallbackModel()
	}
	choice := agent.ResolveModel(mc, t.req.Model, in.Workspace.Model, message, in.Spent)
	ctxl := t.contextLoader()
	persona := in.Persona
	mem := agentcontext.Memory{Store: ctxl.Store, User: t.req.User}
	sub := &subagent.Spawner{Turn: t.req, Agent: t.deps.Agent, Limits: t.deps.Config.SubAgents, List: t.deps.SubAgents,
		Persona: ctxl.Persona, Sink: &turnSink{t: t}, PersistTool: t.persistTool, RecordUsage: t.pipeline().RecordUsage, Log: log,
		Model: choice, Prices: mc.Prices, ReadOnly: persona.ReadOnly, TeamID: in.Workspace.TeamID, Remote: t.deps.Remote}
	env := tools.Env{FilesDir: t.filesDir(), Workspace: t.req.Workspace, Memory: mem,
		WebSearch: turntools.WebSearch(mc.WebSearch, func(p string) string { return t.deps.Settings.SearchKey(t.ctx, in.Workspace.TeamID, p) }),
		Plan:      tools.ReplayPlan(in.HistoryTools, in.TurnTools),
		Knowledge: mem, Mind: agentcontext.Mind{Store: ctxl.Store, Workspace: t.req.Workspace, User: t.req.User}, SubAgents: sub}
	offer := turntools.Choose(t.ctx, t.deps.Tools, t.deps.MCP, env, t.mcpStep, persona, policy)
	mcpSet, blocked := offer.MCP, offer.Blocked
	gate := t.openGate()
	defer t.closeGate(gate)

	areq := agent.Request{
		TurnID:       t.req.TurnID,
		Model:        choice,
		Prices:       mc.Prices,
		BuildPrompt:  ctxl.Prompt(t.deps.Config.PromptBudget, in.Context, in.Workspace, persona, message, len(in.History), t.pipeline().Vague(message, in.History)),
		History:      in.History,
		HistoryTools: in.HistoryTools,
		Message:      message,
		Tools:        offer.Offered,
		Blocked:      blocked,
		Gate:         mcpSet.Gate(gate),
		Recall:       agentcontext.Recaller{Memory: mem, Workspace: t.req.Workspace, Loaded: in.Recall},
		Sink:         &turnSink{t: t},
		OnToolEvent:  t.persistTool,
		Checkpoint:   turnCheckpoint{t: t},
		Resume:       resume,
		Log:          log,
	}
	t.pipeline().LoopOptions(&areq, mc, in.History, message)
	sub.Offered, sub.Blocked, sub.APIKeys = offer.Workers, blocked, areq.APIKeys
	sub.OpenGate = func() (agent.Gate, func()) {
		g := t.openGate()
		return mcpSet.Gate(g), func() { t.closeGate(g) }
	}
	res, err := t.deps.Agent.Run(t.ctx, areq)
	if t.silent() {
		return
	}
	t.endAgentTurn(log, message, persona.ID, res, err)
}

// prepareAgent loads what the agent needs before the model is called: the
// turn's inputs and the user's tool policy, which also caps the turn's
// autonomy. It ends the turn itself and
// reports !ok when either cannot be read; a resumed turn gets the finished
// calls of its checkpoint, a fresh one the workspace budget warning.
func (t *Turn) prepareAgent(log *slog.Logger, resume *agent.Resume) (agent.ModelConfig, agentcontext.Inputs, protocol.ToolPolicy, bool) {
	var policy protocol.ToolPolicy
	mc, in, err := t.agentInputs()
	if err != nil {
		if t.ctx.Err() != nil {
			t.abortWith(t.resumedText(resume))
			return mc, in, policy, false
		}
		log.Error("load turn context", "err", err)
		t.failPersisted(t.resumedText(resume), "Could not load this conversation. Try sending your message again.")
		return mc, in, policy, false
	}
	if t.req.User != "" {
		policy, err = t.deps.Policies.Policy(t.ctx, t.req.User, t.req.Workspace, time.Now())
		if err != nil {
			if t.ctx.Err() != nil {
				t.abortWith(t.resumedText(resume))
				return mc, in, policy, false
			}
			// Fail closed: without the policy no tool may run.
			log.Error("tool policy unavailable", "user", t.req.User, "err", err)
			t.failPersisted(t.resumedText(resume), governanceText)
			return mc, in, policy, false
		}
		t.capAutonomy(policy, resume != nil)
	}
	if resume != nil {
		resume.Results = in.TurnTools
	} else {
		t.pipeline().WarnWorkspaceBudget(in.Workspace)
	}
	return mc, in, policy, true
}

// openGate is the turn's approval gate.
func (t *Turn) openGate() *approvalgate.Gate {
	gateCfg := t.deps.Config.Approval
	if gateCfg.Logger == nil {
		gateCfg.Logger = t.deps.Log
	}
	return approvalgate.New(t.deps.Conn, approvalgate.Turn{
		TurnID: t.req.TurnID, Workspace: t.req.Workspace, Session: t.req.Session, Autonomy: t.req.Autonomy,
	}, approvalNotifier{t}, gateCfg)
}

// closeGate denies the gate's pending approvals, unless the turn goes on
// elsewhere: then its approvals are not ours to deny.
func (t *Turn) closeGate(gate *approvalgate.Gate) {
	if t.silent() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.deps.Config.StoreTimeout)
	defer cancel()
	gate.Close(ctx)
}

// endAgentTurn records the run's usage and ends the turn by its outcome:
// aborted, failed, or done with the reply persisted first.
func (t *Turn) endAgentTurn(log *slog.Logger, message, persona string, res agent.Result, err error) {
	// The usage ledger's write overlaps the reply's; both are on disk
	// before the turn's last event, so a client that reads its cost after
	// done finds this turn in it.
	usage := make(chan struct{})
	steps := t.pipeline()
	go func(res agent.Result) { // a copy: the reply's content is rewritten below
		defer close(usage)
		steps.RecordUsage(res)
		steps.RecordExtraUsage(res)
	}(res)
	switch {
	case t.ctx.Err() != nil:
		<-usage
		t.abortWith(res.Content)
	case err != nil:
		<-usage
		log.Warn("agent turn failed", "model", res.Model, "err", err)
		t.failPersisted(res.Content, agent.FriendlyError(err))
	default:
		steps.CaptureWorkflow(res)
		res.Content = epilogue.Final(persona, res.Content, res.ToolsUsed)
		perr := t.persist(protocol.Message{Role: protocol.RoleAssistant, Content: res.Content})
		<-usage
		if perr != nil {
			log.Error("persist assistant message", "err", perr)
			t.finishError("Your reply could not be saved. Try sending your message again.")
			return
		}
		steps.AutoSave(message, res)
		t.finish(protocol.EventDone, agent.DoneData(res))
	}
}

// resumedText is the reply text a resumed turn already streamed.
func (t *Turn) resumedText(resume *agent.Resume) string {
	if resume == nil {
		return ""
	}
	return resume.Content
}

// turnCheckpoint makes the agent's checkpoints durable in the turn stream.
type turnCheckpoint struct{ t *Turn }

// Step stores a model step's tool calls before any of them runs.
func (c turnCheckpoint) Step(_ context.Context, cp protocol.StepCheckpoint) error {
	return c.t.pub.Mark(protocol.EventCheckpointStep, cp)
}

// Executing stores that a tool call is about to run.
func (c turnCheckpoint) Executing(_ context.Context, cp protocol.ExecCheckpoint) error {
	return c.t.pub.Mark(protocol.EventCheckpointExec, cp)
}

// prefetched is an agent turn's inputs loaded ahead of time.
type prefetched struct {
	mc  agent.ModelConfig
	in  agentcontext.Inputs
	err error
}

// prefetchInputs starts loading the agent's inputs. The channel is
// buffered: the load finishes (bounded by StoreTimeout) even if the turn
// takes another path and never reads it.
func (t *Turn) prefetchInputs() <-chan prefetched {
	ch := make(chan prefetched, 1)
	mc := t.deps.Settings.Get()
	go func() {
		in, err := t.contextLoader().Inputs(t.ctx, mc)
		ch <- prefetched{mc, in, err}
	}()
	return ch
}

// agentInputs returns the prefetched inputs, or loads them now.
func (t *Turn) agentInputs() (agent.ModelConfig, agentcontext.Inputs, error) {
	if t.prefetch != nil {
		p := <-t.prefetch
		t.prefetch = nil
		return p.mc, p.in, p.err
	}
	mc := t.deps.Settings.Get()
	in, err := t.contextLoader().Inputs(t.ctx, mc)
	return mc, in, err
}

// contextLoader reads the turn's context from the session store.
func (t *Turn) contextLoader() agentcontext.Loader {
	return agentcontext.Loader{Store: agentcontext.Store{Conn: t.deps.Conn, Timeout: t.deps.Config.StoreTimeout}, Req: t.req, Log: t.logger()}
}

// filesDir is the directory the turn's tools are confined to: the
// gateway-validated workspace path, else the workspace's files directory.
func (t *Turn) filesDir() string {
	if t.req.WorkspacePath != "" {
		return t.req.WorkspacePath
	}
	return filepath.Join(t.deps.Config.DataDir, "workspaces", t.req.Workspace, "files")
}

// persistTool stores a finished (or denied) tool call before the turn goes
// on, so a crash later in the turn loses none. The auto-recall's event is
// the exception: every model turn has one, it records no effect a crash
// could lose (a resumed turn recalls again), and waiting for its fsync
// would delay every first token. It is appended in the background; tool
// events stay in order behind one another, and the reply's persist waits
// for all of them (awaitTools).
func (t *Turn) persistTool(ev protocol.ToolEvent) {
	if _, known := t.deps.Tools.Get(ev.Name); known {
		// Only registered names: a model inventing tools must not grow the
		// metric's label set.
		telemetry.ToolCalls.WithLabelValues(ev.Name, ev.Status).Inc()
	}
	t.toolsMu.Lock()
	prev, done := t.toolsSaved, make(chan struct{})
	t.toolsSaved = done
	t.toolsMu.Unlock()
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		t.appendTool(ev)
	}()
	if ev.Name != agent.AutoRecallTool {
		<-done
	}
}

// awaitTools waits until every tool event handed over so far is stored
// (or failed, which is logged).
func (t *Turn) awaitTools() {
	t.toolsMu.Lock()
	ch := t.toolsSaved
	t.toolsMu.Unlock()
	if ch != nil {
		<-ch
	}
}

// appendTool sends one tool event to the session store.
func (t *Turn) appendTool(ev protocol.ToolEvent) {
	if t.awaitUser() != nil {
		return // the turn ends: nothing of it is stored without its message
	}
	var key string
	if ev.Key != "" {
		key = protocol.AppendKey(t.req.TurnID, "tool", ev.Key)
	}
	err := t.appendToStore(protocol.AppendRequest{SessionRef: t.ref(), Tool: &ev, Key: key})
	if err != nil {
		t.deps.Log.Error("persist tool event", "turn", t.req.TurnID, "tool", ev.Name, "err", err)
	}
}

// pipeline is the turn as the steps around its agent loop see it
// (package pipeline).
func (t *Turn) pipeline() pipeline.Turn {
	return pipeline.Turn{Ctx: t.ctx, Req: t.req, Conn: t.deps.Conn, StoreTimeout: t.deps.Config.StoreTimeout,
		APIKey: t.deps.Config.LLMAPIKey, Settings: t.deps.Settings, Notices: t.notices(), Log: t.logger(),
		Emit: func(event string, data any) error { return t.pub.Emit(event, data) }}
}

// failPersisted ends a failed turn: what the assistant produced is stored
// with the user-facing reason (so the next turn's history stays valid and
// nothing is lost), then the error event ends the stream.
func (t *Turn) failPersisted(content, message string) {
	if err := t.persist(protocol.Message{Role: protocol.RoleAssistant, Content: content, Error: message}); err != nil {
		t.deps.Log.Error("persist failed reply", "turn", t.req.TurnID, "err", err)
	}
	t.finishError(message)
}

// turnSink passes the agent's events to the turn's publisher. Publishing is
// asynchronous, so a token costs no round trip; a publish that fails means
// no one can see the turn any more, so the turn is cancelled (and what it
// produced is persisted).
type turnSink struct {
	t      *Turn
	failed atomic.Bool
}

// Emit publishes one event.
func (k *turnSink) Emit(event string, data any) {
	if err := k.t.pub.Emit(event, data); err != nil && k.failed.CompareAndSwap(false, true) {
		k.t.deps.Log.Error("publish event", "turn", k.t.req.TurnID, "event", event, "err", err)
		k.t.cancel(errPublish)
	}
}

// capAutonomy holds the turn to its team's autonomy cap: whoever sends a
// chat may ask for any level, but a team's turn runs at most at the level
// its admins set (protocol.Team.MaxAutonomy), and a lowered turn says so.
// A resumed turn is lowered again (its request is the original) but not
// told twice.
func (t *Turn) capAutonomy(policy protocol.ToolPolicy, resumed bool) {
	max, capped := policy.AutonomyCap()
	if !capped {
		return
	}
	a, lowered := t.req.Autonomy.Capped(max, time.Now())
	if !lowered {
		return
	}
	t.logger().Info("autonomy lowered by team policy", "asked", t.req.Autonomy.Level, "max", max, "team", policy.Team)
	t.req.Autonomy = a
	if resumed {
		return
	}
	if err := t.pub.Emit(protocol.EventStep, protocol.TokenData{Content: protocol.AutonomyLoweredText(max)}); err != nil {
		t.logger().Error("publish step", "err", err)
	}
}

// mcpStep shows an MCP server's trouble (it stopped and is restarted) as a
// step of the turn.
func (t *Turn) mcpStep(text string) {
	if err := t.pub.Emit(protocol.EventStep, protocol.TokenData{Content: text}); err != nil {
		t.deps.Log.Warn("publish step", "turn", t.req.TurnID, "err", err)
	}
}
