package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/embednats"
)

// A coordination bucket is a working KV bucket whose stream skips the
// per-write fsync; ensuring it again binds the same bucket.
func TestCoordinationBucket(t *testing.T) {
	ctx := context.Background()
	s := embednats.New(embednats.Config{StoreDir: t.TempDir()})
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	nc, err := nats.Connect("", s.ConnectOption())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	cfg := jetstream.KeyValueConfig{Bucket: "coord", History: 1, TTL: time.Minute, Storage: jetstream.FileStorage}
	kv, err := bus.EnsureCoordinationKeyValue(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := kv.Create(ctx, "k", []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "k", []byte("b")); err == nil {
		t.Fatal("Create of an existing key succeeded")
	}
	if _, err := kv.Update(ctx, "k", []byte("c"), rev); err != nil {
		t.Fatal(err)
	}
	again, err := bus.EnsureCoordinationKeyValue(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := again.Get(ctx, "k"); err != nil || string(e.Value()) != "c" {
		t.Fatalf("rebound bucket: %v %v", e, err)
	}
	st, err := js.Stream(ctx, "KV_coord")
	if err != nil {
		t.Fatal(err)
	}
	if c := st.CachedInfo().Config; c.PersistMode != jetstream.AsyncPersistMode || c.MaxAge != time.Minute || c.MaxMsgsPerSubject != 1 {
		t.Fatalf("stream config %+v", c)
	}
	// Its status reads like any bucket's (the KV view of the stream).
	if status, err := again.Status(ctx); err != nil || status.Bucket() != "coord" || status.TTL() != time.Minute {
		t.Fatalf("status %v %v", status, err)
	}
}
