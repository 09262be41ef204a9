package turnrunner

import (
	"context"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/ownership"
	"github.com/waggle-os/core/services/turnrunner/turn"
)

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
	rt := h.s.turns[turnID]
	h.s.mu.Unlock()
	if rt != nil {
		rt.t.Cancel(turn.ErrLeaseLost)
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
	rt := h.s.newTurn(tk.Request(), tk)
	if tk.Followed() {
		// Its followers' attaches reach this runner within one interval;
		// until then a stand-in keeps the grace from starting.
		rt.presence.Attach("_claimed", time.Now())
	}
	return h.s.launch(rt, rt.t.Resume)
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
			for _, rt := range s.running() {
				rctx, cancel := context.WithTimeout(ctx, ownership.Heartbeat)
				rt.own.Renew(rctx, rt.presence.Followed())
				cancel()
				rt.presence.Tick(now)
			}
		}
	}
}

// running lists the turns this runner runs.
func (s *Service) running() []*runningTurn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*runningTurn, 0, len(s.turns))
	for _, rt := range s.turns {
		out = append(out, rt)
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
