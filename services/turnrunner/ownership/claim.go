package ownership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/turnevents"
)

// reapTimeout bounds the bucket and stream writes of ending one orphaned
// turn.
const reapTimeout = 5 * time.Second

// seenLease is what a runner knows of another runner's lease.
type seenLease struct {
	rev         uint64
	since       time.Time // when rev was first seen, on this runner's clock
	runner      string
	incarnation string
	released    bool
	jitter      time.Duration
	// unclaimed is when this runner first found the lease due and could
	// not take it (no free slot); zero while it was not.
	unclaimed time.Time
}

// seenRunner is what a runner knows of a runner's entry.
type seenRunner struct {
	rev         uint64
	since       time.Time // when rev was first seen
	incarnation string
}

// claimLoop watches every lease and runner entry and claims the turns of
// runners that are gone (stale), restarted or that gave them up
// (released). A little random jitter per lease spreads a dead runner's
// turns over the survivors.
func (o *Owner) claimLoop(ctx context.Context) {
	for ctx.Err() == nil {
		if err := o.watchLeases(ctx); err != nil && ctx.Err() == nil {
			o.log.Warn("watch turn leases", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

func (o *Owner) watchLeases(ctx context.Context) error {
	lw, err := o.leases.WatchAll(ctx)
	if err != nil {
		return err
	}
	defer lw.Stop()
	rw, err := o.runners.WatchAll(ctx)
	if err != nil {
		return err
	}
	defer rw.Stop()
	seen := map[string]*seenLease{}
	runners := map[string]*seenRunner{}
	var blind time.Time // the last tick this runner was cut off from the bus
	started := time.Now()
	tick := time.NewTicker(o.cfg.Heartbeat / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-rw.Updates():
			if !ok {
				return errors.New("runner watch closed")
			}
			if e == nil {
				continue
			}
			if e.Operation() != jetstream.KeyValuePut {
				delete(runners, e.Key())
				continue
			}
			var b RunnerBeat
			_ = json.Unmarshal(e.Value(), &b)
			runners[e.Key()] = &seenRunner{rev: e.Revision(), since: time.Now(), incarnation: b.Incarnation}
		case e, ok := <-lw.Updates():
			if !ok {
				return errors.New("lease watch closed")
			}
			if e == nil {
				continue
			}
			if e.Operation() != jetstream.KeyValuePut {
				delete(seen, e.Key())
				continue
			}
			var l Lease
			if json.Unmarshal(e.Value(), &l) != nil {
				delete(seen, e.Key())
				continue
			}
			// Skipped by what runs here, not by the runner name: a runner
			// restarted under the same runner id must take its old turns.
			// A lease of this very runner stays in view even while its
			// turn runs or starts here: the tick judges it once neither
			// is true any more (a start that failed after its lease write
			// landed, a turn let go by Abandon), and no further write of
			// the lease may come to show it again.
			mine := l.Runner == o.cfg.Runner && l.Incarnation == o.incarnation
			if !mine && o.host.Runs(e.Key()) {
				delete(seen, e.Key())
				o.lost(e.Key())
				continue
			}
			seen[e.Key()] = &seenLease{rev: e.Revision(), since: time.Now(), runner: l.Runner, incarnation: l.Incarnation,
				released: l.Released, jitter: time.Duration(rand.Int64N(int64(o.cfg.Heartbeat / 2)))}
		case now := <-tick.C:
			if !o.js.Conn().IsConnected() {
				// A runner that cannot see the bus sees no heartbeat: that
				// says nothing about the others. Staleness is counted again
				// from when it sees the bus.
				blind = now
				continue
			}
			peers := 0
			for key, r := range runners {
				if key != o.cfg.Runner && now.Sub(r.since) < o.cfg.StaleAfter {
					peers++
				}
			}
			o.peers.Store(int32(peers))
			// This runner's own heartbeat shows in the watch every beat;
			// when it does not, the watch itself stopped (a NATS restart
			// can leave it so), and it says nothing about the others.
			me := runners[o.cfg.Runner]
			if (me == nil || me.incarnation == o.incarnation) && now.Sub(ownSeen(me, started)) > o.cfg.StaleAfter {
				return errors.New("runner watch stalled: this runner's own heartbeat is not seen")
			}
			// Nor does a heartbeat of its own that is merely late: while a
			// cluster elects the runners bucket's leader every runner's
			// writes fail at once, and the others' entries look stale a
			// moment before this one's does. Staleness counts from when
			// this runner sees its own heartbeat again.
			if me != nil && me.incarnation == o.incarnation && now.Sub(ownSeen(me, started)) > 2*o.cfg.Heartbeat {
				blind = now
			}
			for key, sl := range seen {
				if sl.runner == o.cfg.Runner && sl.incarnation == o.incarnation {
					// A lease of this very runner: its turn runs here, its
					// start is under way, or neither (takeBack), counted
					// from when it last ran or started here.
					if o.host.Runs(key) {
						sl.since = now
					} else if now.Sub(sl.since) >= o.cfg.StaleAfter && o.takeBack(ctx, key, sl.rev) {
						delete(seen, key)
					}
					continue
				}
				if !o.leaseDue(sl, runners[sl.runner], blind, now) {
					continue
				}
				if o.claim(ctx, key, sl.rev) {
					delete(seen, key)
					continue
				}
				if sl.unclaimed.IsZero() || blind.After(sl.unclaimed) {
					sl.unclaimed = now
				}
				if now.Sub(sl.unclaimed) >= o.cfg.OrphanAfter && o.endOrphan(ctx, key, sl.rev) {
					delete(seen, key)
				}
			}
		}
	}
}

// leaseDue reports whether a lease seen as sl may be claimed at now: it
// was released, names an earlier incarnation of its runner, or its
// runner's entry (r, nil when there is none) has not changed for
// StaleAfter (for a runner without an entry: since the lease was seen) —
// and, either way, since this runner last was cut off from the bus
// (blind).
func (o *Owner) leaseDue(sl *seenLease, r *seenRunner, blind, now time.Time) bool {
	since := func(t time.Time) time.Duration {
		if blind.After(t) {
			t = blind
		}
		return now.Sub(t)
	}
	switch {
	case sl.released:
		return now.Sub(sl.since) >= sl.jitter
	case sl.runner == o.cfg.Runner && sl.incarnation != o.incarnation:
		return true // this runner's own predecessor
	case r == nil:
		return since(sl.since) >= o.cfg.StaleAfter+sl.jitter
	case r.incarnation != sl.incarnation:
		return true // its runner restarted: the turn is nobody's
	default:
		return since(r.since) >= o.cfg.StaleAfter+sl.jitter
	}
}

// ownSeen is when this runner's own entry was last seen changing (the
// watch's start if never).
func ownSeen(me *seenRunner, started time.Time) time.Time {
	if me == nil || me.since.Before(started) {
		return started
	}
	return me.since
}

// lost stops a turn of this runner whose lease another runner took.
func (o *Owner) lost(turnID string) {
	o.log.Warn("turn lease taken by another runner; stopping here", "turn", turnID)
	o.mu.Lock()
	t := o.tickets[turnID]
	o.mu.Unlock()
	if t != nil {
		t.forget()
	}
	o.host.Lost(turnID)
}

// claim takes over the turn of lease key at revision rev, if this runner
// has a free slot and wins the compare-and-set. It reports whether the
// lease is settled for this watcher (claimed, changed since, or not a
// turn); false means try again: no free slot, or the bus failed.
func (o *Owner) claim(ctx context.Context, key string, rev uint64) bool {
	if o.stopping.Load() || o.host.Runs(key) {
		return true
	}
	if !o.host.Reserve() {
		return false // busy: another runner may take it, or this one later
	}
	gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	e, err := o.leases.Get(gctx, key)
	if err != nil || e.Revision() != rev {
		o.host.Unreserve()
		// Gone or changed: settled (the watch reports what it is now).
		// Any other failure: the bus; try again.
		return err == nil || errors.Is(err, jetstream.ErrKeyNotFound)
	}
	var l Lease
	if err := json.Unmarshal(e.Value(), &l); err != nil || !protocol.ValidID(l.Request.TurnID) || l.Request.TurnID != key {
		o.host.Unreserve()
		return true
	}
	l.Runner, l.Incarnation, l.Released = o.cfg.Runner, o.incarnation, false
	l.Claims++
	l.Heartbeat = time.Now().UnixMilli()
	body, _ := json.Marshal(l)
	newRev, err := o.leases.Update(gctx, key, body, rev)
	if err != nil {
		o.host.Unreserve()
		if !IsConflict(err) {
			o.log.Warn("claim turn lease", "turn", key, "err", err)
			return false
		}
		return true
	}
	o.log.Info("took over turn", "turn", key, "workspace", l.Request.Workspace, "session", l.Request.Session, "claims", l.Claims)
	t := o.ticket(l, newRev)
	if !o.host.Resume(t) {
		t.Release(l.Followed)
		o.host.Unreserve()
	}
	return true
}

// endOrphan ends a turn whose runner is gone and that no runner could take
// over for OrphanAfter (every one of them full; with no runner at all
// nobody judges, and the first runner back resumes it). No gateway judges
// or ends turns. It reports whether the lease is settled (ended, or
// changed since).
func (o *Owner) endOrphan(ctx context.Context, turnID string, rev uint64) bool {
	return o.endLeased(ctx, turnID, rev, "ended a turn no runner could take over")
}

// Leases nobody stands behind. A write whose answer is lost (a cluster
// electing a leader) can leave a lease naming this live runner for a turn
// that does not run here: a start whose lease write landed while the start
// failed (its client was told to try again), a finished turn whose lease
// removal was lost, a claimed turn whose checkpoint could not be read. No
// other runner ever claims it — its runner is alive — and while it stands
// the turn counts as alive: the turns queued behind it in its session wait
// (holderAlive) for the lease's whole MaxAge, an hour. The runner it names
// is the one that knows the turn does not run: its claim loop settles such
// a lease once it has stood for StaleAfter with the turn neither running
// nor starting here (Host.Runs).

// takeBack settles a lease of this runner's that no turn here stands
// behind: a turn with no event stored never started (a failed start) and
// is ended; any other is claimed as another runner's would be, and its
// resume finds out what is left (the clean-up of a turn that ended, or the
// rest of one). It reports whether the lease is settled.
func (o *Owner) takeBack(ctx context.Context, turnID string, rev uint64) bool {
	started, err := o.hasEvents(ctx, turnID)
	switch {
	case err != nil:
		return false // the bus: judged again at the next tick
	case !started:
		return o.endLeased(ctx, turnID, rev, "ended the lease of a turn that never started here (its start failed after the lease was written)")
	default:
		return o.claim(ctx, turnID, rev)
	}
}

// hasEvents reports whether the turn stream holds any event of turnID.
func (o *Owner) hasEvents(ctx context.Context, turnID string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, reapTimeout)
	defer cancel()
	_, ok, err := turnevents.LastEvent(ctx, o.js, turnID)
	if err != nil {
		return false, fmt.Errorf("ownership: %w", err)
	}
	return ok, nil
}

// endLeased removes turnID's lease at the revision judged (a runner that
// claimed the turn meanwhile changed it, and the removal fails), then,
// unless the turn's stream already ends, publishes the terminal error with
// the turn's end id, so its followers — who only watch the turn's events —
// stop, and the turns queued behind it in its session pass it over. It
// reports whether the lease is settled (ended, or changed since).
func (o *Owner) endLeased(ctx context.Context, turnID string, rev uint64, what string) bool {
	ctx, cancel := context.WithTimeout(ctx, reapTimeout)
	defer cancel()
	var req protocol.TurnRequest
	if o.cfg.OnEnded != nil {
		if e, err := o.leases.Get(ctx, turnID); err == nil && e.Revision() == rev {
			var l Lease
			if json.Unmarshal(e.Value(), &l) == nil && l.Request.TurnID == turnID {
				req = l.Request
			}
		}
	}
	if err := o.leases.Delete(ctx, turnID, jetstream.LastRevision(rev)); err != nil {
		if IsConflict(err) {
			return true
		}
		o.log.Warn("remove the lease of a turn nobody runs", "turn", turnID, "err", err)
		return false
	}
	if req.TurnID != "" {
		o.cfg.OnEnded(req)
	}
	if last, ok, err := turnevents.LastEvent(ctx, o.js, turnID); err == nil && ok && protocol.IsTerminal(last) {
		o.log.Info(what, "turn", turnID, "ended", true)
		return true
	}
	if _, err := o.js.PublishMsg(ctx, bus.OrphanedTurnEnd(turnID)); err != nil {
		// The lease is gone, so no runner sees the turn again: say so
		// loudly (its followers wait until they leave).
		o.log.Error("end a turn nobody runs", "turn", turnID, "err", err)
		return true
	}
	o.log.Warn(what, "turn", turnID)
	return true
}
