package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
)

// stalledWriter is a client that stopped reading: the first event write
// blocks until the test ends.
type stalledWriter struct {
	header  http.Header
	once    sync.Once
	writing chan struct{} // closed when the first event write blocks
	release chan struct{}
}

func newStalledWriter() *stalledWriter {
	return &stalledWriter{header: http.Header{}, writing: make(chan struct{}), release: make(chan struct{})}
}

func (w *stalledWriter) Header() http.Header { return w.header }
func (w *stalledWriter) WriteHeader(int)     {}
func (w *stalledWriter) Flush()              {}
func (w *stalledWriter) Write([]byte) (int, error) {
	w.once.Do(func() { close(w.writing) })
	<-w.release
	return 0, errors.New("client gone")
}

// heapInUse is the live heap after a full collection.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestStalledRelayHoldsNoLaterTraffic: a relay stuck writing to a client
// that stopped reading costs the gateway the few events it took, not the
// traffic of every other turn that reaches the gateway after them. nats.go
// links each message it delivers to the next one that arrived on the same
// subscription while it waited and never unlinks it, so a relay that kept
// a message of the hub's subscription kept the whole backlog behind it
// alive (e2e/load TestStalledReadersKeepMemoryBounded: 5 MiB done events
// of other turns held by stalled relays, heap over its bound).
func TestStalledRelayHoldsNoLaterTraffic(t *testing.T) {
	s := newRelayService(t)
	s.hub = newHub()
	if err := s.hub.start(context.Background(), s.js); err != nil {
		t.Fatal(err)
	}
	defer s.hub.stop()
	const stalledTurn, otherTurn, probeTurn = "turn-stalled", "turn-other", "turn-probe"
	const others, otherSize = 6, 1 << 20

	w := newStalledWriter()
	relayDone := make(chan struct{})
	go func() {
		defer close(relayDone)
		s.relay(w, httptest.NewRequest(http.MethodGet, "/", nil), stalledTurn, relaySource{live: s.hub.follow(stalledTurn)}, false)
	}()
	defer func() { close(w.release); <-relayDone }()
	probe := s.hub.follow(probeTurn)
	big := `{"content":"` + strings.Repeat("x", otherSize) + `"}`
	// The publishing connection's buffer grows to one big event once: not
	// what this test measures. What the stream stores is not the
	// gateway's either.
	st, err := s.js.Stream(context.Background(), protocol.StreamTurns)
	if err != nil {
		t.Fatal(err)
	}
	publishNumbered(t, s, "turn-warm", protocol.EventToken, 1, big)
	<-s.js.PublishAsyncComplete()
	if err := st.Purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	base := heapInUse()

	// The hub's dispatch waits (as on a busy gateway) while the stalled
	// turn's two tokens and 6 MiB of another turn's events arrive, so
	// they queue on the hub's subscription one behind the other.
	inBefore := s.nc.Stats().InBytes
	s.hub.mu.Lock()
	publishNumbered(t, s, stalledTurn, protocol.EventToken, 1, `{"content":"a"}`)
	publishNumbered(t, s, stalledTurn, protocol.EventToken, 2, `{"content":"b"}`)
	for i := range others {
		publishNumbered(t, s, otherTurn, protocol.EventToken, uint64(i+1), big)
	}
	<-s.js.PublishAsyncComplete()
	waitfor.Within(10*time.Second).True(t, "the other turn's events reached the gateway", func() bool {
		return s.nc.Stats().InBytes-inBefore >= others*otherSize
	})
	s.hub.mu.Unlock()

	// The relay takes its tokens and blocks writing them; everything
	// after them is dispatched (the probe's event comes last).
	select {
	case <-w.writing:
	case <-time.After(10 * time.Second):
		t.Fatal("the relay never wrote its first event")
	}
	publishNumbered(t, s, probeTurn, protocol.EventToken, 1, `{"content":"p"}`)
	select {
	case <-probe.ready:
	case <-time.After(10 * time.Second):
		t.Fatal("the hub never dispatched the events after the stalled turn's")
	}
	if err := st.Purge(context.Background()); err != nil {
		t.Fatal(err)
	}

	grown := heapInUse() - base
	t.Logf("heap grew %d KiB with one stalled relay after %d MiB of other traffic", grown>>10, others*otherSize>>20)
	if grown > otherSize/2 {
		t.Fatalf("heap grew %d KiB with one stalled relay: it keeps the other turn's %d MiB alive", grown>>10, others*otherSize>>20)
	}
}

// TestRelayHoldingTheEndWaitsForIt: a relay that holds its turn's done past
// a hole (the events between were discarded while its client stalled)
// delivers that done once the hole is reported. It does not also read the
// reply from the store while holding it when its keep-alive finds the
// stream emptied — two copies of a long reply per stalled client (e2e/load
// TestStalledReadersKeepMemoryBounded failed its heap bound when the
// keep-alive came before the gap timer, about every other run).
func TestRelayHoldingTheEndWaitsForIt(t *testing.T) {
	old := gapWait
	gapWait = 500 * time.Millisecond
	defer func() { gapWait = old }()
	s := newRelayService(t)
	s.cfg.KeepAlive, s.cfg.RequestTimeout = 20*time.Millisecond, 5*time.Second
	const turn = "turn-held-end"
	var storeReads atomic.Int32
	sub, err := s.nc.Subscribe(protocol.ReadHistory.Subject, func(m *nats.Msg) {
		storeReads.Add(1)
		body, _ := json.Marshal(protocol.HistoryReply{Messages: []protocol.Message{
			{Role: protocol.RoleUser, Content: "long", TurnID: turn},
			{Role: protocol.RoleAssistant, Content: "end", TurnID: turn},
		}})
		_ = m.Respond(body)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	publishNumbered(t, s, turn, protocol.EventToken, 1, `{"content":"t1 "}`)
	publishNumbered(t, s, turn, protocol.EventDone, 3, `{"content":"end"}`) // 2 was discarded
	<-s.js.PublishAsyncComplete()

	w := &slowWriter{header: http.Header{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.relay(w, httptest.NewRequest(http.MethodGet, "/", nil), turn, relaySource{ref: &protocol.SessionRef{Workspace: "default", Session: "s"}}, false)
	}()
	waitfor.Within(10*time.Second).True(t, "the client read the first token", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return strings.Contains(w.buf.String(), "t1 ")
	})
	// The window moves on: the stream no longer holds the turn.
	st, err := s.js.Stream(context.Background(), protocol.StreamTurns)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the relay never ended")
	}
	r := readRelayed(t, w)
	want := []string{protocol.EventToken, protocol.EventStreamGap, protocol.EventDone}
	if strings.Join(r.names, ",") != strings.Join(want, ",") {
		t.Fatalf("events %v, want %v", r.names, want)
	}
	if n := storeReads.Load(); n != 0 {
		t.Fatalf("the relay read the reply from the store %d times while it held the turn's done", n)
	}
}
