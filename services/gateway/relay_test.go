package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/telemetry"
)

// slowWriter is a client that reads slowly: every write blocks a while.
type slowWriter struct {
	mu     sync.Mutex
	header http.Header
	buf    bytes.Buffer
	delay  time.Duration
}

func (w *slowWriter) Header() http.Header { return w.header }
func (w *slowWriter) WriteHeader(int)     {}
func (w *slowWriter) Flush()              {}
func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(w.delay)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func newRelayService(t *testing.T) *Service {
	t.Helper()
	nc := natstest.Start(t).Conn("relay")
	js, _ := jetstream.New(nc)
	if _, err := bus.EnsureTurnStream(context.Background(), js, bus.TurnStreamConfig{}); err != nil {
		t.Fatal(err)
	}
	s := &Service{cfg: Config{KeepAlive: time.Minute}, origins: DesktopOrigins, nc: nc, js: js, log: slog.Default()}
	s.streams, s.stopStream = context.WithCancel(context.Background())
	t.Cleanup(s.stopStream)
	return s
}

// TestRelayCoalescesForSlowReader guards token coalescing: under a slow
// reader, waiting token events are merged, but the text is complete and in
// order, ids only grow, other events are never merged and done comes last.
func TestRelayCoalescesForSlowReader(t *testing.T) {
	s := newRelayService(t)
	const turn, tokens = "turn-slow", 3000
	var want strings.Builder
	publish := func(event string, data any) {
		body, _ := marshalNoEscape(data) // as the runner publishes
		m := &nats.Msg{Subject: protocol.TurnEvents(turn), Data: body, Header: nats.Header{}}
		m.Header.Set(protocol.HeaderEvent, event)
		if _, err := s.js.PublishMsgAsync(m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range tokens {
		tok := fmt.Sprintf("t%d<&> ", i)
		want.WriteString(tok)
		publish(protocol.EventToken, protocol.TokenData{Content: tok})
		if i == tokens/2 {
			publish(protocol.EventStep, protocol.TokenData{Content: "halfway"})
		}
	}
	publish(protocol.EventDone, map[string]any{"content": "end"})
	<-s.js.PublishAsyncComplete()

	w := &slowWriter{header: http.Header{}, delay: 200 * time.Microsecond}
	s.relay(w, httptest.NewRequest(http.MethodGet, "/", nil), turn, relaySource{}, false)
	checkRelayed(t, w, want.String(), tokens)
}

// TestLiveRelayDropsLaggingClientToCatchUp: on the live path, a client too
// slow for its buffer is handed to a private consumer and still gets every
// token, in order, once.
func TestLiveRelayDropsLaggingClientToCatchUp(t *testing.T) {
	s := newRelayService(t)
	s.hub = newHub()
	s.hub.limit = 16 * 300 // about 16 events: overflow quickly, this test is about the catch-up
	if err := s.hub.start(context.Background(), s.js); err != nil {
		t.Fatal(err)
	}
	defer s.hub.stop()
	const turn, tokens = "turn-live", 3000
	live := s.hub.follow(turn)
	var want strings.Builder
	published := make(chan struct{})
	go func() {
		defer close(published)
		for i := range tokens {
			tok := fmt.Sprintf("t%d<&> ", i)
			want.WriteString(tok)
			body, _ := marshalNoEscape(protocol.TokenData{Content: tok})
			m := &nats.Msg{Subject: protocol.TurnEvents(turn), Data: body, Header: nats.Header{}}
			m.Header.Set(protocol.HeaderEvent, protocol.EventToken)
			s.js.PublishMsgAsync(m)
			if i == tokens/2 {
				m := &nats.Msg{Subject: protocol.TurnEvents(turn), Data: []byte(`{"content":"halfway"}`), Header: nats.Header{}}
				m.Header.Set(protocol.HeaderEvent, protocol.EventStep)
				s.js.PublishMsgAsync(m)
			}
		}
		m := &nats.Msg{Subject: protocol.TurnEvents(turn), Data: []byte(`{"content":"end"}`), Header: nats.Header{}}
		m.Header.Set(protocol.HeaderEvent, protocol.EventDone)
		s.js.PublishMsgAsync(m)
	}()
	w := &slowWriter{header: http.Header{}, delay: 300 * time.Microsecond}
	before := testutil.ToFloat64(telemetry.RelayCatchUps)
	s.relay(w, httptest.NewRequest(http.MethodGet, "/", nil), turn, relaySource{live: live}, false)
	<-published
	checkRelayed(t, w, want.String(), tokens)
	if testutil.ToFloat64(telemetry.RelayCatchUps) == before {
		t.Fatal("the lagging client was never handed to a stream read")
	}
}

func checkRelayed(t *testing.T, w *slowWriter, want string, tokens int) {
	t.Helper()

	var got strings.Builder
	var names []string
	var lastID uint64
	sc := bufio.NewScanner(&w.buf)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id, _ := strconv.ParseUint(line[4:], 10, 64)
			if id <= lastID {
				t.Fatalf("id %d after %d", id, lastID)
			}
			lastID = id
		case strings.HasPrefix(line, "event: "):
			name = line[7:]
			names = append(names, name)
		case strings.HasPrefix(line, "data: ") && name == protocol.EventToken:
			var d protocol.TokenData
			if err := json.Unmarshal([]byte(line[6:]), &d); err != nil {
				t.Fatal(err)
			}
			got.WriteString(d.Content)
		}
	}
	if got.String() != want {
		t.Fatalf("token text differs: got %d bytes, want %d", got.Len(), len(want))
	}
	if names[len(names)-1] != protocol.EventDone {
		t.Fatalf("last event %s", names[len(names)-1])
	}
	steps := 0
	for _, n := range names {
		if n == protocol.EventStep {
			steps++
		}
	}
	if steps != 1 {
		t.Fatalf("step events = %d, want exactly 1 (never merged)", steps)
	}
	if len(names) >= tokens {
		t.Fatalf("%d events for %d tokens: a slow reader should get coalesced tokens", len(names), tokens)
	}
	if strings.Contains(w.buf.String(), `\u003c`) {
		t.Fatal("HTML escaping in coalesced data")
	}
	t.Logf("%d tokens relayed as %d events", tokens, len(names))
}
