package ownership

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/ownership/sessionqueue"
)

// TestRecoverPutsBackWhatNATSLost is the recovery rule of an Async owner:
// three turns accepted into one session (the first holds it), then a crash
// that loses NATS's last writes — the leases and joins of the second and
// third turn — and a restart. The runner, before it takes any turn, puts
// back from the store's record the lost leases (released: claimed at once)
// and places (in their order); a turn sent after the restart queues behind
// all three, and the session runs first, second, third, late.
func TestRecoverPutsBackWhatNATSLost(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	cfg := OwnerConfig{Runner: "desk", OrphanAfter: time.Hour, Heartbeat: testBeat, StaleAfter: testStale, Async: true}
	o1, stop1 := e.ownerWith(cfg, newHost(4))
	var record []protocol.AcceptedTurn
	for _, id := range []string{"first", "second", "third"} {
		tk, err := o1.Accept(ctx, request(id))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tk.Join(ctx, Behind); err != nil {
			t.Fatal(err)
		}
		record = append(record, tk.Record())
	}
	if record[0].Place == 0 || !(record[0].Place < record[1].Place && record[1].Place < record[2].Place) || record[0].Accepted == 0 {
		t.Fatalf("records: %+v", record)
	}
	stop1() // the process dies (its leases stay: nothing releases them)

	// What the crash lost: the last two turns' leases and joins.
	js, err := jetstream.New(e.srv.Conn("crash"))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := js.Stream(ctx, sessionqueue.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range record[1:] {
		if err := kv.Purge(ctx, at.Request.TurnID); err != nil {
			t.Fatal(err)
		}
		if err := qs.DeleteMsg(ctx, at.Place); err != nil {
			t.Fatal(err)
		}
	}

	// The restart: recover, then take turns.
	h2 := newHost(4)
	js2, err := jetstream.New(e.srv.Conn("desk-2"))
	if err != nil {
		t.Fatal(err)
	}
	o2 := NewOwner(cfg, h2)
	if err := o2.Open(ctx, js2); err != nil {
		t.Fatal(err)
	}
	rev := slices.Clone(record)
	slices.Reverse(rev) // the store's order does not matter: Place does
	leases, places, err := o2.Recover(ctx, rev)
	if err != nil || leases != 2 || places != 2 {
		t.Fatalf("Recover: %d leases, %d places, %v; want 2 and 2", leases, places, err)
	}
	// A second Recover (a restart before any turn ran) puts back nothing.
	if leases, places, err := o2.Recover(ctx, record); err != nil || leases != 0 || places != 0 {
		t.Fatalf("Recover again: %d leases, %d places, %v", leases, places, err)
	}
	o2.Start()
	var once sync.Once
	t.Cleanup(func() { once.Do(o2.Stop) })

	late, err := o2.Accept(ctx, request("late"))
	if err != nil {
		t.Fatal(err)
	}
	if holder, err := late.Join(ctx, Behind); err != nil || holder == "" {
		t.Fatalf("the late turn's join: holder %q, %v", holder, err)
	}
	claimed := map[string]*Ticket{}
	for range 3 {
		tk := awaitResumed(t, h2)
		claimed[tk.Request().TurnID] = tk
	}
	var order []string
	for _, id := range []string{"first", "second", "third"} {
		tk := claimed[id]
		if tk == nil {
			t.Fatalf("claimed %v, want first, second and third", claimed)
		}
		if err := tk.Place(ctx); err != nil || !tk.Placed() {
			t.Fatalf("%s's place after the restart: %v", id, err)
		}
	}
	// Run the session: each turn, once it holds it, notes it and leaves
	// it to the next.
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for id, tk := range map[string]*Ticket{"first": claimed["first"], "second": claimed["second"], "third": claimed["third"], "late": late} {
		wg.Go(func() {
			if err := tk.Wait(ctx); err != nil {
				errs <- err
				return
			}
			mu.Lock()
			order = append(order, id)
			mu.Unlock()
			tk.Leave()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("waiting for the session: %v", err)
	}
	if want := []string{"first", "second", "third", "late"}; !slices.Equal(order, want) {
		t.Fatalf("the session ran %v, want %v", order, want)
	}
}

// TestAsyncOwnerWritesWithoutFsync: an Async owner's leases and session
// queues are acknowledged from NATS's memory (persist_mode: async), the
// point of it; a default owner's are fsynced (the turn leases and the
// queues are then the only record of an accepted turn).
func TestAsyncOwnerWritesWithoutFsync(t *testing.T) {
	for _, async := range []bool{false, true} {
		e := newEnv(t)
		ctx := ctxT(t)
		e.ownerWith(OwnerConfig{Runner: "r", Heartbeat: testBeat, StaleAfter: testStale, Async: async}, newHost(1))
		js, err := jetstream.New(e.srv.Conn("look"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"KV_" + BucketLeases, sessionqueue.StreamName} {
			st, err := js.Stream(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.CachedInfo().Config.PersistMode == jetstream.AsyncPersistMode; got != async {
				t.Errorf("Async %v: stream %s asynchronous %v", async, name, got)
			}
		}
	}
}

// TestOlderFsyncedStreamsAreMadeAsyncWhenIdle: a data dir whose leases and
// session queues an older version made with an fsync per write gets them
// made again without one at a start with no lease; with a turn open (a
// lease) they are kept as they are, and the turn keeps its lease and place.
func TestOlderFsyncedStreamsAreMadeAsyncWhenIdle(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	older, stopOlder := e.ownerWith(OwnerConfig{Runner: "older", Heartbeat: testBeat, StaleAfter: testStale}, newHost(1))
	open, err := older.Accept(ctx, request("open"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := open.Join(ctx, Behind); err != nil {
		t.Fatal(err)
	}
	stopOlder()
	js, err := jetstream.New(e.srv.Conn("look"))
	if err != nil {
		t.Fatal(err)
	}
	async := func() map[string]bool {
		got := map[string]bool{}
		for _, name := range []string{"KV_" + BucketLeases, sessionqueue.StreamName} {
			st, err := js.Stream(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			got[name] = st.CachedInfo().Config.PersistMode == jetstream.AsyncPersistMode
		}
		return got
	}
	cfg := OwnerConfig{Runner: "older", Heartbeat: testBeat, StaleAfter: testStale, OrphanAfter: time.Hour, Async: true}
	h := newHost(1)
	o, stop := e.ownerWith(cfg, h)
	for name, a := range async() {
		if a {
			t.Fatalf("%s was made again while a turn was open", name)
		}
	}
	tk := awaitResumed(t, h)
	if err := tk.Place(ctx); err != nil || !tk.Holds() {
		t.Fatalf("the open turn after the upgrade: %v, holds %v", err, tk.Holds())
	}
	tk.Leave()
	tk.Drop()
	if _, ok, err := o.Lookup(ctx, "open"); ok || err != nil {
		t.Fatalf("lease after Drop: %v %v", ok, err)
	}
	stop()
	e.ownerWith(cfg, newHost(1))
	for name, a := range async() {
		if !a {
			t.Fatalf("%s kept its fsync per write at a start with no turn open", name)
		}
	}
}

// getFails is a lease bucket whose reads fail (a loaded bus).
type getFails struct{ jetstream.KeyValue }

func (getFails) Get(context.Context, string) (jetstream.KeyValueEntry, error) {
	return nil, errors.New("nats: timeout")
}

// TestRenewalKeepsTheTurnWhenItsReadFails: a renewal that conflicts with a
// write of this runner's own (landed, its answer lost) reads the lease to
// tell; when that read fails, the turn is kept and asked about again at
// the next renewal — a runner under load stopped its own turns ("turn
// lease taken by another runner") on a read it did not get.
func TestRenewalKeepsTheTurnWhenItsReadFails(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	h := newHost(1)
	js, err := jetstream.New(e.srv.Conn("r1"))
	if err != nil {
		t.Fatal(err)
	}
	o := NewOwner(OwnerConfig{Runner: "r1", Heartbeat: testBeat, StaleAfter: testStale}, h)
	if err := o.Open(ctx, js); err != nil {
		t.Fatal(err)
	}
	defer o.Stop()
	tk, err := o.Accept(ctx, request("t1"))
	if err != nil {
		t.Fatal(err)
	}
	h.run(tk)
	ent, err := o.leases.Get(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.leases.Put(ctx, "t1", ent.Value()); err != nil { // our own write, its answer lost
		t.Fatal(err)
	}
	bucket := o.leases
	o.leases = getFails{bucket}
	tk.Renew(ctx, true)
	if lost := h.lostTurns(); len(lost) != 0 {
		t.Fatalf("a renewal whose read failed stopped %v", lost)
	}
	o.leases = bucket
	tk.Renew(ctx, true)
	if lost := h.lostTurns(); len(lost) != 0 {
		t.Fatalf("a renewal of this runner's own lease stopped %v", lost)
	}
	tk.Drop()
	if _, ok, err := o.Lookup(ctx, "t1"); ok || err != nil {
		t.Fatalf("the lease after Drop: %v %v (the renewal did not take the lease's revision)", ok, err)
	}
}
