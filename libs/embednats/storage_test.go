package embednats_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/embednats"
	"github.com/waggle-os/core/libs/tmpfstest"
)

// A JetStream store that fills up is reported full, and once space is
// freed JetStream comes back by itself with every acknowledged write.
func TestFullStoreRecoversWithoutRestart(t *testing.T) {
	dir := tmpfstest.Mount(t, "4m")
	var mu sync.Mutex
	var events []bool
	changed := make(chan struct{}, 8)
	s := embednats.New(embednats.Config{StoreDir: filepath.Join(dir, "nats"), OnStorage: func(full bool, _ string) {
		mu.Lock()
		events = append(events, full)
		mu.Unlock()
		changed <- struct{}{}
	}})
	ctx := context.Background()
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
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "state", Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "kept", []byte("acknowledged")); err != nil {
		t.Fatal(err)
	}

	fill := tmpfstest.Fill(t, dir)
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = kv.Put(pctx, "big", make([]byte, 256<<10))
	cancel()
	if err == nil {
		t.Fatal("a write to a full store was acknowledged")
	}
	waitFor(t, changed, 5*time.Second, "full report")
	if full, reason := s.StorageFull(); !full || reason == "" {
		t.Fatalf("StorageFull = %v %q, want full with a reason", full, reason)
	}

	freed := time.Now()
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	waitFor(t, changed, 10*time.Second, "recovery report")
	if took := time.Since(freed); took > 10*time.Second {
		t.Fatalf("recovered %s after space was freed, want within 10s", took)
	}
	if full, _ := s.StorageFull(); full {
		t.Fatal("still full after recovery")
	}
	mu.Lock()
	if len(events) != 2 || !events[0] || events[1] {
		t.Fatalf("storage events %v, want [true false]", events)
	}
	mu.Unlock()
	pctx, cancel = context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := kv.Put(pctx, "after", []byte("written")); err != nil {
		t.Fatalf("write after recovery: %v", err)
	}
	e, err := kv.Get(pctx, "kept")
	if err != nil || string(e.Value()) != "acknowledged" {
		t.Fatalf("acknowledged write after recovery: %v %v", e, err)
	}
}

func waitFor(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("no %s within %s", what, d)
	}
}
