package turnrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

// Orphaned turns (protocol.ReapTurn.Subject). A gateway whose relay has gone
// quiet asks any runner about the turn; the runner that answers reads the
// lease and heartbeat buckets the runners own and, when the gateway's
// OrphanCheck judged the turn's liveness unchanged for
// protocol.LeaseOrphanAfter and the owner does not answer a probe, ends the
// turn: it removes the lease at the revision it judged (a runner that
// claimed the turn meanwhile changed it, and the removal fails) and
// publishes the terminal error with the turn's end id, so the stream keeps
// one end even if the turn's own runner finishes at the same moment.

// reapTimeout bounds the bucket and stream reads and writes of one answer.
const reapTimeout = 5 * time.Second

// errCannotLook answers a reap request whose reads did not finish in time.
var errCannotLook = &protocol.Error{Kind: protocol.Unavailable, Message: "The turn cannot be looked at now."}

// turnLook is one look at a quiet turn.
type turnLook struct {
	leaseRev uint64 // 0: no lease
	live     uint64 // the liveness revision (protocol.ReapReply.Liveness)
	terminal bool   // the last stored event ends the turn
	any      bool   // any of its events is stored
}

// reapOrphan answers protocol.ReapTurn.
func (s *Service) reapOrphan(ctx context.Context, req protocol.ReapRequest) (protocol.ReapReply, error) {
	if !protocol.ValidID(req.TurnID) {
		return protocol.ReapReply{}, &protocol.Error{Kind: protocol.Invalid, Message: "invalid turn id"}
	}
	ctx, cancel := context.WithTimeout(ctx, reapTimeout)
	defer cancel()
	look, err := s.lookAt(ctx, req.TurnID)
	if err != nil {
		// A loaded bus: the gateway asks again on its next tick. Not a
		// failure of this runner, so not an error in its log.
		s.log.Debug("look at a quiet turn", "turn", req.TurnID, "err", err)
		return protocol.ReapReply{}, errCannotLook
	}
	rep := protocol.ReapReply{Verdict: protocol.ReapAlive, Liveness: look.live, Terminal: look.terminal}
	if look.leaseRev == 0 && !look.any {
		// No lease (it ended, or was never accepted) and no event left.
		rep.Verdict = protocol.ReapGone
		return rep, nil
	}
	if !req.End || look.terminal || look.live != req.Liveness {
		return rep, nil
	}
	if s.owns(req.TurnID) || s.ownerAnswers(ctx, req.TurnID) {
		// A runner still runs it (its heartbeats are late: a loaded bus).
		return rep, nil
	}
	if look.leaseRev != 0 {
		// Removing the lease at the revision judged makes the verdict
		// final: no runner can claim the turn any more.
		if err := s.leases.Delete(ctx, req.TurnID, jetstream.LastRevision(look.leaseRev)); err != nil {
			if !isConflict(err) {
				s.log.Warn("remove the lease of an orphaned turn", "turn", req.TurnID, "err", err)
			}
			return rep, nil
		}
	}
	ack, err := s.js.PublishMsg(ctx, bus.OrphanedTurnEnd(req.TurnID))
	if err != nil {
		// The lease is gone, so the next look sees liveness 0 and the
		// gateway judges (and asks) again.
		s.log.Warn("end orphaned turn", "turn", req.TurnID, "err", err)
		return rep, nil
	}
	if ack.Duplicate {
		// The turn's own end was stored already, and the gateway never
		// read it: it was discarded with the rest of the turn.
		rep.Verdict = protocol.ReapGone
		return rep, nil
	}
	s.log.Warn("ended a turn no runner is left to finish", "turn", req.TurnID)
	rep.Verdict = protocol.ReapEnded
	return rep, nil
}

// lookAt reads a turn's lease, its runner's entry and its last event, in
// that order: a runner stores the terminal event before it deletes the
// lease, so a lease read first and an end read second never miss both.
func (s *Service) lookAt(ctx context.Context, turnID string) (turnLook, error) {
	var look turnLook
	e, err := s.leases.Get(ctx, turnID)
	switch {
	case err == nil:
		look.leaseRev, look.live = e.Revision(), e.Revision()
		if r, ok := s.runnerRevision(ctx, e.Value()); ok {
			look.live = r
		}
	case errors.Is(err, jetstream.ErrKeyNotFound):
	default:
		return look, fmt.Errorf("turnrunner: lease of %s: %w", turnID, err)
	}
	m, err := s.stream.GetLastMsgForSubject(ctx, protocol.TurnEvents(turnID))
	switch {
	case err == nil:
		look.any, look.terminal = true, protocol.IsTerminal(m.Header.Get(protocol.HeaderEvent))
	case errors.Is(err, jetstream.ErrMsgNotFound):
	default:
		return look, fmt.Errorf("turnrunner: last event of %s: %w", turnID, err)
	}
	return look, nil
}

// runnerRevision is the revision of the entry of the runner a lease names,
// when that entry is of the lease's incarnation (the runner that took the
// turn is the one alive).
func (s *Service) runnerRevision(ctx context.Context, lease []byte) (uint64, bool) {
	var l protocol.TurnLease
	if json.Unmarshal(lease, &l) != nil || l.Runner == "" {
		return 0, false
	}
	e, err := s.runners.Get(ctx, l.Runner)
	if err != nil {
		return 0, false
	}
	var b protocol.RunnerBeat
	if json.Unmarshal(e.Value(), &b) != nil || b.Incarnation != l.Incarnation {
		return 0, false
	}
	return e.Revision(), true
}

// ownerAnswers asks the turn's owner directly, the last check before a
// turn is ended for want of a runner: only the runner that runs it answers.
func (s *Service) ownerAnswers(ctx context.Context, turnID string) bool {
	rctx, cancel := context.WithTimeout(ctx, protocol.LeaseStaleAfter)
	defer cancel()
	return bus.Probe(rctx, s.nc, protocol.TurnControl(turnID), protocol.TurnControlMsg{Action: protocol.ControlProbe})
}
