package turnrunner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/telemetry"
	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/approvalgate"
	"github.com/waggle-os/core/services/turnrunner/mcp"
	"github.com/waggle-os/core/services/turnrunner/tools"
)

// errPublish cancels a turn whose events can no longer be published.
var errPublish = errors.New("turn events could not be published")

// agentInputs is what a turn loads before the model is called.
type agentInputs struct {
	history   []protocol.Message
	toolEvs   []protocol.ToolEvent
	workspace protocol.Workspace
	spent     float64
	// turnTools are this turn's own tool events (a resumed turn's finished calls).
	turnTools []protocol.ToolEvent
	// context is the profile, preloaded frames and Workspace Now.
	context turnContext
}

// governanceText is shown when a team user's tool policy cannot be read:
// the turn does not run tools it cannot vouch for.
const governanceText = "Could not check your team's tool policy. Try again in a moment."

// runAgent runs the agent loop for message (the user's text, or the prompt
// a slash command rerouted to the model) and ends the turn. resume, when
// set, continues from another runner's checkpoint.
func (t *turn) runAgent(message string, resume *agent.Resume) {
	log := t.logger()
	mc, in, policy, ok := t.prepareAgent(log, resume)
	if !ok {
		return
	}
	if mc.DefaultModel == "" {
		mc.DefaultModel = t.svc.fallbackModel()
	}
	choice := agent.ResolveModel(mc, t.req.Model, in.workspace.Model, message, in.spent)
	persona := t.resolvePersona(t.ctx, firstNonEmpty(t.req.Persona, in.workspace.Persona))
	mem := busMemory{s: t.svc, user: t.req.User}
	sub := &subAgents{t: t, model: choice, prices: mc.Prices, readOnly: persona.readOnly, teamID: in.workspace.TeamID}
	env := tools.Env{FilesDir: t.filesDir(), Workspace: t.req.Workspace, Memory: mem,
		WebSearch: t.webSearch(mc.WebSearch, in.workspace.TeamID), Plan: tools.ReplayPlan(in.toolEvs, in.turnTools),
		Knowledge: mem, Mind: busMind{s: t.svc, workspace: t.req.Workspace, user: t.req.User}, SubAgents: sub}
	mcpSet, agentTools, workerTools, blocked := t.agentTools(env, persona, policy)
	gate := t.openGate()
	defer t.closeGate(gate)

	areq := agent.Request{
		TurnID:       t.req.TurnID,
		Model:        choice,
		Prices:       mc.Prices,
		BuildPrompt:  t.buildPrompt(in.context, in.workspace, persona, message, len(in.history), t.vague(message, in.history)),
		History:      in.history,
		HistoryTools: in.toolEvs,
		Message:      message,
		Tools:        agentTools,
		Blocked:      blocked,
		Gate:         mcpSet.Gate(gate),
		Recall:       recaller{mem: mem, workspace: t.req.Workspace},
		Sink:         &turnSink{t: t},
		OnToolEvent:  t.persistTool,
		Checkpoint:   turnCheckpoint{t: t},
		Resume:       resume,
		Log:          log,
	}
	t.loopOptions(&areq, mc, in.history, message)
	sub.offered, sub.blocked, sub.wrapGate, sub.apiKeys = workerTools, blocked, mcpSet.Gate, areq.APIKeys
	res, err := t.svc.agent.Run(t.ctx, areq)
	if t.silent() {
		return
	}
	t.endAgentTurn(log, message, persona.id, res, err)
}

// prepareAgent loads what the agent needs before the model is called: the
// turn's inputs and the user's tool policy, which also caps the turn's
// autonomy. It ends the turn itself and
// reports !ok when either cannot be read; a resumed turn gets the finished
// calls of its checkpoint, a fresh one the workspace budget warning.
func (t *turn) prepareAgent(log *slog.Logger, resume *agent.Resume) (agent.ModelConfig, agentInputs, protocol.ToolPolicy, bool) {
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
		policy, err = t.svc.policies.get(t.ctx, t.req.User, t.req.Workspace, time.Now())
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
		resume.Results = in.turnTools
	} else {
		t.warnWorkspaceBudget(in.workspace)
	}
	return mc, in, policy, true
}

// agentTools is the tools the turn offers the model: the built-ins bound
// to this turn that policy and persona allow, then the MCP servers' tools
// (none for a read-only or delegating persona: what they do is not known
// here); workers is what its sub-agents draw from — the same, but for a
// delegating persona the tools before its filter (policy still applied),
// as its workers do the work it does not; blocked is what the model is
// told it may not use.
func (t *turn) agentTools(env tools.Env, persona personaInfo, policy protocol.ToolPolicy) (set *mcp.ToolSet, offered, workers []agent.Tool, blocked []string) {
	bound := t.svc.tools.Bind(env, nil)
	builtIns := make([]agent.Tool, 0, len(bound))
	for _, b := range bound {
		if !policy.Blocks(b.Name()) {
			builtIns = append(builtIns, b)
		}
	}
	if policy.Governed {
		blocked = policy.BlockedTools
	}
	set, pool, blocked := t.mcpTools(builtIns, blocked, policy)
	offered, workers = personaTools(pool, len(builtIns), persona)
	return set, offered, workers, blocked
}

// personaTools splits pool — nBuiltIn built-ins, then MCP tools — into
// what persona's turn is offered and what its sub-agents draw from.
func personaTools(pool []agent.Tool, nBuiltIn int, persona personaInfo) (offered, workers []agent.Tool) {
	strict := persona.readOnly || persona.delegates
	offered = make([]agent.Tool, 0, len(pool))
	for i, tool := range pool {
		// The persona's lists name built-ins only, so they do not filter
		// MCP tools; a strict persona gets none.
		builtIn := i < nBuiltIn
		if builtIn && persona.allows(tool.Name()) || !builtIn && !strict {
			offered = append(offered, tool)
		}
	}
	if persona.delegates && !persona.readOnly {
		return offered, pool
	}
	return offered, offered
}

// webSearch is the turn's web search provider: config.json's, its API key
// from the vault of the workspace's team (the local vault on a desktop)
// when the file has none; with no provider in the file, the first of
// Tavily and Brave whose key the vault holds (the desktop app's Settings >
// Vault). The key goes to the provider only: never logged, never in a
// result.
func (t *turn) webSearch(cfg tools.WebSearchConfig, team string) tools.WebSearchConfig {
	if cfg.Provider != "" {
		if cfg.APIKey == "" && protocol.VaultSearchKeyNames(cfg.Provider) != nil {
			cfg.APIKey = t.svc.models.SearchKey(t.ctx, team, cfg.Provider)
		}
		return cfg
	}
	for _, p := range []string{tools.SearchTavily, tools.SearchBrave} {
		if key := t.svc.models.SearchKey(t.ctx, team, p); key != "" {
			return tools.WebSearchConfig{Provider: p, APIKey: key}
		}
	}
	return cfg
}

// openGate is the turn's approval gate.
func (t *turn) openGate() *approvalgate.Gate {
	s := t.svc
	gateCfg := s.cfg.Approval
	if gateCfg.Logger == nil {
		gateCfg.Logger = s.log
	}
	return approvalgate.New(s.nc, approvalgate.Turn{
		TurnID: t.req.TurnID, Workspace: t.req.Workspace, Session: t.req.Session, Autonomy: t.req.Autonomy,
	}, approvalNotifier{t}, gateCfg)
}

// closeGate denies the gate's pending approvals, unless the turn goes on
// elsewhere: then its approvals are not ours to deny.
func (t *turn) closeGate(gate *approvalgate.Gate) {
	if t.silent() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.svc.cfg.StoreTimeout)
	defer cancel()
	gate.Close(ctx)
}

// endAgentTurn records the run's usage and ends the turn by its outcome:
// aborted, failed, or done with the reply persisted first.
func (t *turn) endAgentTurn(log *slog.Logger, message, persona string, res agent.Result, err error) {
	// The usage ledger's write overlaps the reply's; both are on disk
	// before the turn's last event, so a client that reads its cost after
	// done finds this turn in it.
	usage := make(chan struct{})
	go func(res agent.Result) { // a copy: the reply's content is rewritten below
		defer close(usage)
		t.recordUsage(res)
		t.recordExtraUsage(res)
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
		t.captureWorkflow(res)
		res.Content = finalContent(persona, res)
		perr := t.persist(protocol.Message{Role: protocol.RoleAssistant, Content: res.Content})
		<-usage
		if perr != nil {
			log.Error("persist assistant message", "err", perr)
			t.finishError("Your reply could not be saved. Try sending your message again.")
			return
		}
		t.autoSave(message, res)
		t.finish(protocol.EventDone, agent.DoneData(res))
	}
}

// resumedText is the reply text a resumed turn already streamed.
func (t *turn) resumedText(resume *agent.Resume) string {
	if resume == nil {
		return ""
	}
	return resume.Content
}

// turnCheckpoint makes the agent's checkpoints durable in the turn stream.
type turnCheckpoint struct{ t *turn }

// Step stores a model step's tool calls before any of them runs.
func (c turnCheckpoint) Step(_ context.Context, cp protocol.StepCheckpoint) error {
	return c.t.pub.Mark(protocol.EventCheckpointStep, cp)
}

// Executing stores that a tool call is about to run.
func (c turnCheckpoint) Executing(_ context.Context, cp protocol.ExecCheckpoint) error {
	return c.t.pub.Mark(protocol.EventCheckpointExec, cp)
}

// loadAgentInputs reads the session's history, the workspace's config and
// (only when a daily budget can switch models) today's spend, concurrently.
// Only the history is required; the rest degrades to "none".
// prefetched is an agent turn's inputs loaded ahead of time.
type prefetched struct {
	mc  agent.ModelConfig
	in  agentInputs
	err error
}

// prefetchInputs starts loading the agent's inputs. The channel is
// buffered: the load finishes (bounded by StoreTimeout) even if the turn
// takes another path and never reads it.
func (t *turn) prefetchInputs() <-chan prefetched {
	ch := make(chan prefetched, 1)
	mc := t.svc.models.Get()
	go func() {
		in, err := t.loadAgentInputs(mc)
		ch <- prefetched{mc, in, err}
	}()
	return ch
}

// agentInputs returns the prefetched inputs, or loads them now.
func (t *turn) agentInputs() (agent.ModelConfig, agentInputs, error) {
	if t.prefetch != nil {
		p := <-t.prefetch
		t.prefetch = nil
		return p.mc, p.in, p.err
	}
	mc := t.svc.models.Get()
	in, err := t.loadAgentInputs(mc)
	return mc, in, err
}

func (t *turn) loadAgentInputs(mc agent.ModelConfig) (agentInputs, error) {
	s := t.svc
	var (
		in      agentInputs
		histErr error
		wg      sync.WaitGroup
	)
	wg.Go(func() {
		rep, err := bus.Call(t.ctx, s.nc, protocol.ReadHistory,
			protocol.HistoryRequest{SessionRef: t.ref(), Tools: true}, bus.Within(s.cfg.StoreTimeout))
		if err != nil {
			histErr = fmt.Errorf("turnrunner: history of %s/%s: %w", t.req.Workspace, t.req.Session, err)
			return
		}
		in.history, in.toolEvs = withoutTurn(rep.Messages, rep.Tools, t.req.TurnID)
		_, in.turnTools = ofTurn(rep.Messages, rep.Tools, t.req.TurnID)
	})
	wg.Go(func() {
		ws, err := bus.Call(t.ctx, s.nc, protocol.GetWorkspace,
			protocol.WorkspaceRequest{Workspace: t.req.Workspace}, bus.Within(s.cfg.StoreTimeout))
		switch {
		case err == nil:
			in.workspace = ws
		case errors.Is(err, protocol.ErrUnavailable) || protocol.KindOf(err) == protocol.NotFound:
		default:
			s.log.Warn("workspace config unavailable; using defaults", "workspace", t.req.Workspace, "err", err)
		}
	})
	wg.Go(func() { in.context = t.loadContext(t.ctx) })
	if mc.DailyBudget > 0 && mc.BudgetModel != "" {
		wg.Go(func() {
			sum, err := bus.Call(t.ctx, s.nc, protocol.SummarizeUsage,
				protocol.UsageSummaryRequest{Since: startOfDayUTC(time.Now()).Format(time.RFC3339)}, bus.Within(s.cfg.StoreTimeout))
			if err != nil {
				if !errors.Is(err, protocol.ErrUnavailable) {
					s.log.Warn("usage summary unavailable; assuming nothing spent today", "err", err)
				}
				return
			}
			in.spent = sum.EstimatedCost
		})
	}
	wg.Wait()
	return in, histErr
}

// withoutTurn drops the messages and tool events of turn turnID: the user
// message of the running turn is already on disk (persisted first) but is
// passed to the agent separately.
func withoutTurn(msgs []protocol.Message, evs []protocol.ToolEvent, turnID string) ([]protocol.Message, []protocol.ToolEvent) {
	outM := make([]protocol.Message, 0, len(msgs))
	for _, m := range msgs {
		if m.TurnID != turnID {
			outM = append(outM, m)
		}
	}
	var outT []protocol.ToolEvent
	for _, ev := range evs {
		if ev.TurnID != turnID {
			outT = append(outT, ev)
		}
	}
	return outM, outT
}

// ofTurn keeps only the messages and tool events of turn turnID.
func ofTurn(msgs []protocol.Message, evs []protocol.ToolEvent, turnID string) ([]protocol.Message, []protocol.ToolEvent) {
	var outM []protocol.Message
	for _, m := range msgs {
		if m.TurnID == turnID {
			outM = append(outM, m)
		}
	}
	var outT []protocol.ToolEvent
	for _, ev := range evs {
		if ev.TurnID == turnID {
			outT = append(outT, ev)
		}
	}
	return outM, outT
}

func startOfDayUTC(now time.Time) time.Time {
	y, m, d := now.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// filesDir is the directory the turn's tools are confined to: the
// gateway-validated workspace path, else the workspace's files directory.
func (t *turn) filesDir() string {
	if t.req.WorkspacePath != "" {
		return t.req.WorkspacePath
	}
	return filepath.Join(t.svc.cfg.DataDir, "workspaces", t.req.Workspace, "files")
}

// persistTool stores a finished (or denied) tool call before the turn goes
// on, so a crash later in the turn loses none. The auto-recall's event is
// the exception: every model turn has one, it records no effect a crash
// could lose (a resumed turn recalls again), and waiting for its fsync
// would delay every first token. It is appended in the background; tool
// events stay in order behind one another, and the reply's persist waits
// for all of them (awaitTools).
func (t *turn) persistTool(ev protocol.ToolEvent) {
	if _, known := t.svc.tools.Get(ev.Name); known {
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
func (t *turn) awaitTools() {
	t.toolsMu.Lock()
	ch := t.toolsSaved
	t.toolsMu.Unlock()
	if ch != nil {
		<-ch
	}
}

// appendTool sends one tool event to the session store.
func (t *turn) appendTool(ev protocol.ToolEvent) {
	if t.awaitUser() != nil {
		return // the turn ends: nothing of it is stored without its message
	}
	_, err := bus.Call(context.Background(), t.svc.nc, protocol.AppendToSession, protocol.AppendRequest{SessionRef: t.ref(), Tool: &ev}, bus.Within(t.svc.cfg.StoreTimeout))
	if err != nil {
		t.svc.log.Error("persist tool event", "turn", t.req.TurnID, "tool", ev.Name, "err", err)
	}
}

// recordUsage adds the turn's tokens to the usage ledger. The ledger is
// bookkeeping: a failure is logged, never shown to the user.
func (t *turn) recordUsage(res agent.Result) {
	if res.Usage.InputTokens == 0 && res.Usage.OutputTokens == 0 {
		return
	}
	_, err := bus.Call(context.Background(), t.svc.nc, protocol.RecordUsage, protocol.UsageRecord{
		Workspace: t.req.Workspace, Session: t.req.Session, TurnID: t.req.TurnID, Model: res.Model,
		InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens, Cost: res.Cost,
		Timestamp: protocol.Timestamp(time.Now()),
	}, bus.Within(t.svc.cfg.StoreTimeout))
	if err != nil && !errors.Is(err, protocol.ErrUnavailable) {
		t.svc.log.Warn("record usage", "turn", t.req.TurnID, "err", err)
	}
}

// failPersisted ends a failed turn: what the assistant produced is stored
// with the user-facing reason (so the next turn's history stays valid and
// nothing is lost), then the error event ends the stream.
func (t *turn) failPersisted(content, message string) {
	if err := t.persist(protocol.Message{Role: protocol.RoleAssistant, Content: content, Error: message}); err != nil {
		t.svc.log.Error("persist failed reply", "turn", t.req.TurnID, "err", err)
	}
	t.finishError(message)
}

// turnSink passes the agent's events to the turn's publisher. Publishing is
// asynchronous, so a token costs no round trip; a publish that fails means
// no one can see the turn any more, so the turn is cancelled (and what it
// produced is persisted).
type turnSink struct {
	t      *turn
	failed atomic.Bool
}

// Emit publishes one event.
func (k *turnSink) Emit(event string, data any) {
	if err := k.t.pub.Emit(event, data); err != nil && k.failed.CompareAndSwap(false, true) {
		k.t.svc.log.Error("publish event", "turn", k.t.req.TurnID, "event", event, "err", err)
		k.t.cancel(errPublish)
	}
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
