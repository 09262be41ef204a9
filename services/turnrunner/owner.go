package turnrunner

import (
	"context"
	"errors"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/ownership"
)

// turnOwnership is what a turn needs of its ownership (an
// ownership.Ticket): its place in its session's queue and its lease.
type turnOwnership interface {
	// Join puts the turn in its session's queue and reports the turn
	// holding the session when that is another.
	Join(ctx context.Context, mode ownership.Mode) (holder string, err error)
	// Place finds a claimed turn's place in its session's queue; Placed
	// reports whether it has one, Holds whether it holds the session.
	Place(ctx context.Context) error
	Placed() bool
	Holds() bool
	// Wait waits until the turn holds its session.
	Wait(ctx context.Context) error
	// Leave gives the session (or the turn's place) up.
	Leave()
	// Renew keeps the lease alive, Drop deletes it once the turn ended,
	// Release hands the turn to another runner.
	Renew(ctx context.Context, followed bool)
	Drop()
	Release(followed bool)
	// Abandon lets go of the turn here, its lease left for this runner
	// to take back later.
	Abandon()
}

// errLeaseLost cancels a turn whose lease another runner took: this
// runner must not touch the turn any more.
var errLeaseLost = errors.New("turn lease lost")

// errHandover cancels a turn this runner gives to another on shutdown.
var errHandover = errors.New("turn handed over")

// kvCtx bounds one write of a turn's ownership on its way to start.
func kvCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Second)
}

// ownerHost is the runner as its ownership.Owner sees it.
type ownerHost struct{ s *Service }

// Runs reports whether turnID runs on this runner, or its start is under
// way here (its lease may already be written).
func (h ownerHost) Runs(turnID string) bool {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	_, runs := h.s.turns[turnID]
	return runs || h.s.starting[turnID] > 0
}

// Lost stops a turn of this runner whose lease another runner took.
func (h ownerHost) Lost(turnID string) {
	h.s.mu.Lock()
	t := h.s.turns[turnID]
	h.s.mu.Unlock()
	if t != nil {
		t.cancel(errLeaseLost)
	}
}

// Reserve takes a slot for a claimed turn, if one is free.
func (h ownerHost) Reserve() bool {
	select {
	case h.s.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// Unreserve gives a slot back.
func (h ownerHost) Unreserve() { <-h.s.slots }

// Resume runs a turn claimed from another runner from its checkpoint.
func (h ownerHost) Resume(tk *ownership.Ticket) bool {
	t := h.s.newTurn(tk.Request(), tk)
	t.resumed = true
	if tk.Followed() {
		// Its followers' attaches reach this runner within one interval;
		// until then a stand-in keeps the grace from starting.
		t.presence.attach("_claimed", time.Now())
	}
	return h.s.launch(t, t.resume)
}

// heartbeatLoop renews the leases that changed and runs the presence
// check of every turn, once per ownership.Heartbeat.
func (s *Service) heartbeatLoop(ctx context.Context) {
	tick := time.NewTicker(ownership.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			for _, t := range s.running() {
				rctx, cancel := context.WithTimeout(ctx, ownership.Heartbeat)
				t.own.Renew(rctx, t.presence.wasFollowed())
				cancel()
				t.presence.tick(now)
			}
		}
	}
}

// running lists the turns this runner runs.
func (s *Service) running() []*turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*turn, 0, len(s.turns))
	for _, t := range s.turns {
		out = append(out, t)
	}
	return out
}

// owns reports whether turnID runs on this runner.
func (s *Service) owns(turnID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.turns[turnID]
	return ok
}

// joinMode is where a start request's multitask puts its turn.
func joinMode(multitask string) ownership.Mode {
	switch multitask {
	case protocol.MultitaskReject:
		return ownership.Nowhere
	case protocol.MultitaskInterrupt:
		return ownership.Ahead
	default:
		return ownership.Behind
	}
}
