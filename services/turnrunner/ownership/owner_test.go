package ownership

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/turnrunner/ownership/sessionqueue"
)

// Timing of the owners under test: a runner is stale after a few missed
// beats, so a takeover is seen in well under a second; the waits allow
// seconds for a busy machine.
const (
	testBeat  = 50 * time.Millisecond
	testStale = 300 * time.Millisecond
)

// fakeHost is the turn runner of an Owner under test: what it runs, which
// turns it lost, and slots for claimed turns.
type fakeHost struct {
	mu      sync.Mutex
	runs    map[string]*Ticket
	starts  map[string]bool // starts under way
	lost    []string
	slots   int
	refuse  bool // Resume fails (the turn runs here already)
	resumed chan *Ticket
}

func newHost(slots int) *fakeHost {
	return &fakeHost{runs: map[string]*Ticket{}, starts: map[string]bool{}, slots: slots, resumed: make(chan *Ticket, 16)}
}

func (h *fakeHost) Runs(turnID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.runs[turnID] != nil || h.starts[turnID]
}

// starting marks a start of turnID under way (true) or over (false).
func (h *fakeHost) starting(turnID string, on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.starts[turnID] = on
}

func (h *fakeHost) Lost(turnID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lost = append(h.lost, turnID)
}

func (h *fakeHost) lostTurns() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.lost)
}

func (h *fakeHost) Reserve() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.slots == 0 {
		return false
	}
	h.slots--
	return true
}

func (h *fakeHost) Unreserve() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.slots++
}

func (h *fakeHost) free() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.slots
}

func (h *fakeHost) Resume(t *Ticket) bool {
	h.mu.Lock()
	refuse := h.refuse
	if !refuse {
		h.runs[t.Request().TurnID] = t
	}
	h.mu.Unlock()
	if !refuse {
		h.resumed <- t
	}
	return !refuse
}

// run marks a turn accepted by the host's runner as running there.
func (h *fakeHost) run(t *Ticket) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.runs[t.Request().TurnID] = t
}

// owner starts an Owner named runner on its own connection; stop ends it
// early (a runner's clean stop), and the test's end stops it otherwise.
func (e *env) owner(runner string, host *fakeHost, orphanAfter time.Duration) (o *Owner, stop func()) {
	e.t.Helper()
	return e.ownerWith(OwnerConfig{Runner: runner, OrphanAfter: orphanAfter, Heartbeat: testBeat, StaleAfter: testStale}, host)
}

// ownerWith is owner with a configuration of the test's own.
func (e *env) ownerWith(cfg OwnerConfig, host *fakeHost) (o *Owner, stop func()) {
	e.t.Helper()
	js, err := jetstream.New(e.srv.Conn(cfg.Runner))
	if err != nil {
		e.t.Fatal(err)
	}
	o = NewOwner(cfg, host)
	if err := o.Open(ctxT(e.t), js); err != nil {
		e.t.Fatal(err)
	}
	o.Start()
	var once sync.Once
	stop = func() { once.Do(o.Stop) }
	e.t.Cleanup(stop)
	return o, stop
}

func request(turnID string) protocol.TurnRequest {
	return protocol.TurnRequest{TurnID: turnID, Workspace: "ws", Session: "s1", Message: "hi"}
}

// awaitResumed is the next turn host resumed.
func awaitResumed(t *testing.T, host *fakeHost) *Ticket {
	t.Helper()
	select {
	case tk := <-host.resumed:
		return tk
	case <-time.After(20 * time.Second):
		t.Fatal("no turn was claimed")
		return nil
	}
}

// TestAcceptIsOnceAndLookedUp: a turn's lease is written once (a retried
// start is ErrLeased and changes nothing), it says which runner owns the
// turn, and it is gone once the turn drops it.
func TestAcceptIsOnceAndLookedUp(t *testing.T) {
	e := newEnv(t)
	o, _ := e.owner("r1", newHost(1), 0)
	ctx := ctxT(t)
	tk, err := o.Accept(ctx, request("t1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Accept(ctx, request("t1")); !errors.Is(err, ErrLeased) {
		t.Fatalf("a second accept of t1: %v, want ErrLeased", err)
	}
	l, ok, err := o.Lookup(ctx, "t1")
	if err != nil || !ok || l.Runner != "r1" || l.Incarnation != o.Incarnation() || l.Request.Session != "s1" {
		t.Fatalf("lease of t1: %+v %v %v", l, ok, err)
	}
	tk.Drop()
	if _, ok, err := o.Lookup(ctx, "t1"); ok || err != nil {
		t.Fatalf("lease of t1 after Drop: %v %v", ok, err)
	}
	if _, ok, err := o.Lookup(ctx, "nobody"); ok || err != nil {
		t.Fatalf("lease of an unknown turn: %v %v", ok, err)
	}
}

// TestReleasedTurnIsClaimedInItsPlace: a runner that shuts down releases
// its turn; another runner claims it at once (no staleness wait), with the
// request, the follow flag and the turn's place in its session's queue:
// the turn still holds the session and the one behind it still waits.
func TestReleasedTurnIsClaimedInItsPlace(t *testing.T) {
	e := newEnv(t)
	h1, h2 := newHost(1), newHost(1)
	o1, _ := e.owner("r1", h1, 0)
	ctx := ctxT(t)
	first, err := o1.Accept(ctx, request("first"))
	if err != nil {
		t.Fatal(err)
	}
	h1.run(first)
	if holder, err := first.Join(ctx, Behind); err != nil || holder != "" || !first.Holds() {
		t.Fatalf("first join: holder %q, %v, holds %v", holder, err, first.Holds())
	}
	second, err := o1.Accept(ctx, request("second"))
	if err != nil {
		t.Fatal(err)
	}
	h1.run(second)
	if holder, err := second.Join(ctx, Behind); err != nil || holder != "first" {
		t.Fatalf("second join: holder %q, %v", holder, err)
	}

	o2, _ := e.owner("r2", h2, 0)
	first.Release(true)
	tk := awaitResumed(t, h2)
	if tk.Request() != request("first") || !tk.Followed() {
		t.Fatalf("claimed %+v followed %v, want the first turn, followed", tk.Request(), tk.Followed())
	}
	if err := tk.Place(ctx); err != nil || !tk.Placed() || !tk.Holds() {
		t.Fatalf("the claimed turn's place: %v placed %v holds %v", err, tk.Placed(), tk.Holds())
	}
	l, ok, err := o2.Lookup(ctx, "first")
	if err != nil || !ok || l.Runner != "r2" || l.Claims != 1 || l.Released {
		t.Fatalf("lease after the claim: %+v %v %v", l, ok, err)
	}
	// The turn behind it is untouched and gets the session once the
	// claimed turn leaves.
	if got := h2.lostTurns(); len(got) != 0 {
		t.Fatalf("the claiming runner lost %v", got)
	}
	tk.Leave()
	if err := second.Wait(ctx); err != nil {
		t.Fatalf("the second turn waiting: %v", err)
	}
}

// TestCrashedRunnersTurnIsTakenAndItsRenewalStops: a runner that stops
// beating (it crashed, or hangs) loses its turns to a live runner once its
// entry is stale; if it comes back, its next renewal fails and it is told
// to stop the turn, and its drop leaves the new owner's lease alone.
func TestCrashedRunnersTurnIsTakenAndItsRenewalStops(t *testing.T) {
	e := newEnv(t)
	h1, h2 := newHost(1), newHost(1)
	o1, stop1 := e.owner("r1", h1, 0)
	ctx := ctxT(t)
	tk1, err := o1.Accept(ctx, request("t1"))
	if err != nil {
		t.Fatal(err)
	}
	h1.run(tk1)
	o2, _ := e.owner("r2", h2, 0)
	stop1() // no more beats from r1; its lease stays as it was
	tk2 := awaitResumed(t, h2)
	if tk2.Request().TurnID != "t1" {
		t.Fatalf("claimed %q", tk2.Request().TurnID)
	}
	// r1 wakes up and renews (followed changed, so it writes).
	tk1.Renew(ctx, true)
	if got := h1.lostTurns(); !slices.Equal(got, []string{"t1"}) {
		t.Fatalf("r1 lost %v, want [t1]", got)
	}
	tk1.Drop()
	if l, ok, err := o2.Lookup(ctx, "t1"); err != nil || !ok || l.Runner != "r2" {
		t.Fatalf("lease after the old owner's drop: %+v %v %v", l, ok, err)
	}
}

// TestClaimedLeaseIsSeenAsLost: a runner whose turn's lease another
// runner took (by compare-and-set, as a claim does) learns it from the
// watch, without writing anything.
func TestClaimedLeaseIsSeenAsLost(t *testing.T) {
	e := newEnv(t)
	h1 := newHost(1)
	o1, _ := e.owner("r1", h1, 0)
	ctx := ctxT(t)
	tk, err := o1.Accept(ctx, request("t1"))
	if err != nil {
		t.Fatal(err)
	}
	h1.run(tk)
	// Another runner takes the lease (a claim's write, done by hand).
	kv, err := o1.js.KeyValue(ctx, BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := kv.Get(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	taken, _ := json.Marshal(Lease{Request: request("t1"), Runner: "r9", Incarnation: "x", Claims: 1})
	if _, err := kv.Update(ctx, "t1", taken, cur.Revision()); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, "r1 told it lost t1", func() bool { return slices.Contains(h1.lostTurns(), "t1") })
	// Its drop must not delete the new owner's lease.
	tk.Drop()
	if _, err := kv.Get(ctx, "t1"); err != nil {
		t.Fatalf("the new owner's lease after the old owner's drop: %v", err)
	}
}

// TestRestartedRunnerTakesItsPredecessorsTurns: a runner restarted under
// the same id (a new incarnation) claims the turns of its dead
// predecessor at once, without waiting for staleness.
func TestRestartedRunnerTakesItsPredecessorsTurns(t *testing.T) {
	e := newEnv(t)
	o1, stop1 := e.owner("same", newHost(1), time.Hour)
	ctx := ctxT(t)
	if _, err := o1.Accept(ctx, request("t1")); err != nil {
		t.Fatal(err)
	}
	stop1()
	h2 := newHost(1)
	o2, _ := e.owner("same", h2, time.Hour)
	tk := awaitResumed(t, h2)
	l, ok, err := o2.Lookup(ctx, "t1")
	if tk.Request().TurnID != "t1" || err != nil || !ok || l.Incarnation != o2.Incarnation() || l.Incarnation == o1.Incarnation() {
		t.Fatalf("after the restart: %+v %v %v", l, ok, err)
	}
}

// TestFullRunnerEndsAnOrphanedTurn: a dead runner's turn that no live
// runner has room for is ended after OrphanAfter: its lease goes and its
// stream gets the orphan's terminal error, so followers stop and its
// session's queue passes it over. A runner that refuses the claimed turn
// gives the slot back and releases the lease.
func TestFullRunnerEndsAnOrphanedTurn(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	js, err := jetstream.New(e.srv.Conn("observer"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.EnsureTurnStream(ctx, js, bus.TurnStreamConfig{}); err != nil {
		t.Fatal(err)
	}
	o1, stop1 := e.owner("dead", newHost(1), time.Hour)
	if _, err := o1.Accept(ctx, request("orphan")); err != nil {
		t.Fatal(err)
	}
	stop1()
	full := newHost(0)
	o2, _ := e.owner("full", full, 200*time.Millisecond)
	waitfor.NoError(t, "the orphan's end stored", func() error {
		st, err := js.Stream(ctx, protocol.StreamTurns)
		if err != nil {
			return err
		}
		m, err := st.GetLastMsgForSubject(ctx, protocol.TurnEvents("orphan"))
		if err != nil {
			return err
		}
		if ev := m.Header.Get(protocol.HeaderEvent); ev != protocol.EventError {
			return fmt.Errorf("last event %q", ev)
		}
		return nil
	})
	if _, ok, err := o2.Lookup(ctx, "orphan"); ok || err != nil {
		t.Fatalf("the orphan's lease: %v %v", ok, err)
	}
	if full.free() != 0 {
		t.Fatalf("a full runner has %d slots after the orphan's end", full.free())
	}
}

// TestRefusedClaimIsReleased: a runner that wins a claim but cannot run
// the turn gives its slot back and releases the lease for another.
func TestRefusedClaimIsReleased(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	// r1 has no room: it never claims the turn it releases.
	o1, _ := e.owner("r1", newHost(0), time.Hour)
	tk, err := o1.Accept(ctx, request("t1"))
	if err != nil {
		t.Fatal(err)
	}
	refusing := newHost(1)
	refusing.refuse = true
	o2, stop2 := e.owner("r2", refusing, time.Hour)
	tk.Release(false)
	waitfor.NoError(t, "the refused claim released", func() error {
		l, ok, err := o2.Lookup(ctx, "t1")
		if err != nil || !ok || l.Claims < 1 || !l.Released || l.Runner != "" {
			return fmt.Errorf("lease %+v %v %v", l, ok, err)
		}
		return nil
	})
	stop2()
	if refusing.free() != 1 {
		t.Fatalf("the refusing runner has %d free slots, want 1", refusing.free())
	}
	h3 := newHost(1)
	e.owner("r3", h3, time.Hour)
	if tk := awaitResumed(t, h3); tk.Request().TurnID != "t1" {
		t.Fatalf("claimed %q", tk.Request().TurnID)
	}
}

// TestLeasesAndQueuesAreFsynced: on one node, the runners' heartbeats are
// a file stream without an fsync per write (a lost heartbeat is rewritten
// a second later), while the leases and the session queues are fsynced:
// after a crash of NATS itself they are the record of which accepted turns
// to run again and in which order (the recovery rule in
// docs/architecture.md; an asynchronous queue lost the last join and ran
// its turn out of order in e2e/distributed TestSessionFIFOAcrossFullRestart).
func TestLeasesAndQueuesAreFsynced(t *testing.T) {
	e := newEnv(t)
	o, _ := e.owner("r1", newHost(1), 0)
	ctx := ctxT(t)
	for name, want := range map[string]jetstream.PersistModeType{
		"KV_" + BucketLeases:    jetstream.DefaultPersistMode,
		"KV_" + BucketRunners:   jetstream.AsyncPersistMode,
		sessionqueue.StreamName: jetstream.DefaultPersistMode,
	} {
		st, err := o.js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if cfg := st.CachedInfo().Config; cfg.Storage != jetstream.FileStorage || cfg.PersistMode != want {
			t.Errorf("%s: storage %v, persist mode %v; want file storage, persist mode %v", name, cfg.Storage, cfg.PersistMode, want)
		}
	}
}

// TestLeaseLostByTheBusIsPutBack: leases are acknowledged before they
// reach the disk, so a NATS server that restarts can come back without
// the lease of a turn that still runs on a live runner (written in its
// last flush window). The runner puts it back after its reconnect: the
// turn is known again (a follower asking about it is not told 404), it
// names its runner, and no other runner claims or passes it over as dead.
func TestLeaseLostByTheBusIsPutBack(t *testing.T) {
	e := newEnv(t)
	h := newHost(1)
	o, _ := e.owner("r1", h, 0)
	ctx := ctxT(t)
	tk, err := o.Accept(ctx, request("t1"))
	if err != nil {
		t.Fatal(err)
	}
	h.run(tk)
	if holder, err := tk.Join(ctx, Behind); err != nil || holder != "" {
		t.Fatalf("join: holder %q, %v", holder, err)
	}
	// What the restarted server lost: the lease (purged from a
	// connection of the test's own), and the runner's connection.
	js, err := jetstream.New(e.srv.Conn("test"))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	if alive, err := o.holderAlive(ctx, "t1"); alive || err != nil {
		t.Fatalf("before the reconnect the lease should be gone: alive %v, %v", alive, err)
	}
	if err := o.js.Conn().ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	waitfor.NoError(t, "the lost lease put back", func() error {
		l, ok, err := o.Lookup(ctx, "t1")
		switch {
		case err != nil:
			return err
		case !ok:
			return errors.New("t1 has no lease")
		case l.Runner != "r1" || l.Incarnation != o.Incarnation() || l.Request.Session != "s1":
			t.Fatalf("the lease put back: %+v", l)
		}
		return nil
	})
	if alive, err := o.holderAlive(ctx, "t1"); !alive || err != nil {
		t.Fatalf("the session's holder after the lease was put back: alive %v, %v", alive, err)
	}
	// The ticket holds the new revision: the turn's end removes the lease.
	tk.Leave()
	tk.Drop()
	if _, ok, err := o.Lookup(ctx, "t1"); ok || err != nil {
		t.Fatalf("lease of t1 after Drop: %v %v", ok, err)
	}
	if lost := h.lostTurns(); len(lost) != 0 {
		t.Fatalf("the runner stopped turns it still owns: %v", lost)
	}
}

// TestDropAfterALandedRenewal: a renewal whose write landed but whose
// answer the turn never got (lost, or cut short by the turn's end) leaves
// the ticket a revision behind. The turn's Drop still removes its lease —
// it is this runner's — instead of leaving it behind for the claim loop
// to take back and end.
func TestDropAfterALandedRenewal(t *testing.T) {
	e := newEnv(t)
	o, _ := e.owner("r1", newHost(0), 0)
	ctx := ctxT(t)
	tk, err := o.Accept(ctx, request("t1"))
	if err != nil {
		t.Fatal(err)
	}
	// The renewal that landed: the same lease, followed, one revision on.
	e0, err := o.leases.Get(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	var l Lease
	if err := json.Unmarshal(e0.Value(), &l); err != nil {
		t.Fatal(err)
	}
	l.Followed = true
	body, _ := json.Marshal(l)
	if _, err := o.leases.Update(ctx, "t1", body, e0.Revision()); err != nil {
		t.Fatal(err)
	}
	tk.Drop()
	if l, ok, err := o.Lookup(ctx, "t1"); ok || err != nil {
		t.Fatalf("lease of t1 after Drop: %+v %v %v", l, ok, err)
	}
}

// TestPeersCountsLiveRunners: a lone runner knows it is alone (so it asks
// nobody for room for a sub-agent), sees a second runner come, and counts
// it out once its heartbeat stops.
func TestPeersCountsLiveRunners(t *testing.T) {
	e := newEnv(t)
	o1, _ := e.owner("r1", newHost(1), 0)
	waitfor.Within(10*time.Second).Every(10*time.Millisecond).True(t, "r1 alone", func() bool { return o1.Peers() == 0 })
	_, stop2 := e.owner("r2", newHost(1), 0)
	waitfor.Within(10*time.Second).Every(10*time.Millisecond).True(t, "r1 sees r2", func() bool { return o1.Peers() == 1 })
	stop2()
	waitfor.Within(10*time.Second).Every(10*time.Millisecond).True(t, "r2 gone from r1's count", func() bool { return o1.Peers() == 0 })
}
