package turnrunner

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
	"github.com/waggle-os/core/services/turnrunner/ownership"
)

// Leases: every turn this runner accepts or claims has an entry in
// ownership.BucketLeases naming this runner and its incarnation. The
// runner keeps all of them alive with one write per ownership.Heartbeat
// to its own entry in ownership.BucketRunners (heartbeatLoop); a lease is
// written again only when it changes (claimed, released, followed) and,
// long before the bucket's MaxAge, to stay in it. Every runner watches both
// buckets (claimLoop) and claims, with a compare-and-set on the lease's
// revision, a lease that was released, whose runner's entry has not
// changed for ownership.StaleAfter on its own clock (the runner is
// gone), or that names an earlier incarnation of its runner (it
// restarted). A runner that sees one of its own turns' leases claimed by
// another stops that turn.

// leaseRefresh is how old a lease may get before its runner writes it
// again, to stay well inside the bucket's MaxAge.
const leaseRefresh = ownership.LeaseMaxAge / 4

// errLeaseLost cancels a turn whose lease another runner (or a gateway's
// orphan watchdog) took: this runner must not touch the turn any more.
var errLeaseLost = errors.New("turn lease lost")

// errHandover cancels a turn this runner gives to another on shutdown.
var errHandover = errors.New("turn handed over")

// ensureBuckets creates the lease and runner buckets and the session
// queues (or checks them).
func (s *Service) ensureBuckets(ctx context.Context) error {
	replicas := max(s.cfg.Stream.Replicas, 1)
	// The leases are fsynced: after a crash of NATS itself they are what
	// says which accepted turns to run again (the recovery rule in
	// docs/architecture.md); until the session store can say it instead,
	// a lease acknowledged and lost in NATS's flush window would lose its
	// turn. The heartbeats are not: each is rewritten a second later.
	leases, err := bus.EnsureKeyValue(ctx, s.js, jetstream.KeyValueConfig{
		Bucket:      ownership.BucketLeases,
		Description: "One lease per running turn: the request, its runner, renewed every second",
		History:     1,
		TTL:         ownership.LeaseMaxAge,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	})
	if err != nil {
		return fmt.Errorf("turnrunner: bucket %s: %w", ownership.BucketLeases, err)
	}
	queue, err := ownership.Open(ctx, s.js, ownership.Config{
		Replicas: replicas,
		Alive:    s.holderAlive,
		Poll:     ownership.Heartbeat,
		Logger:   s.log,
	})
	if err != nil {
		return fmt.Errorf("turnrunner: %w", err)
	}
	runners, err := ownership.EnsureBucket(ctx, s.js, jetstream.KeyValueConfig{
		Bucket:      ownership.BucketRunners,
		Description: "One entry per live turn runner, rewritten every second: it keeps the runner's leases alive",
		History:     1,
		TTL:         ownership.RunnerMaxAge,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	}, s.log)
	if err != nil {
		return fmt.Errorf("turnrunner: bucket %s: %w", ownership.BucketRunners, err)
	}
	s.leases, s.queue, s.runners = leases, queue, runners
	return nil
}

// beat rewrites this runner's entry in ownership.BucketRunners.
func (s *Service) beat(ctx context.Context, turns int) {
	body, _ := json.Marshal(ownership.RunnerBeat{Incarnation: s.incarnation, Heartbeat: time.Now().UnixMilli(), Turns: turns})
	if _, err := s.runners.Put(ctx, s.id, body); err != nil && ctx.Err() == nil {
		s.log.Warn("runner heartbeat", "err", err)
	}
}

// isConflict reports a failed compare-and-set (someone else wrote first).
func isConflict(err error) bool {
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

func kvCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Second)
}

// createLease records a newly accepted turn. A turn id already leased is a
// conflict (a retried start request): the caller answers 409.
func (t *turn) createLease() error {
	now := time.Now().UnixMilli()
	t.lease = ownership.Lease{Request: t.req, Runner: t.svc.id, Incarnation: t.svc.incarnation, Accepted: now, Heartbeat: now}
	body, _ := json.Marshal(t.lease)
	ctx, cancel := kvCtx()
	defer cancel()
	rev, err := t.svc.leases.Create(ctx, t.req.TurnID, body)
	if err != nil {
		return fmt.Errorf("turnrunner: lease %s: %w", t.req.TurnID, err)
	}
	t.leaseMu.Lock()
	t.leaseRev = rev
	t.leaseMu.Unlock()
	return nil
}

// renew writes the lease again when it changed (the turn was followed) or
// is getting old. A lost compare-and-set means another runner owns the
// turn now: the turn stops without another word.
func (t *turn) renew(ctx context.Context) {
	t.leaseOp.Lock()
	defer t.leaseOp.Unlock()
	t.leaseMu.Lock()
	rev, lease := t.leaseRev, t.lease
	t.leaseMu.Unlock()
	if rev == 0 {
		return
	}
	if lease.Followed == t.presence.wasFollowed() && time.Since(time.UnixMilli(lease.Heartbeat)) < leaseRefresh {
		return
	}
	lease.Heartbeat = time.Now().UnixMilli()
	lease.Followed = t.presence.wasFollowed()
	body, _ := json.Marshal(lease)
	newRev, err := t.svc.leases.Update(ctx, t.req.TurnID, body, rev)
	switch {
	case err == nil:
		t.leaseMu.Lock()
		t.leaseRev, t.lease = newRev, lease
		t.leaseMu.Unlock()
	case isConflict(err):
		if rev, ok := t.svc.stillMine(ctx, t.req.TurnID); ok {
			// An earlier write of ours landed and its answer was lost (a
			// cluster electing a leader): the lease is still this turn's.
			t.leaseMu.Lock()
			t.leaseRev, t.lease = rev, lease
			t.leaseMu.Unlock()
			return
		}
		t.svc.log.Warn("turn lease taken by another runner; stopping here", "turn", t.req.TurnID)
		t.leaseMu.Lock()
		t.leaseRev = 0
		t.leaseMu.Unlock()
		t.cancel(errLeaseLost)
	default:
		// NATS hiccup: try again on the next beat. If it lasts, another
		// runner claims the turn and the next renewal finds out.
		t.svc.log.Warn("renew turn lease", "turn", t.req.TurnID, "err", err)
	}
}

// stillMine reads turnID's lease and reports its revision when it names
// this runner as it is now (its own write, whose answer was lost).
func (s *Service) stillMine(ctx context.Context, turnID string) (uint64, bool) {
	e, err := s.leases.Get(ctx, turnID)
	if err != nil {
		return 0, false
	}
	var l ownership.Lease
	if json.Unmarshal(e.Value(), &l) != nil || l.Runner != s.id || l.Incarnation != s.incarnation {
		return 0, false
	}
	return e.Revision(), true
}

// dropLease deletes the lease of a finished turn (its terminal event is
// stored). A conflict means the lease is someone else's now: left alone.
func (t *turn) dropLease() {
	t.leaseOp.Lock()
	defer t.leaseOp.Unlock()
	t.leaseMu.Lock()
	rev := t.leaseRev
	t.leaseRev = 0
	t.leaseMu.Unlock()
	if rev == 0 {
		return
	}
	ctx, cancel := kvCtx()
	defer cancel()
	if err := t.svc.leases.Delete(ctx, t.req.TurnID, jetstream.LastRevision(rev)); err != nil && !isConflict(err) {
		t.svc.log.Warn("delete turn lease", "turn", t.req.TurnID, "err", err)
	}
}

// releaseLease hands the turn to whichever runner claims it first.
func (t *turn) releaseLease() {
	t.leaseOp.Lock()
	defer t.leaseOp.Unlock()
	t.leaseMu.Lock()
	rev, lease := t.leaseRev, t.lease
	t.leaseRev = 0
	t.leaseMu.Unlock()
	if rev == 0 {
		return
	}
	lease.Runner, lease.Released = "", true
	lease.Heartbeat = time.Now().UnixMilli()
	lease.Followed = t.presence.wasFollowed()
	body, _ := json.Marshal(lease)
	ctx, cancel := kvCtx()
	defer cancel()
	if _, err := t.svc.leases.Update(ctx, t.req.TurnID, body, rev); err != nil {
		t.svc.log.Warn("release turn lease", "turn", t.req.TurnID, "err", err)
	}
}

// beatLoop writes this runner's entry (which keeps every lease of it
// alive) once per ownership.Heartbeat, on its own so that nothing else
// a runner does can delay it. A write may take up to LeaseStaleAfter on a
// loaded bus before it counts as failed.
func (s *Service) beatLoop(ctx context.Context) {
	tick := time.NewTicker(ownership.Heartbeat)
	defer tick.Stop()
	for {
		bctx, cancel := context.WithTimeout(ctx, ownership.StaleAfter)
		s.beat(bctx, s.count())
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// count is how many turns run here.
func (s *Service) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.turns)
}

// heartbeatLoop writes the leases that changed and runs the presence check
// of every turn, once per ownership.Heartbeat.
func (s *Service) heartbeatLoop(ctx context.Context) {
	tick := time.NewTicker(ownership.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			for _, t := range s.running() {
				rctx, cancel := context.WithTimeout(ctx, ownership.Heartbeat)
				t.renew(rctx)
				cancel()
				t.presence.tick(now)
			}
		}
	}
}

// running lists the turns this runner runs.
func (s *Service) running() []*turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*turn, 0, len(s.turns))
	for _, t := range s.turns {
		out = append(out, t)
	}
	return out
}

// owns reports whether turnID runs on this runner.
func (s *Service) owns(turnID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.turns[turnID]
	return ok
}

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
func (s *Service) claimLoop(ctx context.Context) {
	for ctx.Err() == nil {
		if err := s.watchLeases(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("watch turn leases", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

func (s *Service) watchLeases(ctx context.Context) error {
	lw, err := s.leases.WatchAll(ctx)
	if err != nil {
		return err
	}
	defer lw.Stop()
	rw, err := s.runners.WatchAll(ctx)
	if err != nil {
		return err
	}
	defer rw.Stop()
	seen := map[string]*seenLease{}
	runners := map[string]*seenRunner{}
	var blind time.Time // the last tick this runner was cut off from the bus
	started := time.Now()
	tick := time.NewTicker(ownership.Heartbeat / 4)
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
			var b ownership.RunnerBeat
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
			var l ownership.Lease
			if json.Unmarshal(e.Value(), &l) != nil {
				delete(seen, e.Key())
				continue
			}
			// Skipped by what runs here, not by the runner name: a runner
			// restarted under the same RunnerID must take its old turns.
			if s.owns(e.Key()) {
				delete(seen, e.Key())
				if l.Runner != s.id || l.Incarnation != s.incarnation {
					s.lostLease(e.Key())
				}
				continue
			}
			seen[e.Key()] = &seenLease{rev: e.Revision(), since: time.Now(), runner: l.Runner, incarnation: l.Incarnation,
				released: l.Released, jitter: time.Duration(rand.Int64N(int64(ownership.Heartbeat / 2)))}
		case now := <-tick.C:
			if !s.nc.IsConnected() {
				// A runner that cannot see the bus sees no heartbeat: that
				// says nothing about the others. Staleness is counted again
				// from when it sees the bus.
				blind = now
				continue
			}
			// This runner's own heartbeat shows in the watch every second;
			// when it does not, the watch itself stopped (a NATS restart
			// can leave it so), and it says nothing about the others.
			me := runners[s.id]
			if (me == nil || me.incarnation == s.incarnation) && now.Sub(ownSeen(me, started)) > ownership.StaleAfter {
				return errors.New("runner watch stalled: this runner's own heartbeat is not seen")
			}
			// Nor does a heartbeat of its own that is merely late: while a
			// cluster elects the runners bucket's leader every runner's
			// writes fail at once, and the others' entries look stale a
			// moment before this one's does. Staleness counts from when
			// this runner sees its own heartbeat again.
			if me != nil && me.incarnation == s.incarnation && now.Sub(ownSeen(me, started)) > ownFresh {
				blind = now
			}
			for key, sl := range seen {
				if sl.runner == s.id && sl.incarnation == s.incarnation {
					// A lease of this very runner: its turn runs here by
					// now, its start is under way, or neither (see
					// endFailedStart).
					if s.owns(key) {
						delete(seen, key)
					} else if s.forgotten(key, sl, now) && s.takeBack(ctx, key, sl.rev) {
						delete(seen, key)
					}
					continue
				}
				if !s.leaseDue(sl, runners[sl.runner], blind, now) {
					continue
				}
				if s.claim(ctx, key, sl.rev) {
					delete(seen, key)
					continue
				}
				if sl.unclaimed.IsZero() || blind.After(sl.unclaimed) {
					sl.unclaimed = now
				}
				if now.Sub(sl.unclaimed) >= s.orphanAfter() && s.endOrphan(ctx, key, sl.rev) {
					delete(seen, key)
				}
			}
		}
	}
}

// leaseDue reports whether a lease seen as sl may be claimed at now: it
// was released, names an earlier incarnation of its runner, or its
// runner's entry (r, nil when there is none) has not changed for
// ownership.StaleAfter (for a runner without an entry: since the lease
// was seen) — and, either way, since this runner last was cut off from the
// bus (blind).
func (s *Service) leaseDue(sl *seenLease, r *seenRunner, blind, now time.Time) bool {
	since := func(t time.Time) time.Duration {
		if blind.After(t) {
			t = blind
		}
		return now.Sub(t)
	}
	switch {
	case sl.released:
		return now.Sub(sl.since) >= sl.jitter
	case sl.runner == s.id && sl.incarnation != s.incarnation:
		return true // this runner's own predecessor
	case r == nil:
		return since(sl.since) >= ownership.StaleAfter+sl.jitter
	case r.incarnation != sl.incarnation:
		return true // its runner restarted: the turn is nobody's
	default:
		return since(r.since) >= ownership.StaleAfter+sl.jitter
	}
}

// ownFresh is how old the last sight of this runner's own heartbeat may be
// for the watch to judge the others' (twice its interval: one late write
// is not yet a sign).
const ownFresh = 2 * ownership.Heartbeat

// orphanAfter is how long a due lease that no runner here can take waits
// before its turn is ended.
func (s *Service) orphanAfter() time.Duration {
	if s.cfg.orphanAfter > 0 {
		return s.cfg.orphanAfter
	}
	return ownership.OrphanAfter
}

// ownSeen is when this runner's own entry was last seen changing (the
// watch's start if never).
func ownSeen(me *seenRunner, started time.Time) time.Time {
	if me == nil || me.since.Before(started) {
		return started
	}
	return me.since
}

// lostLease stops a turn of this runner whose lease another runner took.
func (s *Service) lostLease(turnID string) {
	s.mu.Lock()
	t := s.turns[turnID]
	s.mu.Unlock()
	if t == nil {
		return
	}
	s.log.Warn("turn lease taken by another runner; stopping here", "turn", turnID)
	t.leaseMu.Lock()
	t.leaseRev = 0
	t.leaseMu.Unlock()
	t.cancel(errLeaseLost)
}

// claim takes over the turn of lease key at revision rev, if this runner
// has a free slot and wins the compare-and-set. It reports whether the
// lease is settled for this watcher (claimed, changed since, or not a
// turn); false means try again: no free slot, or the bus failed.
func (s *Service) claim(ctx context.Context, key string, rev uint64) bool {
	if s.stopping.Load() || s.owns(key) {
		return true
	}
	select {
	case s.slots <- struct{}{}:
	default:
		return false // busy: another runner may take it, or this one later
	}
	free := func() { <-s.slots }
	gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	e, err := s.leases.Get(gctx, key)
	if err != nil || e.Revision() != rev {
		free()
		// Gone or changed: settled (the watch reports what it is now).
		// Any other failure: the bus; try again.
		return err == nil || errors.Is(err, jetstream.ErrKeyNotFound)
	}
	var l ownership.Lease
	if err := json.Unmarshal(e.Value(), &l); err != nil || !protocol.ValidID(l.Request.TurnID) || l.Request.TurnID != key {
		free()
		return true
	}
	l.Runner, l.Incarnation, l.Released = s.id, s.incarnation, false
	l.Claims++
	l.Heartbeat = time.Now().UnixMilli()
	body, _ := json.Marshal(l)
	newRev, err := s.leases.Update(gctx, key, body, rev)
	if err != nil {
		free()
		if !isConflict(err) {
			s.log.Warn("claim turn lease", "turn", key, "err", err)
			return false
		}
		return true
	}
	s.log.Info("took over turn", "turn", key, "workspace", l.Request.Workspace, "session", l.Request.Session, "claims", l.Claims)
	t := s.newTurn(l.Request)
	t.resumed = true
	t.lease, t.leaseRev = l, newRev
	if l.Followed {
		// Its followers' attaches reach this runner within one interval;
		// until then a stand-in keeps the grace from starting.
		t.presence.attach("_claimed", time.Now())
	}
	if !s.launch(t, t.resume) {
		t.releaseLease()
		free()
	}
	return true
}
