package turnrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/protocol"
)

// Session locks: at most one turn per session runs at a time, across every
// runner, and a session's turns run in the order they were accepted. A
// session's entry in protocol.BucketSessionLocks names the turn that holds
// it and the turns queued behind it, oldest first. Every change is a
// compare-and-set on the entry's revision, so the queue's order is the
// order in which the writes won — the order the turns were accepted, since
// a turn joins the queue before its start request is answered.
//
// The holder gives the session to the head of the queue (or deletes the
// entry when no one waits). The lock needs no heartbeat of its own: it is
// held while the turn it names has a lease, so a turn that another runner
// takes over keeps its place, and a holder without a lease (finished
// without cleaning up, or ended by a gateway because no runner was left)
// is passed over by the next waiter with a compare-and-set. The queue is
// in the bucket, not in a runner, so it survives a runner's crash and a
// full restart.

// lockPoll is how often a waiting turn re-checks the holder's lease
// besides watching the lock.
const lockPoll = protocol.LeaseHeartbeat

// joinMode says where a turn that finds its session busy goes.
type joinMode int

const (
	joinQueue joinMode = iota // behind every waiting turn
	joinFront                 // ahead of them (an interrupting turn)
	joinNever                 // nowhere: the caller refuses the turn
)

func (t *turn) lockKey() string { return protocol.SessionLockKey(t.req.Workspace, t.req.Session) }

// lockState is a decoded lock entry.
type lockState struct {
	lock protocol.SessionLock
	rev  uint64
}

func (t *turn) readLock(ctx context.Context) (*lockState, error) {
	e, err := t.svc.locks.Get(ctx, t.lockKey())
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("turnrunner: read session lock %s: %w", t.lockKey(), err)
	}
	var l protocol.SessionLock
	if err := json.Unmarshal(e.Value(), &l); err != nil {
		// Unreadable: treat as free and overwrite it.
		return &lockState{rev: e.Revision()}, nil
	}
	return &lockState{lock: l, rev: e.Revision()}, nil
}

// writeLock replaces the entry at st.rev (creates it when st is nil) and
// reports the new revision.
func (t *turn) writeLock(ctx context.Context, st *lockState, l protocol.SessionLock) (uint64, error) {
	body, _ := json.Marshal(l)
	if st == nil {
		return t.svc.locks.Create(ctx, t.lockKey(), body)
	}
	return t.svc.locks.Update(ctx, t.lockKey(), body, st.rev)
}

// holderAlive reports whether turnID still has a lease.
func (t *turn) holderAlive(ctx context.Context, turnID string) (bool, error) {
	if turnID == "" {
		return false, nil
	}
	_, err := t.svc.leases.Get(ctx, turnID)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	return false, fmt.Errorf("turnrunner: read lease of %s: %w", turnID, err)
}

// joinSession takes the session lock if it is free (or already this
// turn's), or queues the turn as mode says. It returns the holding turn's
// id when the session is busy ("" when this turn holds it).
func (t *turn) joinSession(ctx context.Context, mode joinMode) (holder string, err error) {
	me := t.req.TurnID
	// The common case, an idle session, costs one write.
	if rev, err := t.writeLock(ctx, nil, protocol.SessionLock{TurnID: me, Acquired: time.Now().UnixMilli()}); err == nil {
		t.lockRev, t.lockSolo = rev, true
		return "", nil
	} else if !isConflict(err) {
		return "", fmt.Errorf("turnrunner: lock session %s: %w", t.lockKey(), err)
	}
	for attempt := 0; attempt < 20; attempt++ {
		st, err := t.readLock(ctx)
		if err != nil {
			return "", err
		}
		var l protocol.SessionLock
		switch {
		case st == nil:
			l = protocol.SessionLock{TurnID: me, Acquired: time.Now().UnixMilli()}
		case st.lock.TurnID == me:
			t.lockRev, t.lockSolo = st.rev, len(st.lock.Queue) == 0
			return "", nil
		case slices.Contains(st.lock.Queue, me):
			t.queued = true
			return st.lock.TurnID, nil
		default:
			alive, err := t.holderAlive(ctx, st.lock.TurnID)
			if err != nil {
				return "", err
			}
			l = st.lock
			if !alive {
				// The holder's turn is over: the session passes to the
				// head of the queue, or to this turn when no one waits.
				l = passOn(l)
				if l.TurnID == "" {
					l = protocol.SessionLock{TurnID: me, Acquired: time.Now().UnixMilli()}
				}
			}
			if l.TurnID != me {
				if mode == joinNever {
					return l.TurnID, nil
				}
				if mode == joinFront {
					l.Queue = append([]string{me}, l.Queue...)
				} else {
					l.Queue = append(slices.Clone(l.Queue), me)
				}
			}
		}
		rev, err := t.writeLock(ctx, st, l)
		if isConflict(err) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("turnrunner: lock session %s: %w", t.lockKey(), err)
		}
		if l.TurnID == me {
			t.lockRev, t.lockSolo, t.queued = rev, len(l.Queue) == 0, false
			return "", nil
		}
		t.queued = true
		return l.TurnID, nil
	}
	return "", fmt.Errorf("turnrunner: lock session %s: contended", t.lockKey())
}

// passOn is l with the session given to the head of its queue (TurnID ""
// when the queue is empty).
func passOn(l protocol.SessionLock) protocol.SessionLock {
	if len(l.Queue) == 0 {
		return protocol.SessionLock{}
	}
	return protocol.SessionLock{TurnID: l.Queue[0], Acquired: time.Now().UnixMilli(), Queue: slices.Clone(l.Queue[1:])}
}

// waitLock waits until the session lock is this turn's, or the turn is
// cancelled (false). It wakes on every change of the lock and, to notice a
// holder that died without a word, every lockPoll.
func (t *turn) waitLock() bool {
	key := t.lockKey()
	w, err := t.svc.locks.Watch(t.ctx, key, jetstream.UpdatesOnly())
	if err != nil && t.ctx.Err() == nil {
		t.svc.log.Warn("watch session lock", "session", key, "err", err)
	}
	defer func() {
		if w != nil {
			_ = w.Stop()
		}
	}()
	poll := time.NewTicker(lockPoll)
	defer poll.Stop()
	for {
		ctx, cancel := context.WithTimeout(t.ctx, 5*time.Second)
		_, err := t.joinSession(ctx, joinQueue)
		cancel()
		if err == nil && t.lockRev != 0 {
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
			return false
		case _, ok := <-updates:
			if !ok {
				w = nil // watch broke: keep polling
			}
		case <-poll.C:
		}
	}
}

// unlock gives the session to the next turn (the holder), or takes this
// turn out of the queue (a turn cancelled while it waited).
func (t *turn) unlock() {
	if t.lockRev == 0 && !t.queued {
		return
	}
	held, rev, solo := t.lockRev != 0, t.lockRev, t.lockSolo
	t.lockRev, t.lockSolo, t.queued = 0, false, false
	ctx, cancel := kvCtx()
	defer cancel()
	me := t.req.TurnID
	// The common case — the entry this turn took had no queue and no one
	// queued since (it is still at that revision) — costs one write.
	if held && solo {
		err := t.svc.locks.Delete(ctx, t.lockKey(), jetstream.LastRevision(rev))
		if err == nil {
			return
		}
		if !isConflict(err) {
			t.svc.log.Warn("release session lock", "turn", me, "err", err)
			return
		}
	}
	for attempt := 0; attempt < 20; attempt++ {
		st, err := t.readLock(ctx)
		if err != nil || st == nil {
			if err != nil {
				t.svc.log.Warn("release session lock", "turn", me, "err", err)
			}
			return
		}
		var l protocol.SessionLock
		switch {
		case st.lock.TurnID == me:
			l = passOn(st.lock)
		case slices.Contains(st.lock.Queue, me):
			l = st.lock
			l.Queue = slices.DeleteFunc(slices.Clone(l.Queue), func(id string) bool { return id == me })
		default:
			if held {
				t.svc.log.Warn("session lock was no longer this turn's", "turn", me, "holder", st.lock.TurnID)
			}
			return
		}
		if l.TurnID == "" {
			err = t.svc.locks.Delete(ctx, t.lockKey(), jetstream.LastRevision(st.rev))
		} else {
			_, err = t.writeLock(ctx, st, l)
		}
		if err == nil {
			return
		}
		if !isConflict(err) {
			t.svc.log.Warn("release session lock", "turn", me, "err", err)
			return
		}
	}
	t.svc.log.Warn("release session lock: contended", "turn", me)
}

// ownLock finds the lock state of a claimed turn: held (the lock's
// revision), queued, or neither.
func (t *turn) ownLock(ctx context.Context) error {
	st, err := t.readLock(ctx)
	if err != nil || st == nil {
		return err
	}
	switch {
	case st.lock.TurnID == t.req.TurnID:
		t.lockRev, t.lockSolo = st.rev, len(st.lock.Queue) == 0
	case slices.Contains(st.lock.Queue, t.req.TurnID):
		t.queued = true
	}
	return nil
}
