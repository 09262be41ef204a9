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
	"github.com/waggle-os/core/services/turnrunner/tools"
)

// A sub-agent on another runner. The parent's runner (Remote) asks every
// runner for room (protocol.SubjSubAgentRoom) and hands the sub-agent to
// the one with the most free turn slots, when that is not itself
// (protocol.SubAgentRun). The child's runner (Host) rebuilds the turn's
// tool environment from the turn's identity, runs the loop and sends
// everything back on the sub-agent's events subject: steps and tool
// events (relayed into the parent's stream and session), heartbeats, and
// the result. Each tool call of the child is checked by the parent's own
// approval gate (protocol.SubAgentGate), so approvals are asked in the
// parent's stream as for a local sub-agent. The parent heartbeats and
// cancels on protocol.SubAgentControl.
//
// Liveness: each side sends a beat every Beat; a side that hears nothing
// from the other for Lost stops — the child ends when its parent's runner
// died, and the parent's spawn_agent call fails with an error result when
// the child's runner died (the turn goes on).

// Timing of the two sides' heartbeats.
const (
	// Beat is how often each side says it is alive.
	Beat = time.Second
	// Lost is how long a side waits without a word before it takes the
	// other for dead.
	Lost = 4 * time.Second
	// roomWait is how long the parent waits for other runners to say how
	// much room they have: a runner that answers later just does not get
	// the sub-agent.
	roomWait = 300 * time.Millisecond
	// placeWait bounds the hand-over of a sub-agent to the chosen runner.
	placeWait = 5 * time.Second
)

// Job is a sub-agent handed to another runner: the parent turn's identity,
// from which that runner rebuilds the tools the turn offers, and the
// spawn_agent call.
type Job struct {
	// Turn is the parent turn's request (who, workspace, session, persona,
	// autonomy already capped by the team's policy).
	Turn protocol.TurnRequest `json:"turn"`
	// Parent is the runner of the parent turn.
	Parent string `json:"parent"`
	// Info is the sub-agent as listed in GET /api/agents/active.
	Info protocol.SubAgent `json:"info"`
	// Spawn is the decoded spawn_agent call.
	Spawn spawnWire `json:"spawn"`
	// Model is the turn's model.
	Model    modelWire     `json:"model"`
	MaxSteps int           `json:"maxSteps"`
	Timeout  time.Duration `json:"timeout"`
	// ReadOnly is the turn's persona's.
	ReadOnly bool `json:"readOnly"`
}

// spawnWire is tools.SpawnRequest on the bus.
type spawnWire struct {
	Name    string   `json:"name"`
	Role    string   `json:"role"`
	Task    string   `json:"task"`
	Context string   `json:"context,omitempty"`
	Persona string   `json:"persona,omitempty"`
	Tools   []string `json:"tools,omitempty"`
}

func toSpawnWire(r tools.SpawnRequest) spawnWire {
	return spawnWire{Name: r.Name, Role: r.Role, Task: r.Task, Context: r.Context, Persona: r.Persona, Tools: r.Tools}
}

func (w spawnWire) request() tools.SpawnRequest {
	return tools.SpawnRequest{Name: w.Name, Role: w.Role, Task: w.Task, Context: w.Context, Persona: w.Persona, Tools: w.Tools}
}

// modelWire is agent.ModelChoice on the bus.
type modelWire struct {
	Model    string `json:"model"`
	Primary  string `json:"primary,omitempty"`
	Fallback string `json:"fallback,omitempty"`
}

// placed is the answer to a Job: Accepted, or why not (the parent then
// runs the sub-agent itself).
type placed struct {
	Accepted bool   `json:"accepted"`
	Refused  string `json:"refused,omitempty"`
}

// room is a runner's answer to protocol.SubjSubAgentRoom.
type room struct {
	Runner string `json:"runner"`
	Free   int    `json:"free"`
}

// Kinds of envelope on protocol.SubAgentEvents.
const (
	kindEvent  = "event"
	kindTool   = "tool"
	kindBeat   = "beat"
	kindResult = "result"
)

// envelope is one message of a sub-agent's runner to its parent's.
type envelope struct {
	Kind   string              `json:"kind"`
	Event  string              `json:"event,omitempty"`
	Data   json.RawMessage     `json:"data,omitempty"`
	Tool   *protocol.ToolEvent `json:"tool,omitempty"`
	Result *outcome            `json:"result,omitempty"`
}

// outcome is a sub-agent's end: its reply, or the error result the
// parent's model gets, and what it cost.
type outcome struct {
	Reply  string      `json:"reply,omitempty"`
	Error  string      `json:"error,omitempty"`
	Model  string      `json:"model,omitempty"`
	Usage  agent.Usage `json:"usage"`
	Cost   float64     `json:"cost,omitempty"`
	Runner string      `json:"runner"`
}

// gateCheck is one tool call of the child for the parent's gate.
type gateCheck struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// gateAnswer is the parent gate's verdict.
type gateAnswer struct {
	Allow      bool   `json:"allow"`
	ModelText  string `json:"modelText,omitempty"`
	ToolResult bool   `json:"toolResult,omitempty"`
	Error      string `json:"error,omitempty"`
}

// Control messages on protocol.SubAgentControl.
const (
	controlBeat   = "beat"
	controlCancel = "cancel"
)

// Remote is the parent's side: it places a turn's sub-agents on other
// runners. One per runner, shared by its turns.
type Remote struct {
	// Conn is the runner's bus connection; Runner its id.
	Conn   *nats.Conn
	Runner string
	// Free is how many turn slots this runner has free.
	Free func() int
	// Peers, when set, is how many other runners are alive (-1: not
	// known yet): with none, nobody is asked for room; otherwise the
	// question ends once each has answered.
	Peers func() int
	Log   *slog.Logger
}

// place asks every runner for room and returns the first that has more
// than this one, or "" (run here): a single runner, or none with more
// room, keeps its sub-agents.
func (r *Remote) place(ctx context.Context) string {
	peers := -1
	if r.Peers != nil {
		peers = r.Peers()
	}
	if peers == 0 {
		return ""
	}
	inbox := r.Conn.NewRespInbox()
	replies := make(chan *nats.Msg, 64)
	sub, err := r.Conn.ChanSubscribe(inbox, replies)
	if err != nil {
		return ""
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := r.Conn.PublishRequest(protocol.SubjSubAgentRoom, inbox, nil); err != nil {
		return ""
	}
	own, answered := r.Free(), 0
	wait := time.NewTimer(roomWait)
	defer wait.Stop()
	for {
		select {
		case <-ctx.Done():
			return ""
		case <-wait.C:
			return ""
		case m := <-replies:
			var a room
			if json.Unmarshal(m.Data, &a) != nil || a.Runner == r.Runner || !protocol.ValidID(a.Runner) {
				continue
			}
			if a.Free > own {
				return a.Runner
			}
			if answered++; answered == peers {
				return ""
			}
		}
	}
}

// run hands job to another runner, if one has more room, and waits for its
// end: ran is false when the sub-agent did not start elsewhere (then the
// caller runs it here). gate checks the child's tool calls; the child's
// events go to sink, its finished calls to onTool, its usage to usage.
func (r *Remote) run(ctx context.Context, job Job, gate agent.Gate, sink agent.Sink,
	onTool func(protocol.ToolEvent), usage func(agent.Result)) (reply string, ran bool, err error) {
	runner := r.place(ctx)
	if runner == "" {
		return "", false, nil
	}
	id := job.Info.ID
	log := r.Log.With("subagent", id, "on", runner)
	// Listen before handing it over: nothing the child sends is missed.
	events := make(chan *nats.Msg, 1024)
	evSub, err := r.Conn.ChanSubscribe(protocol.SubAgentEvents(id), events)
	if err != nil {
		return "", false, nil
	}
	defer func() { _ = evSub.Unsubscribe() }()
	// The gate's checks end with the sub-agent: what it still waits for
	// is withdrawn by the caller's closing of the gate.
	gctx, stopChecks := context.WithCancel(ctx)
	checks := &checkGroup{}
	defer checks.close()
	defer stopChecks()
	gateSub, err := r.Conn.Subscribe(protocol.SubAgentGate(id), func(m *nats.Msg) {
		checks.run(func() { answerCheck(gctx, gate, m) })
	})
	if err != nil {
		return "", false, nil
	}
	defer func() { _ = gateSub.Unsubscribe() }()

	body, _ := json.Marshal(job)
	pctx, cancel := context.WithTimeout(ctx, placeWait)
	m, err := r.Conn.RequestWithContext(pctx, protocol.SubAgentRun(runner), body)
	cancel()
	var ans placed
	if err != nil || json.Unmarshal(m.Data, &ans) != nil || !ans.Accepted {
		if err != nil {
			// It may have started and its answer been lost: stop it.
			r.control(id, controlCancel)
		}
		log.Info("sub-agent runs here: the other runner did not take it", "err", err, "refused", ans.Refused)
		return "", false, nil
	}
	log.Info("sub-agent runs on another runner")
	reply, err = r.follow(ctx, job, events, sink, onTool, usage, log)
	return reply, true, err
}

// follow relays a placed sub-agent's events until its result, its
// runner's silence or the turn's cancel.
func (r *Remote) follow(ctx context.Context, job Job, events <-chan *nats.Msg, sink agent.Sink,
	onTool func(protocol.ToolEvent), usage func(agent.Result), log *slog.Logger) (string, error) {
	id, name := job.Info.ID, job.Spawn.Name
	beat := time.NewTicker(Beat)
	defer beat.Stop()
	lost := time.NewTimer(Lost)
	defer lost.Stop()
	for {
		select {
		case <-ctx.Done():
			r.control(id, controlCancel)
			return "", ctx.Err()
		case <-beat.C:
			r.control(id, controlBeat)
		case <-lost.C:
			log.Warn("the runner of a sub-agent stopped answering")
			r.control(id, controlCancel) // in case it comes back
			return "", fmt.Errorf("sub-agent %q stopped: the runner it ran on stopped answering; its work may be incomplete", name)
		case m := <-events:
			lost.Reset(Lost)
			var e envelope
			if json.Unmarshal(m.Data, &e) != nil {
				continue
			}
			switch e.Kind {
			case kindEvent:
				if e.Event != "" {
					sink.Emit(e.Event, e.Data)
				}
			case kindTool:
				if e.Tool != nil {
					onTool(*e.Tool)
				}
			case kindResult:
				if e.Result == nil {
					continue
				}
				res := e.Result
				usage(agent.Result{Model: res.Model, Usage: res.Usage, Cost: res.Cost})
				if res.Error != "" {
					return "", errors.New(res.Error)
				}
				return res.Reply, nil
			}
		}
	}
}

// control sends a sub-agent a control message (best effort: a lost beat
// is covered by the next, a lost cancel by the child's liveness check).
func (r *Remote) control(id, kind string) {
	if err := r.Conn.Publish(protocol.SubAgentControl(id), []byte(kind)); err != nil {
		r.Log.Debug("sub-agent control", "subagent", id, "err", err)
	}
}

// answerCheck runs one of the child's tool calls through the parent's gate
// and answers it. A check the sub-agent's end interrupted is not answered:
// the child is being stopped, and an answer could reach it before the
// cancel and let its loop go on.
func answerCheck(ctx context.Context, gate agent.Gate, m *nats.Msg) {
	var c gateCheck
	var ans gateAnswer
	if err := json.Unmarshal(m.Data, &c); err != nil {
		ans.Error = "undecodable check"
	} else if v, err := gate.Check(ctx, agent.ToolCall{ID: c.ID, Name: c.Name, Input: c.Input}); ctx.Err() != nil {
		return
	} else if err != nil {
		ans.Error = err.Error()
	} else {
		ans = gateAnswer{Allow: v.Allow, ModelText: v.ModelText, ToolResult: v.ToolResult}
	}
	body, _ := json.Marshal(ans)
	_ = m.Respond(body)
}

// checkGroup runs the gate checks of one placed sub-agent and waits for
// them at its end; a check that arrives after the end (a callback still
// under way when the subscription went) is dropped.
type checkGroup struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func (g *checkGroup) run(fn func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.wg.Go(fn)
}

// close takes no more checks and waits for those running.
func (g *checkGroup) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}
