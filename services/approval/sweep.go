package approval

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/telemetry"
)

// sweepLoop times out stale approvals and removes old decisions until ctx
// ends. It runs once at start, so approvals that expired while no approval
// service was running are timed out at once. Several instances may sweep
// the same bucket: every change is a compare-and-set.
func (s *Service) sweepLoop(ctx context.Context) {
	tick := time.NewTicker(s.cfg.SweepInterval)
	defer tick.Stop()
	lastPurge := s.now()
	for {
		s.sweep(ctx)
		// Purging leaves a marker per removed entry; drop old markers now
		// and then so the bucket does not grow with every approval ever asked.
		if now := s.now(); now.Sub(lastPurge) >= s.cfg.Retention {
			lastPurge = now
			if err := s.pending.kv.PurgeDeletes(ctx, jetstream.DeleteMarkersOlderThan(s.cfg.Retention)); err != nil && ctx.Err() == nil {
				s.log.Warn("purge approval markers", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sweep is one pass over the bucket.
func (s *Service) sweep(ctx context.Context) {
	entries, bad, err := s.pending.all(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("sweep approvals", "err", err)
		}
		return
	}
	for key, rev := range bad {
		s.log.Warn("dropping unreadable approval entry", "key", key)
		if err := s.pending.remove(ctx, key, rev); err != nil {
			s.log.Warn("drop approval entry", "key", key, "err", err)
		}
	}
	now := s.now().UnixMilli()
	for _, e := range entries {
		switch {
		case !protocol.ApprovalFinal(e.State) && now >= e.Deadline:
			_, err := s.pending.transition(ctx, e.RequestID, func(e *protocol.PendingApproval) (bool, error) {
				if protocol.ApprovalFinal(e.State) {
					return false, nil
				}
				e.State, e.DecidedAt = protocol.ApprovalStateTimedOut, s.now().UnixMilli()
				return true, nil
			})
			if err != nil && ctx.Err() == nil {
				s.log.Warn("time out approval", "request", e.RequestID, "err", err)
			} else if err == nil {
				telemetry.Approvals.WithLabelValues(protocol.ApprovalStateTimedOut).Inc()
				s.log.Info("approval timed out", "request", e.RequestID, "tool", e.ToolName, "turn", e.TurnID)
			}
		case protocol.ApprovalFinal(e.State) && now-e.DecidedAt >= s.cfg.Retention.Milliseconds():
			if err := s.pending.remove(ctx, e.RequestID, e.rev); err != nil && ctx.Err() == nil {
				s.log.Warn("remove decided approval", "request", e.RequestID, "err", err)
			}
		}
	}
}
