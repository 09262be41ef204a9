package ownership

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/services/turnrunner/ownership/sessionqueue"
)

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
