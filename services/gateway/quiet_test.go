package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
)

// countingWriter is a client that reads everything and counts the
// relay's keep-alives.
type countingWriter struct {
	mu         sync.Mutex
	header     http.Header
	text       strings.Builder
	keepAlives int
}

func (w *countingWriter) Header() http.Header { return w.header }
func (w *countingWriter) WriteHeader(int)     {}
func (w *countingWriter) Flush()              {}
func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keepAlives += strings.Count(string(p), ": keep-alive")
	return w.text.Write(p)
}

func (w *countingWriter) seen() (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.keepAlives, w.text.String()
}

// TestQuietTurnCostsNoBusRequest: a follower of a turn that waits for an
// approval asks the bus nothing however long it waits — no question to
// the runners or the session store, no read of a stream or bucket — only
// its presence beats go out. Keep-alives every 2 ms stand in for time:
// 200 of them are 50 minutes of the default 15 s.
func TestQuietTurnCostsNoBusRequest(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Conn("gateway")
	js, _ := jetstream.New(nc)
	if _, err := bus.EnsureTurnStream(context.Background(), js, bus.TurnStreamConfig{}); err != nil {
		t.Fatal(err)
	}
	s := &Service{cfg: Config{KeepAlive: 2 * time.Millisecond}, origins: DesktopOrigins, nc: nc, js: js, log: slog.Default()}
	s.streams, s.stopStream = context.WithCancel(context.Background())
	t.Cleanup(s.stopStream)
	s.hub = newHub()
	if err := s.hub.start(context.Background(), js); err != nil {
		t.Fatal(err)
	}
	defer s.hub.stop()

	const id = "paused"
	publish := func(event, data string) {
		m := &nats.Msg{Subject: protocol.TurnEvents(id), Data: []byte(data), Header: nats.Header{}}
		m.Header.Set(protocol.HeaderEvent, event)
		if _, err := js.PublishMsg(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	live := s.hub.follow(id)
	publish(protocol.EventApprovalRequired, `{"requestId":"r1"}`)

	// Every request the gateway could make: JetStream and KV reads, the
	// runners' and the stores' endpoints. The hub's own pulls serve every
	// follower of the gateway at once, and presence beats are publishes.
	spy := srv.Conn("spy")
	var mu sync.Mutex
	var asked []string
	for _, subj := range []string{"$JS.API.>", "$KV.>", "waggle.>"} {
		if _, err := spy.Subscribe(subj, func(m *nats.Msg) {
			if strings.HasPrefix(m.Subject, "$JS.API.CONSUMER.MSG.NEXT.") || strings.HasPrefix(m.Subject, "waggle.turn.ctl.") {
				return
			}
			mu.Lock()
			asked = append(asked, m.Subject)
			mu.Unlock()
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}

	w := &countingWriter{header: http.Header{}}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		s.relay(w, httptest.NewRequest(http.MethodGet, "/", nil), id, relaySource{live: live}, false)
	}()
	waitfor.True(t, "200 keep-alives", func() bool { n, _ := w.seen(); return n >= 200 })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(asked) != 0 {
		t.Errorf("%d bus requests while the follower waited: %q", len(asked), asked[:min(5, len(asked))])
	}
	mu.Unlock()

	publish(protocol.EventDone, `{"content":"approved and done"}`)
	<-ended
	if _, text := w.seen(); !strings.Contains(text, "event: "+protocol.EventApprovalRequired) || !strings.Contains(text, "approved and done") {
		t.Fatalf("the follower did not get the turn's events:\n%.300s", text)
	}
}
