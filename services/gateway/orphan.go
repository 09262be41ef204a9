package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/protocol"
)

// orphanWatch decides, for one relay, whether its turn has been left with
// no runner (protocol.OrphanCheck). It only runs while the stream is idle,
// so a flowing stream costs nothing.
type orphanWatch struct {
	s       *Service
	turnID  string
	check   protocol.OrphanCheck
	leases  jetstream.KeyValue
	runners jetstream.KeyValue
}

// orphanIdle is how long a stream must be quiet before the relay starts
// looking at its turn's lease.
const orphanIdle = protocol.LeaseStaleAfter

// orphanVerdict is what one look found.
type orphanVerdict int

const (
	orphanNo    orphanVerdict = iota // alive, or cannot tell yet
	orphanEnded                      // ended here: the error is in the stream for every follower
	// orphanGone: the turn ended long ago and none of its events is left
	// (the stream's window moved on): there is nothing more to relay.
	orphanGone
)

// tick looks once. It reports orphanEnded when it ended the turn: the
// lease was removed (so no runner can claim the turn any more) and a
// terminal error is in the stream for every follower.
func (o *orphanWatch) tick(ctx context.Context) orphanVerdict {
	if o.leases == nil {
		kv, err := o.s.js.KeyValue(ctx, protocol.BucketTurnLeases)
		if err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
			return orphanNo // cannot tell; try again later
		}
		o.leases = kv
	}
	var leaseRev, live uint64
	if o.leases != nil {
		e, err := o.leases.Get(ctx, o.turnID)
		switch {
		case err == nil:
			leaseRev, live = e.Revision(), e.Revision()
			if r, ok := o.runnerRevision(ctx, e.Value()); ok {
				live = r
			}
		case errors.Is(err, jetstream.ErrKeyNotFound):
		default:
			return orphanNo
		}
	}
	terminal, any, err := o.s.lastEvent(ctx, o.turnID)
	if err != nil {
		return orphanNo
	}
	if leaseRev == 0 && !any {
		// No lease (it ended, or was never accepted) and no event left.
		return orphanGone
	}
	if !o.check.Observe(live, terminal, time.Now()) {
		return orphanNo
	}
	if o.ownerAnswers(ctx) {
		// A runner still runs it (its heartbeats are late: a loaded bus).
		o.check = protocol.OrphanCheck{}
		return orphanNo
	}
	rev := leaseRev
	if o.leases != nil && rev != 0 {
		// Removing the lease at the revision we judged makes the verdict
		// final: a runner that claimed the turn meanwhile changed it, and
		// this delete fails.
		if err := o.leases.Delete(ctx, o.turnID, jetstream.LastRevision(rev)); err != nil {
			return orphanNo
		}
	}
	body, _ := marshalNoEscape(protocol.ErrorData{Message: protocol.TurnOrphanedText})
	m := &nats.Msg{Subject: protocol.TurnEvents(o.turnID), Data: body, Header: nats.Header{}}
	m.Header.Set(protocol.HeaderEvent, protocol.EventError)
	m.Header.Set(jetstream.MsgIDHeader, protocol.TurnEndMsgID(o.turnID))
	ack, err := o.s.js.PublishMsg(ctx, m)
	if err != nil {
		o.s.log.Warn("end orphaned turn", "turn", o.turnID, "err", err)
		return orphanNo
	}
	if ack.Duplicate {
		// The turn's own end was stored already, and this relay never read
		// it: it was discarded with the rest of the turn.
		return orphanGone
	}
	o.s.log.Warn("ended a turn no runner is left to finish", "turn", o.turnID)
	return orphanEnded
}

// ownerAnswers asks the turn's owner directly, the last check before a
// turn is ended for want of a runner: only the runner that runs it answers.
func (o *orphanWatch) ownerAnswers(ctx context.Context) bool {
	body, _ := json.Marshal(protocol.TurnControlMsg{Action: protocol.ControlProbe})
	rctx, cancel := context.WithTimeout(ctx, protocol.LeaseStaleAfter)
	defer cancel()
	_, err := o.s.nc.RequestWithContext(rctx, protocol.TurnControl(o.turnID), body)
	return err == nil
}

// runnerRevision is the revision of the entry of the runner a lease names,
// when that entry is of the lease's incarnation (the runner that took the
// turn is the one alive).
func (o *orphanWatch) runnerRevision(ctx context.Context, lease []byte) (uint64, bool) {
	var l protocol.TurnLease
	if json.Unmarshal(lease, &l) != nil || l.Runner == "" {
		return 0, false
	}
	if o.runners == nil {
		kv, err := o.s.js.KeyValue(ctx, protocol.BucketRunners)
		if err != nil {
			return 0, false
		}
		o.runners = kv
	}
	e, err := o.runners.Get(ctx, l.Runner)
	if err != nil {
		return 0, false
	}
	var b protocol.RunnerBeat
	if json.Unmarshal(e.Value(), &b) != nil || b.Incarnation != l.Incarnation {
		return 0, false
	}
	return e.Revision(), true
}

// lastEvent reports whether the turn's last stored event ends it, and
// whether any of its events is stored at all.
func (s *Service) lastEvent(ctx context.Context, turnID string) (terminal, any bool, err error) {
	st, err := s.js.Stream(ctx, protocol.StreamTurns)
	if err != nil {
		return false, false, err
	}
	m, err := st.GetLastMsgForSubject(ctx, protocol.TurnEvents(turnID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	return protocol.IsTerminal(m.Header.Get(protocol.HeaderEvent)), true, nil
}
