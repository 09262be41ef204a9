package ownership

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestEnsureBucketWithoutFsync: a coordination bucket is made with the
// asynchronous persist mode and behaves as a bucket (create conflicts,
// compare-and-set, delete at a revision, watch); made twice, it is the
// same bucket with its entries.
func TestEnsureBucketWithoutFsync(t *testing.T) {
	e := newEnv(t)
	js, err := jetstream.New(e.srv.Conn("runner"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	cfg := jetstream.KeyValueConfig{Bucket: "leases_test", History: 1, TTL: time.Hour, Storage: jetstream.FileStorage}
	kv, err := EnsureBucket(ctx, js, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "KV_leases_test")
	if err != nil {
		t.Fatal(err)
	}
	if pm := st.CachedInfo().Config.PersistMode; pm != jetstream.AsyncPersistMode {
		t.Fatalf("persist mode %v, want async", pm)
	}
	rev, err := kv.Create(ctx, "t1", []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "t1", []byte("b")); !errors.Is(err, jetstream.ErrKeyExists) {
		t.Fatalf("a second create of t1: %v, want ErrKeyExists", err)
	}
	w, err := kv.Watch(ctx, "t1", jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	rev2, err := kv.Update(ctx, "t1", []byte("c"), rev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Update(ctx, "t1", []byte("d"), rev); err == nil {
		t.Fatal("an update at a stale revision succeeded")
	}
	select {
	case up := <-w.Updates():
		if up == nil || string(up.Value()) != "c" {
			t.Fatalf("watch saw %v", up)
		}
	case <-ctx.Done():
		t.Fatal("the watch saw no update")
	}
	again, err := EnsureBucket(ctx, js, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := again.Get(ctx, "t1"); err != nil || string(got.Value()) != "c" {
		t.Fatalf("after ensuring again: %v %v", got, err)
	}
	if err := again.Delete(ctx, "t1", jetstream.LastRevision(rev2)); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "t1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

// TestEnsureBucketKeepsAnOlderBucket: a bucket an older version made with
// an fsync per write is kept with its entries (its persist mode cannot
// change in place), not replaced.
func TestEnsureBucketKeepsAnOlderBucket(t *testing.T) {
	e := newEnv(t)
	js, err := jetstream.New(e.srv.Conn("runner"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	cfg := jetstream.KeyValueConfig{Bucket: "old_leases", History: 1, TTL: time.Hour, Storage: jetstream.FileStorage}
	old, err := js.CreateKeyValue(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Put(ctx, "t1", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	kv, err := EnsureBucket(context.Background(), js, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := kv.Get(ctx, "t1"); err != nil || string(got.Value()) != "kept" {
		t.Fatalf("the older bucket's entry: %v %v", got, err)
	}
}
