package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
)

// TestLiveRelayLearnsOfAnEndTheHubNeverRead: under a burst the stream can
// discard events before the hub reads them — a live follower's turn's
// done among them, after which no event of that turn ever comes. The
// relay learns of it at its next keep-alive after the hub's gap: its
// client is told of the gap and gets the turn's end from the session
// store, instead of waiting for ever (e2e/load
// TestStalledReadersKeepMemoryBounded hung 10 minutes on one such turn).
func TestLiveRelayLearnsOfAnEndTheHubNeverRead(t *testing.T) {
	s := newRelayService(t)
	s.cfg.KeepAlive, s.cfg.RequestTimeout = 20*time.Millisecond, 5*time.Second
	s.hub = newHub() // not started: the test hands it what its consumer read
	const turn = "turn-lost-end"
	sub, err := s.nc.Subscribe(protocol.ReadHistory.Subject, func(m *nats.Msg) {
		body, _ := json.Marshal(protocol.HistoryReply{Messages: []protocol.Message{
			{Role: protocol.RoleUser, Content: "long", TurnID: turn},
			{Role: protocol.RoleAssistant, Content: "t1 the whole reply", TurnID: turn},
		}})
		_ = m.Respond(body)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	live := s.hub.follow(turn)
	publishNumbered(t, s, turn, protocol.EventToken, 1, `{"content":"t1 "}`)
	publishNumbered(t, s, "other", protocol.EventToken, 1, `{"content":"o1 "}`)
	publishNumbered(t, s, turn, protocol.EventDone, 2, `{"content":"t1 the whole reply"}`)
	publishNumbered(t, s, "other", protocol.EventToken, 2, `{"content":"o2 "}`)
	<-s.js.PublishAsyncComplete()
	ctx := context.Background()
	cons, err := s.js.OrderedConsumer(ctx, protocol.StreamTurns, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(4, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	if len(msgs) != 4 {
		t.Fatalf("fetched %d events, want 4", len(msgs))
	}
	// The middle two are discarded before the hub reads them.
	st, err := s.js.Stream(ctx, protocol.StreamTurns)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs[1:3] {
		meta, _ := m.Metadata()
		if err := st.DeleteMsg(ctx, meta.Sequence.Stream); err != nil {
			t.Fatal(err)
		}
	}

	w := &slowWriter{header: http.Header{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.relay(w, httptest.NewRequest(http.MethodGet, "/", nil), turn,
			relaySource{live: live, ref: &protocol.SessionRef{Workspace: "default", Session: "s"}}, false)
	}()
	s.hub.dispatch(msgs[0])
	waitfor.Within(10*time.Second).True(t, "the client read the first token", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return strings.Contains(w.buf.String(), "t1 ")
	})
	s.hub.dispatch(msgs[3]) // the hub reads on, past the hole
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the relay never ended: it waits for a done the hub never read")
	}
	text := w.buf.String()
	r := readRelayed(t, w)
	want := []string{protocol.EventToken, protocol.EventStreamGap, protocol.EventDone}
	if strings.Join(r.names, ",") != strings.Join(want, ",") {
		t.Fatalf("events %v, want %v", r.names, want)
	}
	if !strings.Contains(text, "t1 the whole reply") {
		t.Fatalf("the end is not the stored reply:\n%s", text)
	}
}
