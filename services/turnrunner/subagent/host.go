package subagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/agentcontext"
	"github.com/waggle-os/core/services/turnrunner/tools"
)

// Env is what a sub-agent draws from on the runner that runs it, rebuilt
// there from its turn's identity as a resumed turn rebuilds its own: the
// tools the turn offers its sub-agents (team policy, persona, MCP servers
// and their trust, vault search keys, the session's plan), the names the
// policy blocks, the model's keys and prices, and the personas.
type Env struct {
	Offered []agent.Tool
	Blocked []string
	APIKeys []string
	Prices  map[string]agent.Price
	Persona func(ctx context.Context, id string) agentcontext.Persona
	// ReadOnly is the turn's persona's.
	ReadOnly bool
	// Close releases what building it took.
	Close func()
}

// BuildEnv rebuilds the environment of turn's sub-agents for model; step
// shows a step in the parent's stream (an MCP server restarted).
type BuildEnv func(ctx context.Context, turn protocol.TurnRequest, model string, step func(string)) (Env, error)

// Host is the child's side: it runs sub-agents that other runners' turns
// place here (Remote). Start subscribes; Stop takes no more and ends those
// running (each parent's call gets an error result).
type Host struct {
	// Conn is the runner's bus connection; Runner its id.
	Conn   *nats.Conn
	Runner string
	Agent  *agent.Agent
	// Free is how many turn slots this runner has free; Reserve takes
	// one for a sub-agent (false: none free), Unreserve gives it back.
	Free      func() int
	Reserve   func() bool
	Unreserve func()
	Build     BuildEnv
	Log       *slog.Logger

	mu      sync.Mutex
	subs    []*nats.Subscription
	stopped bool
	ctx     context.Context
	cancel  context.CancelCauseFunc
	running sync.WaitGroup
}

// probeWait bounds the question to a job's turn who runs it: well within
// the parent's placeWait.
const probeWait = 2 * time.Second

// errHostStopping ends the sub-agents of a runner that stops.
var errHostStopping = errors.New("runner shutting down")

// Start answers other runners' questions for room and takes their
// sub-agents.
func (h *Host) Start() error {
	h.ctx, h.cancel = context.WithCancelCause(context.Background())
	roomSub, err := h.Conn.Subscribe(protocol.SubjSubAgentRoom, h.onRoom)
	if err != nil {
		return fmt.Errorf("subagent: subscribe %s: %w", protocol.SubjSubAgentRoom, err)
	}
	runSub, err := h.Conn.Subscribe(protocol.SubAgentRun(h.Runner), h.onRun)
	if err != nil {
		_ = roomSub.Unsubscribe()
		return fmt.Errorf("subagent: subscribe %s: %w", protocol.SubAgentRun(h.Runner), err)
	}
	h.mu.Lock()
	h.subs = []*nats.Subscription{roomSub, runSub}
	h.mu.Unlock()
	return nil
}

// StopTaking answers no more questions for room and takes no more
// sub-agents; those running go on.
func (h *Host) StopTaking() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	for _, s := range h.subs {
		_ = s.Unsubscribe()
	}
	h.subs = nil
}

// Stop takes no more sub-agents, ends those running (their parents get an
// error result) and waits for them.
func (h *Host) Stop() {
	h.StopTaking()
	if h.cancel != nil {
		h.cancel(errHostStopping)
	}
	h.running.Wait()
}

// onRoom answers a parent runner's question for room.
func (h *Host) onRoom(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	body, _ := json.Marshal(room{Runner: h.Runner, Free: h.Free()})
	_ = m.Respond(body)
}

// onRun takes a sub-agent to run. The checks that wait for the bus run on
// their own goroutine: the subscription's serves the next request.
func (h *Host) onRun(m *nats.Msg) {
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		respond(m, placed{Refused: "stopping"})
		return
	}
	h.running.Add(1)
	h.mu.Unlock()
	go func() {
		defer h.running.Done()
		h.take(m)
	}()
}

// take checks a job, answers it and runs it to its end.
func (h *Host) take(m *nats.Msg) {
	var job Job
	if err := json.Unmarshal(m.Data, &job); err != nil {
		respond(m, placed{Refused: "invalid"})
		return
	}
	if why := h.refuse(job); why != "" {
		h.Log.Warn("sub-agent refused", "subagent", job.Info.ID, "turn", job.Turn.TurnID, "parent", job.Parent, "why", why)
		respond(m, placed{Refused: why})
		return
	}
	if !h.Reserve() {
		respond(m, placed{Refused: "busy"})
		return
	}
	defer h.Unreserve()
	control := make(chan *nats.Msg, 64)
	sub, err := h.Conn.ChanSubscribe(protocol.SubAgentControl(job.Info.ID), control)
	if err != nil {
		respond(m, placed{Refused: "unavailable"})
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	respond(m, placed{Accepted: true})
	h.run(job, control)
}

// refuse says why job is not run here ("" when it is): a malformed job,
// or one whose parent turn does not run on the runner it names — only a
// turn's own runner asks for its sub-agents.
func (h *Host) refuse(job Job) string {
	t := job.Turn
	switch {
	case !protocol.ValidID(job.Info.ID) || !protocol.ValidID(t.TurnID) || !protocol.ValidID(t.Workspace) ||
		!protocol.ValidID(t.Session) || !protocol.ValidID(job.Parent) || (t.User != "" && !protocol.ValidID(t.User)):
		return "invalid"
	case job.Parent == h.Runner:
		return "own"
	case job.Timeout <= 0 || job.MaxSteps <= 0 || job.Spawn.Task == "" || job.Info.ParentTurnID != t.TurnID:
		return "invalid"
	}
	body, _ := json.Marshal(protocol.TurnControlMsg{Action: protocol.ControlProbe})
	rep, err := h.Conn.Request(protocol.TurnControl(t.TurnID).Subject, body, probeWait)
	if err != nil || string(rep.Data) != job.Parent {
		return "not the turn's runner"
	}
	return ""
}

// run runs an accepted job to its end, sending its events, heartbeats and
// result to the parent's runner; control carries the parent's heartbeats
// and cancel.
func (h *Host) run(job Job, control <-chan *nats.Msg) {
	id := job.Info.ID
	req := job.Spawn.request()
	log := h.Log.With("subagent", id, "turn", job.Turn.TurnID, "parent", job.Parent)
	send := func(e envelope) {
		body, err := json.Marshal(e)
		if err == nil {
			err = h.Conn.Publish(protocol.SubAgentEvents(id), body)
		}
		if err != nil {
			log.Warn("send to the parent's runner", "kind", e.Kind, "err", err)
		}
	}
	ctx, cancel := context.WithCancelCause(h.ctx)
	var watch sync.WaitGroup
	defer watch.Wait()
	defer cancel(nil)
	watch.Go(func() { h.watchParent(ctx, cancel, control, send, log) })

	out := outcome{Runner: h.Runner}
	reply, res, err := h.runJob(ctx, job, req, send, log)
	out.Reply, out.Model, out.Usage, out.Cost = reply, res.Model, res.Usage, res.Cost
	if err != nil {
		out.Error = err.Error()
		if cause := context.Cause(ctx); ctx.Err() != nil && cause != nil {
			out.Error = fmt.Sprintf("sub-agent %q stopped: %v", req.Name, cause)
		}
	}
	send(envelope{Kind: kindResult, Result: &out})
	log.Info("sub-agent for another runner ended", "err", out.Error)
}

// Causes of a placed sub-agent's end that come from its parent.
var (
	errParentCancelled = errors.New("its turn was cancelled")
	errParentGone      = errors.New("the runner of its turn stopped answering")
)

// watchParent beats to the parent's runner and ends the sub-agent when the
// parent cancels it or falls silent.
func (h *Host) watchParent(ctx context.Context, cancel context.CancelCauseFunc, control <-chan *nats.Msg, send func(envelope), log *slog.Logger) {
	beat := time.NewTicker(Beat)
	defer beat.Stop()
	lost := time.NewTimer(Lost)
	defer lost.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			send(envelope{Kind: kindBeat})
		case <-lost.C:
			log.Warn("the runner of a sub-agent's turn stopped answering: the sub-agent ends")
			cancel(errParentGone)
			return
		case m := <-control:
			lost.Reset(Lost)
			if string(m.Data) == controlCancel {
				cancel(errParentCancelled)
				return
			}
		}
	}
}

// runJob rebuilds the turn's environment here and runs the sub-agent.
func (h *Host) runJob(ctx context.Context, job Job, req tools.SpawnRequest, send func(envelope), log *slog.Logger) (string, agent.Result, error) {
	relay := relaySink{send: send}
	step := func(text string) {
		relay.Emit(protocol.EventStep, protocol.TokenData{Content: "[" + req.Name + "] " + text})
	}
	env, err := h.Build(ctx, job.Turn, job.Model.Model, step)
	if err != nil {
		log.Warn("rebuild a sub-agent's environment", "err", err)
		return "", agent.Result{}, fmt.Errorf("sub-agent %q could not start: its tools could not be prepared", req.Name)
	}
	defer env.Close()
	persona := agentcontext.Persona{}
	if req.Persona != "" {
		persona = env.Persona(ctx, req.Persona)
	}
	// The tools are drawn again here, from what this runner rebuilt: a
	// job cannot name tools the turn's identity does not give.
	offered, err := subset(env.Offered, req, persona)
	if err != nil {
		return "", agent.Result{}, err
	}
	limits := Limits{MaxSteps: job.MaxSteps, Timeout: job.Timeout}
	return runChild(ctx, child{
		agent: h.Agent, turnID: job.Turn.TurnID,
		model:  agent.ModelChoice{Model: job.Model.Model, Primary: job.Model.Primary, Fallback: job.Model.Fallback},
		prices: env.Prices, apiKeys: env.APIKeys, offered: offered, blocked: env.Blocked,
		gate: remoteGate{conn: h.Conn, subject: protocol.SubAgentGate(job.Info.ID)}, sink: relay,
		onTool: func(ev protocol.ToolEvent) { send(envelope{Kind: kindTool, Tool: &ev}) },
		limits: limits, readOnly: job.ReadOnly || env.ReadOnly || persona.ReadOnly, log: log,
	}, req, persona)
}

// relaySink sends a placed sub-agent's events to its parent's runner.
type relaySink struct{ send func(envelope) }

// Emit implements agent.Sink.
func (k relaySink) Emit(event string, data any) {
	body, err := json.Marshal(data)
	if err != nil {
		return
	}
	k.send(envelope{Kind: kindEvent, Event: event, Data: body})
}

// remoteGate checks a placed sub-agent's tool calls with its parent turn's
// approval gate, on the parent's runner.
type remoteGate struct {
	conn    *nats.Conn
	subject string
}

// Check implements agent.Gate: it waits as long as the parent's gate does
// (a human deciding), until ctx ends.
func (g remoteGate) Check(ctx context.Context, call agent.ToolCall) (agent.Verdict, error) {
	body, _ := json.Marshal(gateCheck{ID: call.ID, Name: call.Name, Input: call.Input})
	m, err := g.conn.RequestWithContext(ctx, g.subject, body)
	if err != nil {
		return agent.Verdict{}, fmt.Errorf("subagent: ask the parent's gate: %w", err)
	}
	var a gateAnswer
	if err := json.Unmarshal(m.Data, &a); err != nil {
		return agent.Verdict{}, fmt.Errorf("subagent: the parent's gate answered: %w", err)
	}
	if a.Error != "" {
		return agent.Verdict{}, errors.New(a.Error)
	}
	return agent.Verdict{Allow: a.Allow, ModelText: a.ModelText, ToolResult: a.ToolResult}, nil
}

func respond(m *nats.Msg, p placed) {
	body, _ := json.Marshal(p)
	_ = m.Respond(body)
}
