package gateway

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/protocol"
)

// publishNumbered stores one numbered event of turn, as a runner does.
func publishNumbered(t *testing.T, s *Service, turn, event string, num uint64, data string) {
	t.Helper()
	m := &nats.Msg{Subject: protocol.TurnEvents(turn), Data: []byte(data), Header: nats.Header{}}
	m.Header.Set(protocol.HeaderEvent, event)
	m.Header.Set(protocol.HeaderEventNum, strconv.FormatUint(num, 10))
	if _, err := s.js.PublishMsgAsync(m); err != nil {
		t.Fatal(err)
	}
}

// relayed is what a client read: event names, token text and ids.
type relayed struct {
	names []string
	text  string
}

func readRelayed(t *testing.T, w *slowWriter) relayed {
	t.Helper()
	var r relayed
	var text strings.Builder
	var lastID uint64
	var name string
	sc := bufio.NewScanner(&w.buf)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id, _ := strconv.ParseUint(line[4:], 10, 64)
			if id < lastID { // a stream_gap repeats the id before the hole
				t.Fatalf("id %d after %d: a resume from it would repeat events", id, lastID)
			}
			lastID = id
		case strings.HasPrefix(line, "event: "):
			name = line[7:]
			r.names = append(r.names, name)
		case strings.HasPrefix(line, "data: ") && name == protocol.EventToken:
			var d protocol.TokenData
			if err := json.Unmarshal([]byte(line[6:]), &d); err != nil {
				t.Fatal(err)
			}
			text.WriteString(d.Content)
		}
	}
	r.text = text.String()
	return r
}

// After a stream leader change the runner re-publishes: the stream may
// hold a later event before the lost one, then the lost ones, then the
// later one again, and copies of events stored twice. The client sees
// every token once, in order, and no stream_gap (issue 30).
func TestRelayOrdersRepublishedEvents(t *testing.T) {
	s := newRelayService(t)
	const turn = "turn-republished"
	tok := func(n uint64) string { return fmt.Sprintf(`{"content":"t%d "}`, n) }
	for _, n := range []uint64{1, 2, 3, 6, 4, 5, 6, 7, 7, 8} { // 6 ahead of 4; copies of 6 and 7
		publishNumbered(t, s, turn, protocol.EventToken, n, tok(n))
	}
	publishNumbered(t, s, turn, protocol.EventDone, 9, `{"content":"end"}`)
	<-s.js.PublishAsyncComplete()

	w := &slowWriter{header: http.Header{}}
	s.relay(w, httptest.NewRequest(http.MethodGet, "/", nil), turn, relaySource{}, false)
	r := readRelayed(t, w)
	if want := "t1 t2 t3 t4 t5 t6 t7 t8 "; r.text != want {
		t.Fatalf("client read %q, want %q", r.text, want)
	}
	for _, n := range r.names {
		if n == protocol.EventStreamGap {
			t.Fatal("stream_gap sent for a re-publish, not for a client behind")
		}
	}
	if r.names[len(r.names)-1] != protocol.EventDone {
		t.Fatalf("last event %v", r.names)
	}
}

// A real hole (events discarded by the stream) is still reported: the
// events past it wait gapWait for the missing ones, then the client gets
// stream_gap and the rest.
func TestRelayReportsARealHole(t *testing.T) {
	old := gapWait
	gapWait = 100 * time.Millisecond
	defer func() { gapWait = old }()
	s := newRelayService(t)
	const turn = "turn-hole"
	for _, n := range []uint64{1, 2, 5, 6} {
		publishNumbered(t, s, turn, protocol.EventToken, n, fmt.Sprintf(`{"content":"t%d "}`, n))
	}
	publishNumbered(t, s, turn, protocol.EventDone, 7, `{"content":"end"}`)
	<-s.js.PublishAsyncComplete()
	w := &slowWriter{header: http.Header{}}
	s.relay(w, httptest.NewRequest(http.MethodGet, "/", nil), turn, relaySource{}, false)
	r := readRelayed(t, w)
	if want := "t1 t2 t5 t6 "; r.text != want {
		t.Fatalf("client read %q, want %q", r.text, want)
	}
	want := []string{protocol.EventToken, protocol.EventToken, protocol.EventStreamGap, protocol.EventToken, protocol.EventToken, protocol.EventDone}
	if strings.Join(r.names, ",") != strings.Join(want, ",") {
		t.Fatalf("events %v, want %v", r.names, want)
	}
}
