package turn

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
)

// lossyStore is a session store whose first answer to every append is
// lost (stored, never answered: the reply went with a dying cluster
// node). It keeps one line per append key, as the real stores do (their
// conformance suite checks that), and counts the sends of each key.
type lossyStore struct {
	mu    sync.Mutex
	lines []string
	keys  map[string]int // sends per key
}

func (s *lossyStore) serve(t *testing.T, nc *nats.Conn) {
	t.Helper()
	sub, err := nc.Subscribe(protocol.AppendToSession.Subject, func(m *nats.Msg) {
		var req protocol.AppendRequest
		if err := json.Unmarshal(m.Data, &req); err != nil || req.Message == nil {
			return
		}
		s.mu.Lock()
		s.keys[req.Key]++
		sends := s.keys[req.Key]
		if req.Key == "" || sends == 1 {
			s.lines = append(s.lines, req.Message.Role+": "+req.Message.Content)
		}
		s.mu.Unlock()
		if sends == 1 {
			return // stored; the answer is lost
		}
		body, _ := json.Marshal(protocol.AppendReply{Timestamp: protocol.Timestamp(time.Now()), Duplicate: req.Key != ""})
		_ = m.Respond(body)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestAppendAnswerLostIsResent: the store's answers to the user message
// and the reply are lost once each (a cluster electing). The turn sends
// each append again under the same key instead of failing on the lost
// answer: it ends in done, well within the store timeout, and the session
// holds each message once. The user message and the reply have keys of
// their own.
func TestAppendAnswerLostIsResent(t *testing.T) {
	srv := natstest.Start(t)
	store := &lossyStore{keys: map[string]int{}}
	store.serve(t, srv.Conn("store"))
	rec := &record{}
	d := &Deps{
		Conn: srv.Conn("runner"), Log: quiet,
		Config:      Config{StoreTimeout: 10 * time.Second},
		ModelServer: noModel{}, Settings: noSettings{},
	}
	req := protocol.TurnRequest{TurnID: "t1", Workspace: "ws", Session: "s1", Message: "hello there"}
	tr := newTurn(d, req, fakeOwnership{rec}, nobody{})
	tr.pub = &fakeEvents{rec: rec}
	start := time.Now()
	tr.Run()
	tr.Close()
	took := time.Since(start)

	if i := rec.index("finish:" + protocol.EventDone); i < 0 {
		t.Fatalf("the turn did not end in done:\n%s", strings.Join(rec.entries(), "\n"))
	}
	if took >= d.Config.StoreTimeout {
		t.Errorf("the turn took %v: it waited out the store timeout", took)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	want := []string{"user: hello there", "assistant: " + protocol.EchoText("hello there")}
	if !slices.Equal(store.lines, want) {
		t.Errorf("the session holds %q, want %q", store.lines, want)
	}
	user, reply := protocol.AppendKey("t1", protocol.RoleUser), protocol.AppendKey("t1", protocol.RoleAssistant)
	if store.keys[user] < 2 || store.keys[reply] < 2 || user == reply {
		t.Errorf("sends per key %v: want the user message (%s) and the reply (%s) sent again under their own keys", store.keys, user, reply)
	}
	if n := store.keys[""]; n != 0 {
		t.Errorf("%d appends without a key", n)
	}
}
