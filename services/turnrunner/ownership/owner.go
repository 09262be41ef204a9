// Package ownership decides which runner owns a turn and which turn owns
// a session: the turns' leases and the runners' heartbeats, each turn's
// place in its session's queue (package sessionqueue), the claiming of
// turns whose runner is gone, and the ending of those no runner can take.
package ownership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/ownership/sessionqueue"
)

// Leases: every turn a runner accepts or claims has an entry in
// BucketLeases naming the runner and its incarnation. The runner keeps all
// of them alive with one write per Heartbeat to its own entry in
// BucketRunners (the Owner's beat loop); a lease is written again only
// when it changes (claimed, released, followed) and, long before the
// bucket's MaxAge, to stay in it (Ticket.Renew). Every runner watches both
// buckets (the claim loop, claim.go) and claims, with a compare-and-set on
// the lease's revision, a lease that was released, whose runner's entry
// has not changed for StaleAfter on its own clock (the runner is gone), or
// that names an earlier incarnation of its runner (it restarted). A runner
// that sees one of its own turns' leases claimed by another stops that
// turn (Host.Lost).

// leaseRefresh is how old a lease may get before its runner writes it
// again, to stay well inside the bucket's MaxAge.
const leaseRefresh = LeaseMaxAge / 4

// ErrLeased is returned by Owner.Accept for a turn id that already has a
// lease (a retried start of a turn that exists).
var ErrLeased = errors.New("ownership: the turn already has a lease")

// Host is the turn runner an Owner keeps turns for: ownership asks it
// what runs there, and hands it the turns it claims or loses.
type Host interface {
	// Runs reports whether turnID runs on this runner now or its start is
	// under way here (its lease may be written before the turn runs): a
	// lease of such a turn is never claimed by this runner, and one of its
	// own is settled (takeBack) only once the turn has not run or started
	// here for StaleAfter.
	Runs(turnID string) bool
	// Lost stops the turn turnID of this runner: another runner took its
	// lease. The turn must not touch its session or lease any more.
	Lost(turnID string)
	// Reserve takes a free slot for a turn about to be claimed; false
	// when the runner is full (another runner may take the turn).
	Reserve() bool
	// Unreserve gives back a slot Reserve took that no turn used.
	Unreserve()
	// Resume runs a claimed turn, which owns the reserved slot from then
	// on. False: it could not (the turn runs here already); the Owner
	// then releases the lease and gives the slot back.
	Resume(t *Ticket) bool
}

// OwnerConfig configures an Owner.
type OwnerConfig struct {
	// Runner is this runner's id in leases and in BucketRunners.
	Runner string
	// Replicas of the buckets and the queue stream (1 when 0).
	Replicas int
	// OrphanAfter is how long a lease that may be claimed and that no
	// runner here can take waits before its turn is ended (OrphanAfter
	// when 0).
	OrphanAfter time.Duration
	// Heartbeat and StaleAfter override the constants of the same names
	// (tests shorten them; 0: the constants).
	Heartbeat  time.Duration
	StaleAfter time.Duration
	// Logger gets warnings (slog.Default when nil).
	Logger *slog.Logger
	// Async keeps the leases and the session queues without an fsync per
	// write: for a single-node NATS embedded in this very process, whose
	// crash is this runner's crash too. What such a crash loses (NATS's
	// last flush window) is put back from the session store's record of
	// accepted turns by package recovery, before the runner takes a new
	// turn. Off, each write is fsynced (a NATS node other processes use,
	// which may crash while they live); replicated, both are the raft
	// log's.
	Async bool
	// OnEnded, when set, is told of a turn the claim loop ended because
	// no runner could take it (or because it never started): the turn
	// will not run.
	OnEnded func(req protocol.TurnRequest)
}

// Owner is one runner's part in the ownership of turns: its heartbeat, its
// turns' leases (each behind a Ticket), its handle on the session queues,
// and the claiming (or, when no runner can take them, the ending) of
// turns other runners left.
type Owner struct {
	cfg  OwnerConfig
	host Host
	log  *slog.Logger
	// incarnation tells this process's leases from those of an earlier
	// process with the same runner id.
	incarnation string

	js      jetstream.JetStream
	leases  jetstream.KeyValue
	runners jetstream.KeyValue
	queue   *sessionqueue.Queue

	mu      sync.Mutex
	tickets map[string]*Ticket // the leases this runner holds, by turn id

	stopping   atomic.Bool
	restoring  atomic.Bool  // restoreLeases runs
	peers      atomic.Int32 // see Peers
	loops      sync.WaitGroup
	stopLoops  context.CancelFunc
	stopClaims context.CancelFunc
}

// NewOwner returns an Owner that does nothing until Open and Start.
func NewOwner(cfg OwnerConfig, host Host) *Owner {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.OrphanAfter <= 0 {
		cfg.OrphanAfter = OrphanAfter
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = Heartbeat
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = StaleAfter
	}
	o := &Owner{cfg: cfg, host: host, log: cfg.Logger, incarnation: protocol.NewUUID()[:8], tickets: map[string]*Ticket{}}
	o.peers.Store(-1)
	return o
}

// Peers is how many other runners had a heartbeat within StaleAfter when
// the claim loop last looked (every quarter heartbeat), or -1 before its
// first look: a lone runner (the desktop) need not ask anyone for room.
func (o *Owner) Peers() int { return int(o.peers.Load()) }

// Incarnation is this process's incarnation in its leases.
func (o *Owner) Incarnation() string { return o.incarnation }

// Open creates (or checks) the lease and runner buckets and the session
// queues.
func (o *Owner) Open(ctx context.Context, js jetstream.JetStream) error {
	replicas := max(o.cfg.Replicas, 1)
	// The heartbeats cost no fsync per write: each is rewritten a second
	// later. The leases and the session queues are fsynced unless Async:
	// on a NATS node that may crash while the runners live, they are what
	// says which accepted turns to run again and in which order (the
	// recovery rule in docs/architecture.md; TestSessionFIFOAcrossFullRestart
	// lost the last accepted turn, then ran it out of order, when they
	// were not). With Async the session store says it (package recovery).
	// Replicated, all of them are the raft log's.
	runners, err := EnsureBucket(ctx, js, jetstream.KeyValueConfig{
		Bucket:      BucketRunners,
		Description: "One entry per live turn runner, rewritten every second: it keeps the runner's leases alive",
		History:     1,
		TTL:         RunnerMaxAge,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	}, o.log)
	if err != nil {
		return fmt.Errorf("ownership: bucket %s: %w", BucketRunners, err)
	}
	leaseCfg := jetstream.KeyValueConfig{
		Bucket:      BucketLeases,
		Description: "One lease per running turn: the request, its runner, renewed every second",
		History:     1,
		TTL:         LeaseMaxAge,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	}
	var leases jetstream.KeyValue
	if o.cfg.Async {
		if replicas == 1 {
			if err := dropFsyncedWhenIdle(ctx, js, o.log); err != nil {
				return err
			}
		}
		leases, err = EnsureBucket(ctx, js, leaseCfg, o.log)
	} else {
		leases, err = bus.EnsureKeyValue(ctx, js, leaseCfg)
	}
	if err != nil {
		return fmt.Errorf("ownership: bucket %s: %w", BucketLeases, err)
	}
	queue, err := sessionqueue.Open(ctx, js, sessionqueue.Config{
		Replicas: replicas,
		Alive:    o.holderAlive,
		Poll:     o.cfg.Heartbeat,
		Logger:   o.log,
		Async:    o.cfg.Async,
	})
	if err != nil {
		return err
	}
	o.js, o.leases, o.queue, o.runners = js, leases, queue, runners
	return nil
}

// Start starts the heartbeat and the claim loop; Stop ends them.
func (o *Owner) Start() {
	loopCtx, stopLoops := context.WithCancel(context.Background())
	claimCtx, stopClaims := context.WithCancel(loopCtx)
	o.stopLoops, o.stopClaims = stopLoops, stopClaims
	o.loops.Go(func() { o.beatLoop(loopCtx) })
	o.loops.Go(func() { o.claimLoop(claimCtx) })
}

// StopClaiming makes the runner claim no more turns (it is shutting
// down); its heartbeat goes on until Stop.
func (o *Owner) StopClaiming() {
	o.stopping.Store(true)
	if o.stopClaims != nil {
		o.stopClaims()
	}
}

// Stop ends the loops and closes the session queues. Call it once no
// turn of this runner waits for its session.
func (o *Owner) Stop() {
	o.StopClaiming()
	if o.stopLoops != nil {
		o.stopLoops()
		o.loops.Wait()
	}
	if o.queue != nil {
		o.queue.Close()
	}
}

// beat rewrites this runner's entry in BucketRunners.
func (o *Owner) beat(ctx context.Context) {
	body, _ := json.Marshal(RunnerBeat{Incarnation: o.incarnation, Heartbeat: time.Now().UnixMilli(), Turns: o.held()})
	if _, err := o.runners.Put(ctx, o.cfg.Runner, body); err != nil && ctx.Err() == nil {
		o.log.Warn("runner heartbeat", "err", err)
	}
}

// beatLoop writes this runner's entry (which keeps every lease of it
// alive) once per Heartbeat, on its own so that nothing else a runner
// does can delay it. A write may take up to StaleAfter on a loaded bus
// before it counts as failed.
//
// After every reconnect it also puts back the leases of this runner's
// turns that the bus no longer has (restoreLeases).
func (o *Owner) beatLoop(ctx context.Context) {
	tick := time.NewTicker(o.cfg.Heartbeat)
	defer tick.Stop()
	nc := o.js.Conn()
	reconnects := nc.Stats().Reconnects
	for {
		bctx, cancel := context.WithTimeout(ctx, o.cfg.StaleAfter)
		o.beat(bctx)
		cancel()
		if n := nc.Stats().Reconnects; n != reconnects && nc.IsConnected() && o.restoring.CompareAndSwap(false, true) {
			// On its own goroutine: one read per lease must not delay
			// the heartbeat that keeps them all alive.
			reconnects = n
			o.loops.Go(func() {
				defer o.restoring.Store(false)
				for ctx.Err() == nil && !o.restoreLeases(ctx) {
					select {
					case <-ctx.Done():
					case <-time.After(o.cfg.Heartbeat):
					}
				}
			})
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// restoreLeases puts back the lease of every turn this runner holds that
// the bus lost. A lease is acknowledged before it reaches the disk (the
// asynchronous persist mode), so a NATS server that restarted (crashed, or
// its machine lost power) can come back without the leases written in its
// last flush window, while the runners that hold them live on: without its
// lease a running turn would be unknown to its followers and passed over
// by the turns queued behind it. Only after a reconnect can that happen,
// so only then is each lease read. A lease another runner wrote since is
// left alone (the claim loop and Renew settle it). It reports whether
// every lease could be checked (false: the bus failed, try again).
func (o *Owner) restoreLeases(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, reapTimeout)
	defer cancel()
	o.mu.Lock()
	tickets := make([]*Ticket, 0, len(o.tickets))
	for _, t := range o.tickets {
		tickets = append(tickets, t)
	}
	o.mu.Unlock()
	ok := true
	for _, t := range tickets {
		if !t.restore(ctx) {
			ok = false
		}
	}
	return ok
}

// Coordination is the lease bucket and the session queues Open opened
// (nil before Open). It is exported for package recovery alone, which
// puts back into them what a crash of NATS lost before the runner takes
// a turn; everything else reaches them through Accept and a Ticket.
func (o *Owner) Coordination() (jetstream.KeyValue, *sessionqueue.Queue) {
	return o.leases, o.queue
}

// held is how many leases this runner holds.
func (o *Owner) held() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.tickets)
}

// Lookup reads turnID's lease: ok is false when the turn has none (or an
// unreadable one).
func (o *Owner) Lookup(ctx context.Context, turnID string) (l Lease, ok bool, err error) {
	e, err := o.leases.Get(ctx, turnID)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return l, false, nil
	case err != nil:
		return l, false, fmt.Errorf("ownership: lease of %s: %w", turnID, err)
	}
	if json.Unmarshal(e.Value(), &l) != nil || l.Request.TurnID != turnID {
		return Lease{}, false, nil
	}
	return l, true, nil
}

// stillMine reads turnID's lease and reports its revision when it names
// this runner as it is now (its own write, whose answer was lost).
func (o *Owner) stillMine(ctx context.Context, turnID string) (rev uint64, mine bool, err error) {
	e, err := o.leases.Get(ctx, turnID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("ownership: read lease %s: %w", turnID, err)
	}
	var l Lease
	if json.Unmarshal(e.Value(), &l) != nil || l.Runner != o.cfg.Runner || l.Incarnation != o.incarnation {
		return 0, false, nil
	}
	return e.Revision(), true, nil
}

// holderAlive reports whether turnID still has a lease (the queue's
// Alive).
func (o *Owner) holderAlive(ctx context.Context, turnID string) (bool, error) {
	if turnID == "" {
		return false, nil
	}
	_, err := o.leases.Get(ctx, turnID)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	return false, fmt.Errorf("ownership: read lease of %s: %w", turnID, err)
}

// IsConflict reports a failed compare-and-set (someone else wrote first).
// It is exported for package recovery, whose writes into the lease bucket
// meet the same conflicts.
func IsConflict(err error) bool {
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// cleanupCtx bounds a write that must happen even after the turn's own
// context ended (leaving the queue, dropping or releasing the lease): 5 s,
// or stoppingCleanup once the runner shuts down. A shutdown has a budget,
// and a store that drops writes (a full disk: nats-server latches the
// error and answers nothing) would otherwise take 5 s of it per write;
// what a cleanup could not write is recovered by the claim rules (a lease
// left behind is claimed and its turn ended from the session store, a
// holder without a lease is passed over).
func (o *Owner) cleanupCtx() (context.Context, context.CancelFunc) {
	if o.stopping.Load() {
		return context.WithTimeout(context.Background(), stoppingCleanup)
	}
	return context.WithTimeout(context.Background(), 5*time.Second)
}

// stoppingCleanup bounds a cleanup write during a shutdown (a write answers
// in milliseconds on a healthy bus).
const stoppingCleanup = 2 * time.Second
