package turnrunner

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/ownership"
)

// Orphaned turns. A turn whose runner is gone is claimed by another runner
// (lease.go); only a turn that no runner can take over is ended, by a
// runner (endOrphan, from the claim loop). No gateway judges or ends
// turns: a follower only watches the turn's events.

// reapTimeout bounds the bucket and stream reads and writes of one answer
// about a turn, or of ending one.
const reapTimeout = 5 * time.Second

// errCannotLook answers a question about a turn whose reads did not
// finish in time.
var errCannotLook = &protocol.Error{Kind: protocol.Unavailable, Message: "The turn cannot be looked at now."}

// endOrphan ends a turn whose runner is gone and that no runner could take
// over for ownership.OrphanAfter (every one of them full; with no
// runner at all nobody judges, and the first runner back resumes it).
// It reports whether the lease is settled (ended, or changed since).
func (s *Service) endOrphan(ctx context.Context, turnID string, rev uint64) bool {
	return s.endLeased(ctx, turnID, rev, "ended a turn no runner could take over")
}

// Failed starts. A start whose lease write landed while its answer was
// lost (a cluster electing a leader, a node dying) fails, and its client is
// told to try again (503), so the turn never runs; a finished turn whose
// lease removal failed the same way is gone too. Either lease names this
// live runner, so no other runner ever claims it, and while it stands the
// turn counts as alive: the turns queued behind it in its session wait for
// it (ownership's holder check) for the lease's whole MaxAge, an hour. The
// runner it names is the one that knows the turn does not run: its claim
// loop ends such a lease once it has stood for ownership.StaleAfter with no
// start of that turn under way here (forgotten).

// forgotten reports whether a lease of this runner (sl), for a turn that
// does not run here, has stood long enough with no start of it under way.
func (s *Service) forgotten(turnID string, sl *seenLease, now time.Time) bool {
	s.mu.Lock()
	starting := s.starting[turnID] > 0
	s.mu.Unlock()
	return !starting && now.Sub(sl.since) >= ownership.StaleAfter
}

// takeBack settles a lease of this runner's that no turn here stands
// behind (see forgotten): a turn with no event stored never started (a
// failed start) and is ended; any other is claimed as another runner's
// would be, and its resume finds out what is left — the clean-up of a
// finished turn whose lease removal failed, or the rest of a turn whose
// resume could not read its checkpoint, or that stopped on a renewal
// whose answer was lost. It reports whether the lease is settled.
func (s *Service) takeBack(ctx context.Context, turnID string, rev uint64) bool {
	started, err := s.hasEvents(ctx, turnID)
	switch {
	case err != nil:
		return false // the bus: judged again at the next tick
	case !started:
		return s.endFailedStart(ctx, turnID, rev)
	default:
		return s.claim(ctx, turnID, rev)
	}
}

// endFailedStart ends a lease of this runner's that no turn here stands
// behind (see forgotten).
func (s *Service) endFailedStart(ctx context.Context, turnID string, rev uint64) bool {
	return s.endLeased(ctx, turnID, rev, "ended the lease of a turn this runner does not run (a start that failed after its lease was written, or a finished turn's lease left behind)")
}

// endLeased removes turnID's lease at the revision judged (a runner that
// claimed the turn meanwhile changed it, and the removal fails), then,
// unless the turn's stream already ends, publishes the terminal error with
// the turn's end id, so its followers — who only watch the turn's events —
// stop, and the turns queued behind it in its session pass it over. It
// reports whether the lease is settled (ended, or changed since).
func (s *Service) endLeased(ctx context.Context, turnID string, rev uint64, what string) bool {
	ctx, cancel := context.WithTimeout(ctx, reapTimeout)
	defer cancel()
	if err := s.leases.Delete(ctx, turnID, jetstream.LastRevision(rev)); err != nil {
		if isConflict(err) {
			return true
		}
		s.log.Warn("remove the lease of a turn nobody runs", "turn", turnID, "err", err)
		return false
	}
	last, err := s.stream.GetLastMsgForSubject(ctx, protocol.TurnEvents(turnID))
	if err == nil && protocol.IsTerminal(last.Header.Get(protocol.HeaderEvent)) {
		s.log.Info(what, "turn", turnID, "ended", true)
		return true
	}
	if _, err := s.js.PublishMsg(ctx, bus.OrphanedTurnEnd(turnID)); err != nil {
		// The lease is gone, so no runner sees the turn again: say so
		// loudly (its followers wait until they leave).
		s.log.Error("end a turn nobody runs", "turn", turnID, "err", err)
		return true
	}
	s.log.Warn(what, "turn", turnID)
	return true
}
