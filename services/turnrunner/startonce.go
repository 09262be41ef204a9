package turnrunner

import (
	"context"
	"sync"
	"time"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

// The gateway sends a turn's start again while it has no answer
// (bus.CallResending, every few seconds): under a burst the first
// delivery is often still at work here — its lease write queued behind
// hundreds of others — when its copies arrive. Every delivery of one
// start on this runner shares that start's one outcome (startTurnOnce):
//
//   - a copy (resend) of a start under way here is refused at once, with
//     no write and without waiting: the gateway awaits the first
//     delivery's own answer, and a resend's refusal never counts;
//   - a first delivery handled after one of its own resends (it waited
//     longer in the queue) waits for that resend's start and answers its
//     outcome: never a TURN_EXISTS for the client's own turn;
//   - a copy of a start that failed here answers that failure, for
//     startMemory: the gateway has that answer already, and running the
//     copy would build on whatever the failed start left (its lease, its
//     queue entry, whose message id the copy would reuse).
//
// A new attempt of the gateway (startOnRunner after RUNNER_BUSY: a first
// delivery, not a copy) starts afresh.

// startMemory is how long a failed start's outcome answers its copies:
// longer than a gateway waits for a start (StartTimeout, 30 s by default).
const startMemory = 2 * time.Minute

// starts is the record of the turn starts under way on this runner, and
// of those that failed within startMemory. The zero value is ready.
type starts struct {
	mu      sync.Mutex
	flights map[string]*startFlight
	// failed lists the failed flights in the order they ended, so the
	// old ones are forgotten from its head.
	failed []*startFlight
}

// startFlight is one start of one turn on this runner.
type startFlight struct {
	id   string
	done chan struct{} // closed when rep and err are set
	rep  protocol.TurnStarted
	err  error
	at   time.Time // when it ended
}

// ended reports whether the flight has its outcome.
func (f *startFlight) ended() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// join returns the flight of turnID that a delivery shares (mine false),
// or a new one that the delivery runs (mine true). An ended (failed)
// flight is shared by copies only.
func (st *starts) join(turnID string, resent bool) (f *startFlight, mine bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if f := st.flights[turnID]; f != nil && (resent || !f.ended()) {
		return f, false
	}
	if st.flights == nil {
		st.flights = map[string]*startFlight{}
	}
	f = &startFlight{id: turnID, done: make(chan struct{})}
	st.flights[turnID] = f
	return f, true
}

// finish records f's outcome: a success is forgotten at once (the turn's
// stored events answer its copies: startTurn refuses them, TURN_EXISTS); a
// failure is kept for startMemory.
func (st *starts) finish(f *startFlight, rep protocol.TurnStarted, err error) {
	now := time.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	f.rep, f.err, f.at = rep, err, now
	close(f.done)
	if err == nil {
		st.forget(f)
	} else {
		st.failed = append(st.failed, f)
	}
	for len(st.failed) > 0 && now.Sub(st.failed[0].at) > startMemory {
		st.forget(st.failed[0])
		st.failed[0] = nil
		st.failed = st.failed[1:]
	}
}

// forget removes f from the flights unless a later flight replaced it.
func (st *starts) forget(f *startFlight) {
	if st.flights[f.id] == f {
		delete(st.flights, f.id)
	}
}

// startTurnOnce serves protocol.StartTurn: startTurn, once per turn on
// this runner however many copies of the start arrive (see starts).
func (s *Service) startTurnOnce(ctx context.Context, req protocol.TurnRequest) (protocol.TurnStarted, error) {
	if req.TurnID == "" {
		return s.startTurn(ctx, req)
	}
	resent := bus.Resent(ctx)
	f, mine := s.starts.join(req.TurnID, resent)
	if !mine {
		return sameStart(ctx, f, resent)
	}
	rep, err := s.startTurn(ctx, req)
	s.starts.finish(f, rep, err)
	return rep, err
}

// sameStart answers a delivery of a start whose flight f another delivery
// runs (or ran) here.
func sameStart(ctx context.Context, f *startFlight, resent bool) (protocol.TurnStarted, error) {
	if f.ended() {
		return f.rep, f.err
	}
	if resent {
		return protocol.TurnStarted{}, protocol.ErrTurnExists
	}
	select {
	case <-f.done:
		return f.rep, f.err
	case <-ctx.Done():
		return protocol.TurnStarted{}, ctx.Err()
	}
}

// startWriteCtx bounds a start's writes of its turn's ownership (its
// lease, its place in its session's queue) by the caller's deadline,
// which the gateway sets to its whole StartTimeout: under a burst those
// writes queue up behind each other on the bus, and a start must wait its
// turn, not fail after a fixed few seconds while its client still waits
// (it answered 503 BUS_UNAVAILABLE to 20 of 20 chats beside 200 others).
// As with kvCtx, a write under way is not cut short when the handler's
// context is cancelled; without a deadline (a caller other than the
// gateway's CallResending) it is kvCtx's.
func startWriteCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return kvCtx()
	}
	return context.WithDeadline(context.WithoutCancel(ctx), dl)
}
