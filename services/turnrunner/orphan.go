package turnrunner

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
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
// runner at all nobody judges, and the first runner back resumes it): it removes
// the lease at the revision judged (a runner that claimed the turn
// meanwhile changed it, and the removal fails), then publishes the
// terminal error with the turn's end id, so its followers — who only
// watch the turn's events — stop, and the turns queued behind it in its
// session pass it over. It reports whether the lease is settled (ended,
// or changed since).
func (s *Service) endOrphan(ctx context.Context, turnID string, rev uint64) bool {
	ctx, cancel := context.WithTimeout(ctx, reapTimeout)
	defer cancel()
	if err := s.leases.Delete(ctx, turnID, jetstream.LastRevision(rev)); err != nil {
		if isConflict(err) {
			return true
		}
		s.log.Warn("remove the lease of an orphaned turn", "turn", turnID, "err", err)
		return false
	}
	if _, err := s.js.PublishMsg(ctx, bus.OrphanedTurnEnd(turnID)); err != nil {
		// The lease is gone, so no runner sees the turn again: say so
		// loudly (its followers wait until they leave).
		s.log.Error("end orphaned turn", "turn", turnID, "err", err)
		return true
	}
	s.log.Warn("ended a turn no runner could take over", "turn", turnID)
	return true
}
