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

// tick looks once. It reports true when it ended the turn: the lease was
// removed (so no runner can claim the turn any more) and a terminal error
// is in the stream for every follower.
func (o *orphanWatch) tick(ctx context.Context) bool {
	if o.leases == nil {
		kv, err := o.s.js.KeyValue(ctx, protocol.BucketTurnLeases)
		if err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
			return false // cannot tell; try again later
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
			return false
		}
	}
	terminal, err := o.s.lastEventTerminal(ctx, o.turnID)
	if err != nil {
		return false
	}
	if !o.check.Observe(live, terminal, time.Now()) {
		return false
	}
	rev := leaseRev
	if o.leases != nil && rev != 0 {
		// Removing the lease at the revision we judged makes the verdict
		// final: a runner that claimed the turn meanwhile changed it, and
		// this delete fails.
		if err := o.leases.Delete(ctx, o.turnID, jetstream.LastRevision(rev)); err != nil {
			return false
		}
	}
	body, _ := marshalNoEscape(protocol.ErrorData{Message: protocol.TurnOrphanedText})
	m := &nats.Msg{Subject: protocol.TurnEvents(o.turnID), Data: body, Header: nats.Header{}}
	m.Header.Set(protocol.HeaderEvent, protocol.EventError)
	m.Header.Set(jetstream.MsgIDHeader, protocol.TurnEndMsgID(o.turnID))
	if _, err := o.s.js.PublishMsg(ctx, m); err != nil {
		o.s.log.Warn("end orphaned turn", "turn", o.turnID, "err", err)
		return false
	}
	o.s.log.Warn("ended a turn no runner is left to finish", "turn", o.turnID)
	return true
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

// lastEventTerminal reports whether the turn's last stored event ends it.
func (s *Service) lastEventTerminal(ctx context.Context, turnID string) (bool, error) {
	st, err := s.js.Stream(ctx, protocol.StreamTurns)
	if err != nil {
		return false, err
	}
	m, err := st.GetLastMsgForSubject(ctx, protocol.TurnEvents(turnID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return protocol.IsTerminal(m.Header.Get(protocol.HeaderEvent)), nil
}
