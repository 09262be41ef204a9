package turnrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/protocol"
)

// Session locks: at most one turn per session runs at a time, across every
// runner. A session's entry in protocol.BucketSessionLocks names the turn
// that holds it; it is taken with a create-if-absent and given back by a
// delete on the revision the holder wrote. The lock needs no heartbeat of
// its own: it is held while the turn it names has a lease, so a turn that
// another runner takes over keeps its session, and a lock whose turn has
// no lease any more (finished without cleaning up, or ended by a gateway
// because no runner was left) is free and is replaced with a
// compare-and-set.

// lockPoll is how often a waiting turn re-checks the holder's lease
// besides watching the lock.
const lockPoll = protocol.LeaseHeartbeat

func (t *turn) lockKey() string { return protocol.SessionLockKey(t.req.Workspace, t.req.Session) }

// tryLock takes the session lock if it is free (or already this turn's).
// It returns the holding turn's id when the session is busy.
func (t *turn) tryLock(ctx context.Context) (holder string, err error) {
	s := t.svc
	key := t.lockKey()
	body, _ := json.Marshal(protocol.SessionLock{TurnID: t.req.TurnID, Acquired: time.Now().UnixMilli()})
	for attempt := 0; attempt < 5; attempt++ {
		rev, err := s.locks.Create(ctx, key, body)
		if err == nil {
			t.lockRev = rev
			return "", nil
		}
		if !isConflict(err) {
			return "", fmt.Errorf("turnrunner: lock session %s: %w", key, err)
		}
		e, err := s.locks.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // released meanwhile
		}
		if err != nil {
			return "", fmt.Errorf("turnrunner: read session lock %s: %w", key, err)
		}
		var l protocol.SessionLock
		_ = json.Unmarshal(e.Value(), &l)
		if l.TurnID == t.req.TurnID {
			t.lockRev = e.Revision()
			return "", nil
		}
		if l.TurnID != "" {
			_, err = s.leases.Get(ctx, l.TurnID)
			if err == nil {
				return l.TurnID, nil
			}
			if !errors.Is(err, jetstream.ErrKeyNotFound) {
				return "", fmt.Errorf("turnrunner: read lease of %s: %w", l.TurnID, err)
			}
		}
		// The holder has no lease: its turn is over. Take the lock over.
		rev, err = s.locks.Update(ctx, key, body, e.Revision())
		if err == nil {
			s.log.Info("took over a stale session lock", "session", key, "from", l.TurnID)
			t.lockRev = rev
			return "", nil
		}
		if !isConflict(err) {
			return "", fmt.Errorf("turnrunner: lock session %s: %w", key, err)
		}
	}
	return "", fmt.Errorf("turnrunner: lock session %s: contended", key)
}

// waitLock waits until the session lock is this turn's, or the turn is
// cancelled (false).
func (t *turn) waitLock() bool {
	key := t.lockKey()
	for {
		w, err := t.svc.locks.Watch(t.ctx, key, jetstream.UpdatesOnly())
		if err != nil && t.ctx.Err() == nil {
			t.svc.log.Warn("watch session lock", "session", key, "err", err)
		}
		poll := time.NewTicker(lockPoll)
		for {
			ctx, cancel := context.WithTimeout(t.ctx, 5*time.Second)
			_, err := t.tryLock(ctx)
			cancel()
			if err == nil && t.lockRev != 0 {
				poll.Stop()
				if w != nil {
					_ = w.Stop()
				}
				return true
			}
			if err != nil && t.ctx.Err() == nil {
				t.svc.log.Warn("session lock", "session", key, "err", err)
			}
			var updates <-chan jetstream.KeyValueEntry
			if w != nil {
				updates = w.Updates()
			}
			select {
			case <-t.ctx.Done():
				poll.Stop()
				if w != nil {
					_ = w.Stop()
				}
				return false
			case _, ok := <-updates:
				if !ok {
					w = nil // watch broke: keep polling
				}
			case <-poll.C:
			}
		}
	}
}

// unlock gives the session to the next turn. Only this turn's own lock is
// deleted (compare-and-set on its revision).
func (t *turn) unlock() {
	if t.lockRev == 0 {
		return
	}
	rev := t.lockRev
	t.lockRev = 0
	ctx, cancel := kvCtx()
	defer cancel()
	if err := t.svc.locks.Delete(ctx, t.lockKey(), jetstream.LastRevision(rev)); err != nil && !isConflict(err) {
		t.svc.log.Warn("release session lock", "turn", t.req.TurnID, "err", err)
	}
}

// ownLock finds the lock of a claimed turn: the revision, if the session's
// lock names this turn.
func (t *turn) ownLock(ctx context.Context) error {
	e, err := t.svc.locks.Get(ctx, t.lockKey())
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("turnrunner: read session lock: %w", err)
	}
	var l protocol.SessionLock
	if json.Unmarshal(e.Value(), &l) == nil && l.TurnID == t.req.TurnID {
		t.lockRev = e.Revision()
	}
	return nil
}
