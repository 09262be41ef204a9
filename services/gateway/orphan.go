package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

// orphanWatch decides, for one relay, whether its turn has been left with
// no runner (protocol.OrphanCheck). It only runs while the stream is idle,
// so a flowing stream costs nothing.
//
// The turn's lease and its runner's heartbeat are the turn runners' state,
// so the watch asks them (protocol.ReapTurn.Subject): any live runner reports
// the turn's liveness revision, and once this relay's OrphanCheck saw it
// unchanged for protocol.LeaseOrphanAfter, a runner checks again, probes
// the owner and ends the turn (see protocol.ReapRequest). Only when no
// runner answers at all — there is no owner to ask — does the gateway end
// the turn itself, by the stream it relays (tickAlone).
type orphanWatch struct {
	s      *Service
	turnID string
	// check runs over the liveness revisions the runners report.
	check protocol.OrphanCheck
	// alone runs over the sequence of the turn's last stored event while
	// no runner answers.
	alone protocol.OrphanCheck
	// now is the watch's clock (nil: time.Now).
	now func() time.Time
}

func (o *orphanWatch) clock() time.Time {
	if o.now != nil {
		return o.now()
	}
	return time.Now()
}

// orphanIdle is how long a stream must be quiet before the relay starts
// asking about its turn.
const orphanIdle = protocol.LeaseStaleAfter

// Timeouts of the questions to the runners: a look reads two buckets and
// the stream; an end may also probe the owner (protocol.LeaseStaleAfter).
const (
	reapLookTimeout = 2 * time.Second
	reapEndTimeout  = 2 * protocol.LeaseStaleAfter
)

// orphanVerdict is what one look found.
type orphanVerdict int

const (
	orphanNo    orphanVerdict = iota // alive, or cannot tell yet
	orphanEnded                      // ended: the error is in the stream for every follower
	// orphanGone: the turn ended long ago and none of its events is left
	// (the stream's window moved on): there is nothing more to relay.
	orphanGone
)

// tick looks once. It reports orphanEnded when the turn was ended: no
// runner can claim it any more, and a terminal error is in the stream for
// every follower.
func (o *orphanWatch) tick(ctx context.Context) orphanVerdict {
	rep, err := o.ask(ctx, protocol.ReapRequest{TurnID: o.turnID}, reapLookTimeout)
	if errors.Is(err, protocol.ErrUnavailable) {
		o.check = protocol.OrphanCheck{}
		return o.tickAlone(ctx)
	}
	o.alone = protocol.OrphanCheck{}
	if err != nil {
		return orphanNo // cannot tell; try again later
	}
	if rep.Verdict == protocol.ReapGone {
		return orphanGone
	}
	if !o.check.Observe(rep.Liveness, rep.Terminal, o.clock()) {
		return orphanNo
	}
	rep, err = o.ask(ctx, protocol.ReapRequest{TurnID: o.turnID, End: true, Liveness: rep.Liveness}, reapEndTimeout)
	if err != nil {
		return orphanNo
	}
	switch rep.Verdict {
	case protocol.ReapEnded:
		o.s.log.Warn("a runner ended a turn no runner is left to finish", "turn", o.turnID)
		return orphanEnded
	case protocol.ReapGone:
		return orphanGone
	}
	// Its owner answered, or a runner claimed it meanwhile: judge afresh.
	o.check = protocol.OrphanCheck{}
	return orphanNo
}

// tickAlone judges the turn while no turn runner is subscribed at all, so
// none can be asked and none can claim the turn. The liveness the gateway
// can see is the turn's own stream: when its last event has not changed
// for protocol.LeaseOrphanAfter and the owner does not answer a probe,
// the gateway publishes the terminal error itself, with the turn's end id
// and on condition that the turn's last event is still the one it judged
// (so it can never land after anything a runner published meanwhile). It
// leaves the lease alone: a runner that starts later claims the turn,
// finds it ended in its events and only cleans up (frees the lease and
// the session), so the turn the client was told failed never resumes.
func (o *orphanWatch) tickAlone(ctx context.Context) orphanVerdict {
	terminal, seq, err := o.s.lastEvent(ctx, o.turnID)
	if err != nil {
		return orphanNo
	}
	if seq == 0 {
		return orphanGone // none of its events is left
	}
	if !o.alone.Observe(seq, terminal, o.clock()) {
		return orphanNo
	}
	if o.ownerAnswers(ctx) {
		o.alone = protocol.OrphanCheck{}
		return orphanNo
	}
	// A runner that came up since the last look judges instead.
	if _, err := o.ask(ctx, protocol.ReapRequest{TurnID: o.turnID}, reapLookTimeout); !errors.Is(err, protocol.ErrUnavailable) {
		o.alone = protocol.OrphanCheck{}
		return orphanNo
	}
	ack, err := o.s.js.PublishMsg(ctx, bus.OrphanedTurnEnd(o.turnID), jetstream.WithExpectLastSequencePerSubject(seq))
	var apiErr *jetstream.APIError
	switch {
	case errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence:
		// Something was published on the turn since: it is not orphaned.
		o.alone = protocol.OrphanCheck{}
		return orphanNo
	case err != nil:
		o.s.log.Warn("end orphaned turn", "turn", o.turnID, "err", err)
		return orphanNo
	case ack.Duplicate:
		// The turn's own end was stored already, and this relay never read
		// it: it was discarded with the rest of the turn.
		return orphanGone
	}
	o.s.log.Warn("ended a turn no runner is left to finish (no turn runner answers)", "turn", o.turnID)
	return orphanEnded
}

// ask puts one question to the turn runners. protocol.ErrUnavailable
// itself (errors.Is) means none is subscribed; a runner that is stopping
// answers with an Unavailable of its own.
func (o *orphanWatch) ask(ctx context.Context, req protocol.ReapRequest, timeout time.Duration) (protocol.ReapReply, error) {
	return bus.Call(ctx, o.s.nc, protocol.ReapTurn, req, bus.Within(timeout))
}

// ownerAnswers asks the turn's owner directly: only the runner that runs
// it answers (a runner draining on shutdown still does).
func (o *orphanWatch) ownerAnswers(ctx context.Context) bool {
	rctx, cancel := context.WithTimeout(ctx, protocol.LeaseStaleAfter)
	defer cancel()
	return bus.Probe(rctx, o.s.nc, protocol.TurnControl(o.turnID), protocol.TurnControlMsg{Action: protocol.ControlProbe})
}

// lastEvent reports whether the turn's last stored event ends it, and its
// stream sequence (0 when none of its events is stored).
func (s *Service) lastEvent(ctx context.Context, turnID string) (terminal bool, seq uint64, err error) {
	st, err := s.js.Stream(ctx, protocol.StreamTurns)
	if err != nil {
		return false, 0, err
	}
	m, err := st.GetLastMsgForSubject(ctx, protocol.TurnEvents(turnID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	return protocol.IsTerminal(m.Header.Get(protocol.HeaderEvent)), m.Sequence, nil
}
