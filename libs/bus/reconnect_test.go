package bus_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/embednats"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
)

// natsServer runs an embedded server on a fixed TCP address so it can be
// stopped and started again where clients expect it.
type natsServer struct {
	t    *testing.T
	addr string
	dir  string
	srv  *embednats.Server
}

func startServer(t *testing.T) *natsServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := &natsServer{t: t, addr: addr, dir: t.TempDir()}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *natsServer) start() {
	s.t.Helper()
	s.srv = embednats.New(embednats.Config{StoreDir: s.dir, Listen: s.addr})
	if err := s.srv.Start(context.Background()); err != nil {
		s.t.Fatalf("start nats: %v", err)
	}
}

func (s *natsServer) stop() {
	if s.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.srv.Stop(ctx); err != nil {
		s.t.Errorf("stop nats: %v", err)
	}
	s.srv = nil
}

// TestTurnStreamAcrossRestart: the memory turn stream is gone when its NATS
// server restarts; the connection that ensured it re-creates it on
// reconnect, above every sequence of the old one, so an ordered consumer
// made before the restart goes on receiving.
func TestTurnStreamAcrossRestart(t *testing.T) {
	srv := startServer(t)
	nc, err := bus.URLDialer("nats://" + srv.addr)("test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	before := uint64(time.Now().UnixMicro())
	st, err := bus.EnsureTurnStream(ctx, js, bus.TurnStreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if first := st.CachedInfo().Config.FirstSeq; first < before {
		t.Fatalf("memory stream first sequence %d, want the creation time in µs (≥ %d)", first, before)
	}
	// Ensuring it again keeps it (and its sequence).
	again, err := bus.EnsureTurnStream(ctx, js, bus.TurnStreamConfig{})
	if err != nil || again.CachedInfo().Config.FirstSeq != st.CachedInfo().Config.FirstSeq {
		t.Fatalf("second ensure: %v, first seq %d → %d", err, st.CachedInfo().Config.FirstSeq, again.CachedInfo().Config.FirstSeq)
	}

	cons, err := js.OrderedConsumer(ctx, protocol.StreamTurns, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{protocol.SubjTurnEventsAll}, DeliverPolicy: jetstream.DeliverNewPolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan jetstream.Msg, 16)
	cc, err := cons.Consume(func(m jetstream.Msg) { got <- m })
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
	var lastSeq uint64
	for range 3 {
		ack, err := js.Publish(ctx, protocol.TurnEvents("t1"), []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		lastSeq = ack.Sequence
		<-got
	}

	srv.stop()
	waitfor.Within(5*time.Second).Every(20*time.Millisecond).True(t, "the client to notice", func() bool { return !nc.IsConnected() })
	// While disconnected a request fails at once, with the bus error.
	began := time.Now()
	_, err = bus.RequestMsg(ctx, nc, &nats.Msg{Subject: "waggle.test.echo"})
	if !errors.Is(err, protocol.ErrBusUnavailable) || time.Since(began) > time.Second {
		t.Fatalf("request while disconnected: %v after %s, want ErrBusUnavailable at once", err, time.Since(began))
	}
	wctx, wcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	if err := bus.WaitConnected(wctx, nc); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitConnected while the server is down: %v", err)
	}
	wcancel()
	srv.start()
	wctx, wcancel = context.WithTimeout(ctx, 10*time.Second)
	if err := bus.WaitConnected(wctx, nc); err != nil {
		t.Fatalf("WaitConnected after the restart: %v", err)
	}
	wcancel()

	var info *jetstream.StreamInfo
	waitfor.Within(10*time.Second).Every(20*time.Millisecond).True(t, "the turn stream to be re-created", func() bool {
		s, err := js.Stream(ctx, protocol.StreamTurns)
		if err != nil {
			return false
		}
		info = s.CachedInfo()
		return true
	})
	if info.Config.FirstSeq <= lastSeq {
		t.Fatalf("re-created stream starts at %d, not above the old last sequence %d", info.Config.FirstSeq, lastSeq)
	}
	// The consumer from before the restart gets what is published now.
	ack, err := js.Publish(ctx, protocol.TurnEvents("t2"), []byte("after"))
	if err != nil {
		t.Fatalf("publish after the restart: %v", err)
	}
	select {
	case m := <-got:
		if string(m.Data()) != "after" {
			t.Fatalf("consumer got %q", m.Data())
		}
		md, _ := m.Metadata()
		if md.Sequence.Stream != ack.Sequence {
			t.Fatalf("consumer got sequence %d, published %d", md.Sequence.Stream, ack.Sequence)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the ordered consumer made before the restart got nothing after it")
	}
}

// TestFileTurnStreamStartsAtOne: a file stream survives restarts, so it
// keeps JetStream's usual first sequence.
func TestFileTurnStreamStartsAtOne(t *testing.T) {
	srv := startServer(t)
	nc, err := bus.URLDialer("nats://" + srv.addr)("test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st, err := bus.EnsureTurnStream(context.Background(), js, bus.TurnStreamConfig{Storage: "file"})
	if err != nil {
		t.Fatal(err)
	}
	if first := st.CachedInfo().Config.FirstSeq; first > 1 {
		t.Fatalf("file stream first sequence %d", first)
	}
	// Switching storage replaces the stream (turn events are transient).
	st, err = bus.EnsureTurnStream(context.Background(), js, bus.TurnStreamConfig{Storage: "memory"})
	if err != nil || st.CachedInfo().Config.Storage != jetstream.MemoryStorage {
		t.Fatalf("switch to memory: %v", err)
	}
}

// TestSingletonRetakenAfterExpiry: a singleton lease whose entry vanished
// (it expired while NATS was away) is taken again by its holder on the
// next renewal instead of failing every renewal from then on.
func TestSingletonRetakenAfterExpiry(t *testing.T) {
	srv := startServer(t)
	nc, err := bus.URLDialer("nats://" + srv.addr)("test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	s, err := bus.AcquireSingleton(ctx, js, "svc", "holder-1", 1, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(ctx)
	kv, err := js.KeyValue(ctx, protocol.BucketSingletons)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "svc"); err != nil {
		t.Fatal(err)
	}
	waitfor.Within(2*bus.SingletonTTL).Every(20*time.Millisecond).True(t, "the lease to be taken again", func() bool {
		e, err := kv.Get(ctx, "svc")
		return err == nil && string(e.Value()) == "holder-1"
	})
	// A second instance still waits.
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := bus.AcquireSingleton(wctx, js, "svc", "holder-2", 1, slog.Default()); err == nil {
		t.Fatal("a second instance acquired the re-taken lease")
	}
}
