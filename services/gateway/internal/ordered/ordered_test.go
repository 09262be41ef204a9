package ordered

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/waitfor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// collector records what a reader delivered.
type collector struct {
	mu  sync.Mutex
	got []string
}

func (c *collector) add(m jetstream.Msg) {
	c.mu.Lock()
	c.got = append(c.got, string(m.Data()))
	c.mu.Unlock()
}

func (c *collector) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

func setup(t *testing.T) (jetstream.JetStream, func(...string)) {
	t.Helper()
	js, err := jetstream.New(natstest.Start(t).Conn("ordered"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	publish := func(data ...string) {
		for _, d := range data {
			if _, err := js.Publish(context.Background(), "s.x", []byte(d)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return js, publish
}

// deleteConsumers removes the reader's consumer behind its back, as the
// death of the node it lived on does.
func deleteConsumers(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, "S")
	if err != nil {
		t.Fatal(err)
	}
	names := st.ConsumerNames(ctx)
	n := 0
	for name := range names.Name() {
		if err := st.DeleteConsumer(ctx, name); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no consumer to delete")
	}
}

// A consumer lost mid-stream is re-created after the last message read:
// every message arrives once, in order.
func TestReaderSurvivesItsConsumer(t *testing.T) {
	js, publish := setup(t)
	publish("1", "2", "3")
	var c collector
	r, err := Start(context.Background(), js, Config{Stream: "S", Filter: []string{"s.>"}, Logger: slog.New(slog.DiscardHandler)}, c.add)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	waitfor.Within(10*time.Second).True(t, "the first three", func() bool { return len(c.all()) == 3 })
	for round := range 3 {
		deleteConsumers(t, js)
		base := 4 + 3*round
		publish(fmt.Sprint(base), fmt.Sprint(base+1), fmt.Sprint(base+2))
		waitfor.Within(20*time.Second).True(t, "the messages after the loss", func() bool { return len(c.all()) >= base+2 })
	}
	want := []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12"}
	if got := c.all(); !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
}

// DeliverNew reads only what comes after the start, also when the
// consumer is lost before anything arrived.
func TestReaderDeliverNewAcrossALoss(t *testing.T) {
	js, publish := setup(t)
	publish("old")
	var c collector
	r, err := Start(context.Background(), js, Config{Stream: "S", Filter: []string{"s.>"}, DeliverNew: true, Logger: slog.New(slog.DiscardHandler)}, c.add)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	deleteConsumers(t, js)
	publish("new")
	waitfor.Within(20*time.Second).True(t, "the new message", func() bool { return len(c.all()) == 1 })
	publish("newer")
	waitfor.Within(10*time.Second).True(t, "the newer message", func() bool { return len(c.all()) == 2 })
	if got := c.all(); !slices.Equal(got, []string{"new", "newer"}) {
		t.Fatalf("delivered %v", got)
	}
	r.Stop()
	r.Stop() // twice is fine
}
