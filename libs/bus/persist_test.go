package bus_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/embednats"
	"github.com/waggle-os/core/libs/protocol"
)

// A file-backed turn stream opts out of the per-write fsync the state
// buckets pay (turn events are not the record), and a file stream from an
// older configuration is replaced rather than left failing updates.
func TestFileTurnStreamPersistsAsync(t *testing.T) {
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
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: protocol.StreamTurns, Subjects: []string{protocol.SubjTurnEventsAll},
		Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	for _, storage := range []string{"file", "memory", "file"} {
		st, err := bus.EnsureTurnStream(ctx, js, bus.TurnStreamConfig{Storage: storage})
		if err != nil {
			t.Fatalf("%s: %v", storage, err)
		}
		cfg := st.CachedInfo().Config
		want := jetstream.DefaultPersistMode
		if storage == "file" {
			want = jetstream.AsyncPersistMode
		}
		if cfg.PersistMode != want {
			t.Fatalf("%s stream persist mode %v, want %v", storage, cfg.PersistMode, want)
		}
	}
}
