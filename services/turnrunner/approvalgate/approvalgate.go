// Package approvalgate is the turn runner's side of tool approvals: it
// implements agent.Gate by asking the approval service whether a tool call
// may run, and waits for a human decision when one is needed.
//
// The pending entry is the approval service's (protocol.BucketApprovals),
// so the wait asks the service rather than reading its bucket: the gate
// subscribes to the approval's decision (protocol.ApprovalDecided) and
// then asks the service for the entry's state (protocol.GetApprovalState.Subject).
// In that order a decision taken before the subscription is in the answer
// and one taken after it is delivered, so none is missed; asking again
// every recheckEvery covers a notice lost while this runner was
// reconnecting or never sent (the service died between its write and its
// publish), and keeps working while the approval service restarts.
package approvalgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
)

// Emitter publishes an event into the turn's stream.
type Emitter interface {
	Emit(event string, data any) error
}

// Config configures a Gate.
type Config struct {
	// Timeout is how long an approval may wait before it is denied as timed
	// out. The approval service stores its own deadline with the pending
	// entry; the gate stops waiting at whichever comes first. Default
	// protocol.DefaultApprovalTimeout.
	Timeout time.Duration
	// RequestTimeout bounds one request to the approval service. Default 10s.
	RequestTimeout time.Duration
	// Retry is how long a check keeps asking while no approval service
	// answers (one restarting), before the call is refused. Default 3s.
	Retry time.Duration
	// Logger logs failures to reach the approval service. Default
	// slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = protocol.DefaultApprovalTimeout
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 10 * time.Second
	}
	if c.Retry <= 0 {
		c.Retry = 3 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Turn identifies the turn a Gate guards.
type Turn struct {
	TurnID    string
	Workspace string
	Session   string
	Autonomy  protocol.Autonomy
}

// Gate guards the tool calls of one turn. Check and Close may be called
// from different goroutines.
type Gate struct {
	nc   *nats.Conn
	turn Turn
	emit Emitter
	cfg  Config
	// recheck is how often a wait asks for the state again (recheckEvery).
	recheck time.Duration
	// missingFor is how long an approval must stay unreadable before a
	// wait takes it as gone (missingEvery).
	missingFor time.Duration

	mu sync.Mutex
	// open counts approvals this gate asked for whose final state it has
	// not seen; unsure is set when a check failed after the service may
	// have created an entry. Either makes Close cancel the turn's approvals.
	open   int
	unsure bool
}

// New returns a gate for one turn.
func New(nc *nats.Conn, turn Turn, emit Emitter, cfg Config) *Gate {
	return &Gate{nc: nc, turn: turn, emit: emit, cfg: cfg.withDefaults(), recheck: recheckEvery, missingFor: missingEvery}
}

// recheckEvery is how often a wait asks the approval service for the state
// again, in case the decision's notice was lost: it bounds how late such a
// decision arrives.
const recheckEvery = 2 * time.Second

// Check decides whether call may run, emitting the gate's step texts and,
// when a human must decide, approval_required; it then waits for the
// decision, the deadline or ctx. A call that may not run gets a Verdict
// with the text the model reads instead of a result (and no tool_result).
// An error means the approval service could not be asked; ctx's error means
// the turn was cancelled while waiting.
func (g *Gate) Check(ctx context.Context, call agent.ToolCall) (agent.Verdict, error) {
	input := call.Input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	rep, err := g.ask(ctx, protocol.ApprovalCheckRequest{
		TurnID: g.turn.TurnID, Workspace: g.turn.Workspace, Session: g.turn.Session,
		ToolName: call.Name, Input: input, Autonomy: g.turn.Autonomy,
	})
	if err != nil {
		return agent.Verdict{}, err
	}
	switch rep.Action {
	case protocol.ApprovalRun:
		if rep.Step != "" {
			g.step(rep.Step)
		}
		return agent.Verdict{Allow: true}, nil
	case protocol.ApprovalAsk:
		if !protocol.ValidID(rep.RequestID) {
			// Its decision could not be followed: refuse rather than wait.
			return agent.Verdict{}, fmt.Errorf("approvalgate: check %s: bad request id %q", call.Name, rep.RequestID)
		}
	default:
		// An answer this runner does not understand must not let a call through.
		return agent.Verdict{}, fmt.Errorf("approvalgate: check %s: unknown action %q", call.Name, rep.Action)
	}

	g.mu.Lock()
	g.open++
	g.mu.Unlock()
	workspace := g.turn.Workspace
	// Listen for the decision before anyone is told to make one: a decision
	// taken at once is then on the subscription even while the approval
	// service cannot be asked. A failed subscription is tried again by wait.
	decisions, err := g.listen(rep.RequestID)
	if err != nil {
		g.cfg.Logger.Warn("approvalgate: follow approval", "request", rep.RequestID, "err", err)
	}
	// The entry is durable (the service created it before replying), so a
	// client that acts on this event at once finds it.
	if err := g.emit.Emit(protocol.EventApprovalRequired, protocol.ApprovalRequiredData{
		RequestID: rep.RequestID, ToolName: call.Name, Input: input, SourceWorkspaceID: &workspace,
	}); err != nil {
		g.cfg.Logger.Warn("approvalgate: emit approval_required", "turn", g.turn.TurnID, "err", err)
	}
	deadline := time.Now().Add(g.cfg.Timeout)
	if rep.Deadline > 0 {
		deadline = minTime(deadline, time.UnixMilli(rep.Deadline))
	}
	state, err := g.wait(ctx, rep.RequestID, deadline, decisions)
	if err != nil {
		return agent.Verdict{}, err
	}
	g.mu.Lock()
	g.open--
	g.mu.Unlock()

	switch state {
	case protocol.ApprovalStateApproved:
		g.step(protocol.ApprovalStepApproved(call.Name))
		return agent.Verdict{Allow: true}, nil
	case protocol.ApprovalStateTimedOut:
		g.step(protocol.ApprovalStepTimedOut(call.Name))
		return agent.Verdict{ModelText: protocol.ApprovalModelTimedOut(call.Name)}, nil
	default:
		g.step(protocol.ApprovalStepDenied(call.Name))
		return agent.Verdict{ModelText: protocol.ApprovalModelDenied(call.Name)}, nil
	}
}

// Close denies every approval of this turn that is still pending; the
// runner calls it when the turn ends or is cancelled (client gone). It
// works with an already cancelled ctx.
func (g *Gate) Close(ctx context.Context) {
	g.mu.Lock()
	needed := g.open > 0 || g.unsure
	g.open, g.unsure = 0, false
	g.mu.Unlock()
	if !needed {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.RequestTimeout)
	defer cancel()
	if _, err := bus.Call(rctx, g.nc, protocol.CancelTurnApprovals,
		protocol.ApprovalCancelTurnRequest{TurnID: g.turn.TurnID}); err != nil {
		// The sweeper times the entries out at their deadline anyway.
		g.cfg.Logger.Warn("approvalgate: cancel pending approvals", "turn", g.turn.TurnID, "err", err)
	}
}

func (g *Gate) step(text string) {
	if err := g.emit.Emit(protocol.EventStep, protocol.TokenData{Content: text}); err != nil {
		g.cfg.Logger.Warn("approvalgate: emit step", "turn", g.turn.TurnID, "err", err)
	}
}

// ask sends the check, retrying for a while when no approval service
// answers so a restart of the service does not refuse calls.
func (g *Gate) ask(ctx context.Context, req protocol.ApprovalCheckRequest) (protocol.ApprovalCheckReply, error) {
	giveUp := time.Now().Add(g.cfg.Retry)
	backoff := 50 * time.Millisecond
	for {
		rctx, cancel := context.WithTimeout(ctx, g.cfg.RequestTimeout)
		rep, err := bus.Call(rctx, g.nc, protocol.CheckApproval, req)
		cancel()
		if err == nil {
			return rep, nil
		}
		if ctx.Err() != nil {
			// The service may have created the entry of the check we
			// stopped waiting for: Close must withdraw it, or it waits,
			// listed and approvable, for a call that will never run.
			g.mu.Lock()
			g.unsure = true
			g.mu.Unlock()
			return rep, ctx.Err()
		}
		if !errors.Is(err, protocol.ErrUnavailable) || time.Now().After(giveUp) {
			if !errors.Is(err, protocol.ErrUnavailable) && (protocol.AsError(err) == nil || errors.Is(err, protocol.ErrBusTimeout)) {
				// A timeout may hide an entry created for a reply we lost.
				g.mu.Lock()
				g.unsure = true
				g.mu.Unlock()
			}
			return rep, fmt.Errorf("approvalgate: check %s: %w", req.ToolName, err)
		}
		select {
		case <-ctx.Done():
			return rep, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// wait returns the final state of the approval id: the decision, or a
// timeout once deadline passed. A cancelled ctx cancels the approval (so no
// one approves a call that will never run) and returns ctx's error. It
// follows decisions (nil: not subscribed yet) and ends the subscription.
func (g *Gate) wait(ctx context.Context, id string, deadline time.Time, decisions *listener) (string, error) {
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	defer func() { decisions.close() }()
	for decisions == nil {
		var err error
		if decisions, err = g.listen(id); err == nil {
			break
		}
		// NATS is reconnecting; try again shortly.
		g.cfg.Logger.Warn("approvalgate: follow approval", "request", id, "err", err)
		select {
		case <-wctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
		if wctx.Err() != nil {
			break
		}
	}
	state, err := g.follow(wctx, id, decisions)
	switch {
	case err == nil:
		return state, nil
	case ctx.Err() != nil:
		g.resolve(ctx, id, protocol.ApprovalStateCancelled)
		return "", ctx.Err()
	default: // the deadline passed
		return g.resolve(ctx, id, protocol.ApprovalStateTimedOut), nil
	}
}

// listener holds a subscription to one approval's decision.
type listener struct {
	decided chan protocol.ApprovalDecidedEvent
	sub     *nats.Subscription
}

// listen subscribes to the decision of approval id.
func (g *Gate) listen(id string) (*listener, error) {
	l := &listener{decided: make(chan protocol.ApprovalDecidedEvent, 4)}
	sub, err := bus.Subscribe(g.nc, protocol.ApprovalDecided(id), func(ev protocol.ApprovalDecidedEvent) {
		select {
		case l.decided <- ev:
		default: // one final state is all a wait needs; the rest can go
		}
	})
	if err != nil {
		return nil, fmt.Errorf("approvalgate: follow %s: %w", id, err)
	}
	l.sub = sub
	return l, nil
}

func (l *listener) close() {
	if l != nil {
		_ = l.sub.Unsubscribe()
	}
}

// follow waits until the approval is final or ctx ends. Its caller
// subscribed to the decision (l, nil when that failed: then only asking
// finds it) before anyone could take it, so a decision taken before the
// first ask is in the answer or on the subscription.
func (g *Gate) follow(ctx context.Context, id string, l *listener) (string, error) {
	var decided <-chan protocol.ApprovalDecidedEvent
	if l != nil {
		decided = l.decided
	}
	ask := time.NewTimer(0) // at once, then every g.recheck
	defer ask.Stop()
	var missingSince time.Time
	for {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case ev := <-decided:
			if protocol.ApprovalFinal(ev.State) {
				return ev.State, nil
			}
		case <-ask.C:
			state, err := g.state(ctx, id)
			switch {
			case errors.Is(err, errMissing):
				// Removed (only final entries are, after their retention),
				// or read from a replica that has not caught up with its
				// creation yet (a cluster that just lost its bucket's
				// leader): only an absence that lasts is an end.
				if missingSince.IsZero() {
					missingSince = time.Now()
				} else if time.Since(missingSince) >= g.missingFor {
					return protocol.ApprovalStateCancelled, nil
				}
				ask.Reset(min(g.recheck, g.missingFor))
				continue
			case err == nil && protocol.ApprovalFinal(state):
				return state, nil
			default:
				missingSince = time.Time{}
			}
			ask.Reset(g.recheck)
		}
	}
}

// missingEvery is how long an approval must stay unreadable before its
// wait takes it as gone: far longer than a bucket replica needs to catch
// up.
const missingEvery = 30 * time.Second

// errMissing is state's answer for an approval the service does not have.
var errMissing = errors.New("approvalgate: no such approval")

// state asks the approval service for the approval's state. No answer (the
// service restarting) is an error other than errMissing: the wait goes on
// and asks again.
func (g *Gate) state(ctx context.Context, id string) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, g.cfg.RequestTimeout)
	defer cancel()
	rep, err := bus.Call(rctx, g.nc, protocol.GetApprovalState,
		protocol.ApprovalStateRequest{RequestID: id})
	switch {
	case err == nil:
		return rep.State, nil
	case protocol.KindOf(err) == protocol.NotFound:
		return "", errMissing
	default:
		if ctx.Err() == nil && !errors.Is(err, protocol.ErrUnavailable) {
			g.cfg.Logger.Warn("approvalgate: approval state", "request", id, "err", err)
		}
		return "", err
	}
}

// resolve asks the service to end the approval with outcome and returns the
// final state: a decision that won just before stands. If the service
// cannot be reached, outcome holds here; the sweeper ends the entry later
// and no one can approve it past its deadline.
func (g *Gate) resolve(ctx context.Context, id, outcome string) string {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.RequestTimeout)
	defer cancel()
	rep, err := bus.Call(rctx, g.nc, protocol.ResolveApproval,
		protocol.ApprovalResolveRequest{RequestID: id, Outcome: outcome})
	if err != nil {
		g.cfg.Logger.Warn("approvalgate: resolve approval", "request", id, "outcome", outcome, "err", err)
		return outcome
	}
	if outcome == protocol.ApprovalStateCancelled {
		return outcome // the turn is gone; whatever won does not matter
	}
	return rep.State
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
