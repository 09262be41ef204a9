// Package subagent runs a turn's sub-agents (spawn_agent) within their
// limits, and keeps the list of those running on every runner (GET
// /api/agents/active).
package subagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/agentcontext"
	"github.com/waggle-os/core/services/turnrunner/tools"
)

// Defaults of Limits.
const (
	DefaultPerTurn  = 4
	DefaultTimeout  = 10 * time.Minute
	DefaultMaxSteps = 25
)

// maxSubAgentReply caps the reply a sub-agent hands its parent's model:
// the start is kept, as a model reads a summary from its top.
const maxSubAgentReply = 64 << 10

// Limits bound spawn_agent. A sub-agent cannot spawn sub-agents (its
// tools never include spawn_agent), so the depth is always one.
type Limits struct {
	// PerTurn (--subagents-per-turn) is how many sub-agents one turn may
	// start; a further spawn_agent call gets an error result. Default 4.
	PerTurn int
	// Timeout (--subagent-timeout) bounds one sub-agent, the approvals it
	// waits for included. Default 10m.
	Timeout time.Duration
	// MaxSteps bounds one sub-agent's model calls (and never exceeds the
	// turn's own limit). Default 25.
	MaxSteps int
	// Local (--subagents-local) runs every sub-agent on its turn's
	// runner; otherwise one goes to another runner with more free turn
	// slots, when there is one (Remote).
	Local bool
}

// WithDefaults is l with every unset limit at its default.
func (l Limits) WithDefaults() Limits {
	if l.PerTurn <= 0 {
		l.PerTurn = DefaultPerTurn
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	if l.MaxSteps <= 0 {
		l.MaxSteps = DefaultMaxSteps
	}
	return l
}

// Spawner runs one turn's sub-agents (tools.SubAgents). The turn makes it
// with what it knows from its start; the fields from Offered on are set
// once the turn's tools and gate exist, before the agent runs. Spawn is
// only called from inside that run.
type Spawner struct {
	// Turn is the parent turn's request.
	Turn protocol.TurnRequest
	// Agent runs the sub-agent's loop; Limits bound it.
	Agent  *agent.Agent
	Limits Limits
	// List records the running sub-agents.
	List *List
	// Persona resolves a persona a spawn asks for.
	Persona func(ctx context.Context, id string) agentcontext.Persona
	// Sink is the parent turn's event sink.
	Sink agent.Sink
	// PersistTool stores a finished tool call of the sub-agent;
	// RecordUsage adds its tokens to the usage ledger.
	PersistTool func(protocol.ToolEvent)
	RecordUsage func(agent.Result)
	// Log is the parent turn's logger.
	Log *slog.Logger

	// Offered are the tools the turn's model is offered (policy, persona
	// and MCP applied): a sub-agent gets a subset, never more.
	Offered []agent.Tool
	Blocked []string
	// OpenGate opens an approval gate of its own for one sub-agent, on
	// the turn's stream and autonomy and wrapped as the turn's is (MCP
	// servers' trust); closing it withdraws what it still waits for.
	OpenGate func() (gate agent.Gate, close func())
	Model    agent.ModelChoice
	Prices   map[string]agent.Price
	APIKeys  []string
	// ReadOnly is the turn's persona's: a sub-agent of a read-only turn is
	// told so too (its tools already are).
	ReadOnly bool
	TeamID   string
	// Remote, when set, may run the sub-agent on another runner (one with
	// more room); nil runs it here, inside the spawn_agent call.
	Remote  *Remote
	started atomic.Int32
}

// Spawn runs one sub-agent to its end. Its tool calls go through the
// turn's gate (so approvals are asked in the turn's stream, at the turn's
// autonomy), its steps and tool events reach the turn's stream, and its
// finished calls are stored with the spawn_agent call as their parent.
// With Remote set it runs on the runner with the most room, this one when
// no other has more (Remote.run).
func (s *Spawner) Spawn(ctx context.Context, req tools.SpawnRequest) (string, error) {
	limits := s.Limits
	if n := s.started.Add(1); int(n) > limits.PerTurn {
		return "", fmt.Errorf("this turn already started %d sub-agents, the limit; do the rest yourself", limits.PerTurn)
	}
	persona := agentcontext.Persona{}
	if req.Persona != "" {
		persona = s.Persona(ctx, req.Persona)
	}
	offered, err := subset(s.Offered, req, persona)
	if err != nil {
		return "", err
	}
	info := protocol.SubAgent{
		ID: protocol.NewUUID(), Name: req.Name, Role: req.Role, Persona: persona.ID,
		Task: preview(req.Task, protocol.SubAgentTaskPreview), Tools: toolNames(offered),
		ParentTurnID: s.Turn.TurnID, ParentCallID: agent.CallID(ctx),
		Workspace: s.Turn.Workspace, Session: s.Turn.Session, TeamID: s.TeamID,
		Status: protocol.JobRunning, StartedAt: protocol.Timestamp(time.Now()),
	}
	s.List.Announce(info)
	defer s.List.Retire(info.ID)

	// Its own gate, on the turn's stream and autonomy: closing it when the
	// sub-agent ends withdraws what it still waited for (its time ran out,
	// or it stopped while a check was with the approval service), while
	// the turn goes on. The turn itself waits in this call meanwhile, so
	// the turn's approvals Close withdraws are all the sub-agent's.
	gate, closeGate := s.OpenGate()
	defer closeGate()
	onTool := func(ev protocol.ToolEvent) {
		ev.Parent = info.ParentCallID
		s.PersistTool(ev)
	}
	choice := s.Model
	choice.SwitchReason = "" // the turn announced any switch already
	if s.Remote != nil {
		job := Job{Turn: s.Turn, Parent: s.Remote.Runner, Info: info, Spawn: toSpawnWire(req),
			Model:    modelWire{Model: choice.Model, Primary: choice.Primary, Fallback: choice.Fallback},
			MaxSteps: limits.MaxSteps, Timeout: limits.Timeout, ReadOnly: s.ReadOnly}
		if reply, ran, err := s.Remote.run(ctx, job, gate, s.Sink, onTool, s.RecordUsage); ran {
			return reply, err
		}
	}
	reply, res, err := runChild(ctx, child{
		agent: s.Agent, turnID: s.Turn.TurnID, model: choice, prices: s.Prices, apiKeys: s.APIKeys,
		offered: offered, blocked: s.Blocked, gate: gate, sink: s.Sink, onTool: onTool, limits: limits,
		readOnly: s.ReadOnly || persona.ReadOnly, log: s.Log.With("subagent", info.ID),
	}, req, persona)
	s.RecordUsage(res)
	return reply, err
}

// child is what one sub-agent's loop runs with, on whichever runner.
type child struct {
	agent   *agent.Agent
	turnID  string
	model   agent.ModelChoice
	prices  map[string]agent.Price
	apiKeys []string
	offered []agent.Tool
	blocked []string
	gate    agent.Gate
	sink    agent.Sink
	onTool  func(protocol.ToolEvent)
	limits  Limits
	// readOnly is the turn's persona's or the sub-agent's: it is told so.
	readOnly bool
	log      *slog.Logger
}

// runChild runs one sub-agent's loop to its end: its reply for the turn's
// model, or an error result that reads well.
func runChild(ctx context.Context, c child, req tools.SpawnRequest, persona agentcontext.Persona) (string, agent.Result, error) {
	sink := subAgentSink{parent: c.sink, name: req.Name}
	watch := &stoppedGate{inner: c.gate}
	runCtx, cancel := context.WithTimeout(ctx, c.limits.Timeout)
	defer cancel()
	res, runErr := c.agent.Run(runCtx, agent.Request{
		TurnID:       c.turnID,
		Model:        c.model,
		Prices:       c.prices,
		SystemPrompt: subAgentPrompt(req, persona, c.readOnly),
		Message:      req.Task,
		Tools:        c.offered,
		Blocked:      c.blocked,
		Gate:         watch,
		Sink:         sink,
		OnToolEvent:  c.onTool,
		APIKeys:      c.apiKeys,
		MaxSteps:     c.limits.MaxSteps,
		Log:          c.log,
	})
	switch {
	case ctx.Err() != nil:
		return "", res, ctx.Err() // the turn was cancelled: so is its sub-agent
	case runCtx.Err() != nil:
		if tool := watch.stopped(); tool != "" {
			// The user may still look at its approval card: say it is gone.
			sink.Emit(protocol.EventStep, protocol.TokenData{Content: withdrawnStep(tool, c.limits.Timeout)})
		}
		return "", res, fmt.Errorf("sub-agent %q stopped at its time limit of %v; what it said so far: %s",
			req.Name, c.limits.Timeout, orNothing(res.Content))
	case runErr != nil:
		c.log.Warn("sub-agent failed", "err", runErr)
		return "", res, fmt.Errorf("sub-agent %q failed: %s", req.Name, agent.FriendlyError(runErr))
	}
	return preview(orNothing(res.Content), maxSubAgentReply), res, nil
}

// subset is the tools a sub-agent gets: those asked for that the turn
// offers and the persona allows. A custom list naming a tool the turn does
// not offer is refused (a model cannot grant its sub-agent more than it
// has); a role preset just lacks the tools this turn does not have.
func subset(pool []agent.Tool, req tools.SpawnRequest, persona agentcontext.Persona) ([]agent.Tool, error) {
	var out []agent.Tool
	var missing []string
	for _, name := range req.Tools {
		i := slices.IndexFunc(pool, func(t agent.Tool) bool { return t.Name() == name })
		switch {
		case name == spawnAgentTool || i < 0:
			missing = append(missing, name)
		case !persona.Allows(name) || slices.ContainsFunc(out, func(t agent.Tool) bool { return t.Name() == name }):
		default:
			out = append(out, pool[i])
		}
	}
	if len(missing) > 0 && req.Role == tools.RoleCustom {
		return nil, fmt.Errorf("a sub-agent can only get tools this conversation offers; not available: %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// spawnAgentTool is never handed to a sub-agent: the depth stays one.
const spawnAgentTool = "spawn_agent"

// subAgentPrompt is the sub-agent's system prompt (the original's, with
// the persona's section when one was asked for).
func subAgentPrompt(req tools.SpawnRequest, persona agentcontext.Persona, readOnly bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Sub-Agent: %s\nRole: %s\nTask: Complete the following task and return a comprehensive result.\n\n", req.Name, req.Role)
	if persona.Prompt != "" {
		b.WriteString(persona.Prompt)
		b.WriteString("\n\n")
	}
	if req.Context != "" {
		fmt.Fprintf(&b, "## Context\n%s\n\n", req.Context)
	}
	b.WriteString("## Guidelines\n" +
		"- Focus exclusively on your assigned task.\n" +
		"- Use your tools efficiently — don't waste turns on unnecessary operations.\n" +
		"- Be thorough but concise in your final response.\n" +
		"- If you can't complete the task with the tools available, explain what you need.\n" +
		"- When done, provide a clear summary of your findings/results.")
	if readOnly {
		b.WriteString("\n- You may only read: do not try to change files or run commands.")
	}
	return b.String()
}

// stoppedGate passes a sub-agent's checks to its gate and remembers the
// call whose check its end interrupted (an approval it was waiting for).
type stoppedGate struct {
	inner agent.Gate
	mu    sync.Mutex
	tool  string
}

// Check implements agent.Gate.
func (g *stoppedGate) Check(ctx context.Context, call agent.ToolCall) (agent.Verdict, error) {
	v, err := g.inner.Check(ctx, call)
	if ctx.Err() != nil {
		g.mu.Lock()
		g.tool = call.Name
		g.mu.Unlock()
	}
	return v, err
}

// stopped is the tool whose check the sub-agent's end interrupted, or "".
func (g *stoppedGate) stopped() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.tool
}

// withdrawnStep is the step shown when a sub-agent stopped at its time
// limit while tool waited for an approval: its card is no longer
// answerable.
func withdrawnStep(tool string, limit time.Duration) string {
	return fmt.Sprintf("✖ %s approval withdrawn: the sub-agent stopped at its time limit of %v", tool, limit)
}

// subAgentSink passes a sub-agent's progress to its turn's stream: steps
// (prefixed with its name), tool calls and their results, created files.
// Its reply tokens are not the turn's reply: they reach the turn's model
// as spawn_agent's result instead.
type subAgentSink struct {
	parent agent.Sink
	name   string
}

// Emit forwards one event.
func (k subAgentSink) Emit(event string, data any) {
	switch event {
	case protocol.EventToken, protocol.EventModelSwitch:
	case protocol.EventStep:
		if td, ok := data.(protocol.TokenData); ok {
			td.Content = "[" + k.name + "] " + td.Content
			data = td
		}
		k.parent.Emit(event, data)
	default:
		k.parent.Emit(event, data)
	}
}

// List is the running sub-agents of every runner, in
// protocol.BucketSubAgents.
type List struct {
	kv      jetstream.KeyValue
	timeout time.Duration
	log     *slog.Logger
}

// Announce records a running sub-agent for GET /api/agents/active.
// The list is informational: a failed write is logged, the sub-agent runs.
func (s *List) Announce(a protocol.SubAgent) {
	body, _ := json.Marshal(a)
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	if _, err := s.kv.Put(ctx, a.ID, body); err != nil {
		s.log.Warn("record a running sub-agent", "subagent", a.ID, "err", err)
	}
}

// Retire removes a finished sub-agent from the list.
func (s *List) Retire(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	if err := s.kv.Purge(ctx, id); err != nil {
		s.log.Warn("remove a finished sub-agent", "subagent", id, "err", err)
	}
}

// Running answers protocol.ListSubAgents from BucketSubAgents: the
// running sub-agents of every runner, oldest first.
func (s *List) Running(ctx context.Context, _ protocol.Empty) (protocol.SubAgentList, error) {
	out := protocol.SubAgentList{SubAgents: []protocol.SubAgent{}}
	lister, err := s.kv.ListKeys(ctx)
	if err != nil {
		return out, fmt.Errorf("subagent: list sub-agents: %w", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	_ = lister.Stop() // already finished; Stop only releases it
	for _, k := range keys {
		e, err := s.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue // ended while listed
		}
		if err != nil {
			return out, fmt.Errorf("subagent: read sub-agent %s: %w", k, err)
		}
		var a protocol.SubAgent
		if json.Unmarshal(e.Value(), &a) == nil && a.ID == k {
			out.SubAgents = append(out.SubAgents, a)
		}
	}
	slices.SortFunc(out.SubAgents, func(a, b protocol.SubAgent) int { return strings.Compare(a.StartedAt, b.StartedAt) })
	return out, nil
}

// OpenList creates BucketSubAgents: in memory (the list only describes
// what runs now), entries expiring a minute after the sub-agents' time
// limit so a crashed runner's entries go too. Each write is bounded by
// timeout.
func OpenList(ctx context.Context, js jetstream.JetStream, limits Limits, replicas int, timeout time.Duration, log *slog.Logger) (*List, error) {
	kv, err := bus.EnsureKeyValue(ctx, js, jetstream.KeyValueConfig{
		Bucket:      protocol.BucketSubAgents,
		Description: "One entry per running sub-agent (spawn_agent), deleted when it ends",
		History:     1,
		TTL:         limits.Timeout + time.Minute,
		Storage:     jetstream.MemoryStorage,
		Replicas:    max(replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("subagent: bucket %s: %w", protocol.BucketSubAgents, err)
	}
	return &List{kv: kv, timeout: timeout, log: log}, nil
}

func toolNames(ts []agent.Tool) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name()
	}
	return out
}

// preview cuts s to at most n bytes on a character boundary.
func preview(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

func orNothing(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(nothing)"
	}
	return s
}
