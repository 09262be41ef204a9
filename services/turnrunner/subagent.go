package turnrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/agentcontext"
	"github.com/waggle-os/core/services/turnrunner/tools"
)

// Defaults of SubAgentLimits.
const (
	DefaultSubAgentsPerTurn = 4
	DefaultSubAgentTimeout  = 10 * time.Minute
	DefaultSubAgentMaxSteps = 25
)

// maxSubAgentReply caps the reply a sub-agent hands its parent's model:
// the start is kept, as a model reads a summary from its top.
const maxSubAgentReply = 64 << 10

// SubAgentLimits bound spawn_agent. A sub-agent cannot spawn sub-agents
// (its tools never include spawn_agent), so the depth is always one.
type SubAgentLimits struct {
	// PerTurn (--subagents-per-turn) is how many sub-agents one turn may
	// start; a further spawn_agent call gets an error result. Default 4.
	PerTurn int
	// Timeout (--subagent-timeout) bounds one sub-agent, the approvals it
	// waits for included. Default 10m.
	Timeout time.Duration
	// MaxSteps bounds one sub-agent's model calls (and never exceeds the
	// turn's own limit). Default 25.
	MaxSteps int
}

func (l SubAgentLimits) withDefaults() SubAgentLimits {
	if l.PerTurn <= 0 {
		l.PerTurn = DefaultSubAgentsPerTurn
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultSubAgentTimeout
	}
	if l.MaxSteps <= 0 {
		l.MaxSteps = DefaultSubAgentMaxSteps
	}
	return l
}

// subAgents runs one turn's sub-agents (tools.SubAgents). Its fields
// after t are set by runAgent once the turn's tools and gate exist, before
// the agent runs; Spawn is only called from inside that run.
type subAgents struct {
	t *turn
	// offered are the tools the turn's model is offered (policy, persona
	// and MCP applied): a sub-agent gets a subset, never more.
	offered []agent.Tool
	blocked []string
	gate    agent.Gate
	model   agent.ModelChoice
	prices  map[string]agent.Price
	apiKeys []string
	// readOnly is the turn's persona's: a sub-agent of a read-only turn is
	// told so too (its tools already are).
	readOnly bool
	teamID   string
	started  atomic.Int32
}

// Spawn runs one sub-agent to its end. Its tool calls go through the
// turn's gate (so approvals are asked in the turn's stream, at the turn's
// autonomy), its steps and tool events reach the turn's stream, and its
// finished calls are stored with the spawn_agent call as their parent.
func (s *subAgents) Spawn(ctx context.Context, req tools.SpawnRequest) (string, error) {
	t := s.t
	limits := t.svc.cfg.SubAgents
	if n := s.started.Add(1); int(n) > limits.PerTurn {
		return "", fmt.Errorf("this turn already started %d sub-agents, the limit; do the rest yourself", limits.PerTurn)
	}
	persona := agentcontext.Persona{}
	if req.Persona != "" {
		persona = t.contextLoader().Persona(ctx, req.Persona)
	}
	offered, err := s.subset(req, persona)
	if err != nil {
		return "", err
	}
	info := protocol.SubAgent{
		ID: protocol.NewUUID(), Name: req.Name, Role: req.Role, Persona: persona.ID,
		Task: preview(req.Task, protocol.SubAgentTaskPreview), Tools: toolNames(offered),
		ParentTurnID: t.req.TurnID, ParentCallID: agent.CallID(ctx),
		Workspace: t.req.Workspace, Session: t.req.Session, TeamID: s.teamID,
		Status: protocol.JobRunning, StartedAt: protocol.Timestamp(time.Now()),
	}
	t.svc.announceSubAgent(info)
	defer t.svc.retireSubAgent(info.ID)

	runCtx, cancel := context.WithTimeout(ctx, limits.Timeout)
	defer cancel()
	choice := s.model
	choice.SwitchReason = "" // the turn announced any switch already
	res, runErr := t.svc.agent.Run(runCtx, agent.Request{
		TurnID:       t.req.TurnID,
		Model:        choice,
		Prices:       s.prices,
		SystemPrompt: subAgentPrompt(req, persona, s.readOnly || persona.ReadOnly),
		Message:      req.Task,
		Tools:        offered,
		Blocked:      s.blocked,
		Gate:         s.gate,
		Sink:         subAgentSink{parent: &turnSink{t: t}, name: req.Name},
		OnToolEvent: func(ev protocol.ToolEvent) {
			ev.Parent = info.ParentCallID
			t.persistTool(ev)
		},
		APIKeys:  s.apiKeys,
		MaxSteps: limits.MaxSteps,
		Log:      t.logger().With("subagent", info.ID),
	})
	t.recordUsage(res)
	switch {
	case ctx.Err() != nil:
		return "", ctx.Err() // the turn was cancelled: so is its sub-agent
	case runCtx.Err() != nil:
		return "", fmt.Errorf("sub-agent %q stopped at its time limit of %v; what it said so far: %s",
			req.Name, limits.Timeout, orNothing(res.Content))
	case runErr != nil:
		t.logger().Warn("sub-agent failed", "subagent", info.ID, "err", runErr)
		return "", fmt.Errorf("sub-agent %q failed: %s", req.Name, agent.FriendlyError(runErr))
	}
	return preview(orNothing(res.Content), maxSubAgentReply), nil
}

// subset is the tools a sub-agent gets: those asked for that the turn
// offers and the persona allows. A custom list naming a tool the turn does
// not offer is refused (a model cannot grant its sub-agent more than it
// has); a role preset just lacks the tools this turn does not have.
func (s *subAgents) subset(req tools.SpawnRequest, persona agentcontext.Persona) ([]agent.Tool, error) {
	var out []agent.Tool
	var missing []string
	for _, name := range req.Tools {
		i := slices.IndexFunc(s.offered, func(t agent.Tool) bool { return t.Name() == name })
		switch {
		case name == spawnAgentTool || i < 0:
			missing = append(missing, name)
		case !persona.Allows(name) || slices.ContainsFunc(out, func(t agent.Tool) bool { return t.Name() == name }):
		default:
			out = append(out, s.offered[i])
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

// announceSubAgent records a running sub-agent for GET /api/agents/active.
// The list is informational: a failed write is logged, the sub-agent runs.
func (s *Service) announceSubAgent(a protocol.SubAgent) {
	body, _ := json.Marshal(a)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StoreTimeout)
	defer cancel()
	if _, err := s.subagents.Put(ctx, a.ID, body); err != nil {
		s.log.Warn("record a running sub-agent", "subagent", a.ID, "err", err)
	}
}

// retireSubAgent removes a finished sub-agent from the list.
func (s *Service) retireSubAgent(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.StoreTimeout)
	defer cancel()
	if err := s.subagents.Purge(ctx, id); err != nil {
		s.log.Warn("remove a finished sub-agent", "subagent", id, "err", err)
	}
}

// listSubAgents answers protocol.ListSubAgents from BucketSubAgents: the
// running sub-agents of every runner, oldest first.
func (s *Service) listSubAgents(ctx context.Context, _ protocol.Empty) (protocol.SubAgentList, error) {
	out := protocol.SubAgentList{SubAgents: []protocol.SubAgent{}}
	lister, err := s.subagents.ListKeys(ctx)
	if err != nil {
		return out, fmt.Errorf("turnrunner: list sub-agents: %w", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	_ = lister.Stop() // already finished; Stop only releases it
	for _, k := range keys {
		e, err := s.subagents.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue // ended while listed
		}
		if err != nil {
			return out, fmt.Errorf("turnrunner: read sub-agent %s: %w", k, err)
		}
		var a protocol.SubAgent
		if json.Unmarshal(e.Value(), &a) == nil && a.ID == k {
			out.SubAgents = append(out.SubAgents, a)
		}
	}
	slices.SortFunc(out.SubAgents, func(a, b protocol.SubAgent) int { return strings.Compare(a.StartedAt, b.StartedAt) })
	return out, nil
}

// ensureSubAgentBucket creates BucketSubAgents: in memory (the list only
// describes what runs now), entries expiring a minute after the
// sub-agents' time limit so a crashed runner's entries go too.
func (s *Service) ensureSubAgentBucket(ctx context.Context) error {
	kv, err := bus.EnsureKeyValue(ctx, s.js, jetstream.KeyValueConfig{
		Bucket:      protocol.BucketSubAgents,
		Description: "One entry per running sub-agent (spawn_agent), deleted when it ends",
		History:     1,
		TTL:         s.cfg.SubAgents.Timeout + time.Minute,
		Storage:     jetstream.MemoryStorage,
		Replicas:    max(s.cfg.Stream.Replicas, 1),
	})
	if err != nil {
		return fmt.Errorf("turnrunner: bucket %s: %w", protocol.BucketSubAgents, err)
	}
	s.subagents = kv
	return nil
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
