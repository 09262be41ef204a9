package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/protocol"
)

// fakeClock is an orphan watch's clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// storeEvent stores one event of a turn, as its runner would.
func storeEvent(t *testing.T, s *Service, turnID, name string) {
	t.Helper()
	m := &nats.Msg{Subject: protocol.TurnEvents(turnID), Data: []byte(`{}`), Header: nats.Header{}}
	m.Header.Set(protocol.HeaderEvent, name)
	if _, err := s.js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

func lastStored(t *testing.T, s *Service, turnID string) *jetstream.RawStreamMsg {
	t.Helper()
	st, err := s.js.Stream(context.Background(), protocol.StreamTurns)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(context.Background(), protocol.TurnEvents(turnID))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fakeReaper plays the turn runners' reap endpoint: it records the
// requests and answers with answer.
type fakeReaper struct {
	mu   sync.Mutex
	reqs []protocol.ReapRequest
	sub  *nats.Subscription
}

func startReaper(t *testing.T, nc *nats.Conn, answer func(protocol.ReapRequest) protocol.ReapReply) *fakeReaper {
	t.Helper()
	f := &fakeReaper{}
	sub, err := nc.Subscribe(protocol.ReapTurn.Subject, func(m *nats.Msg) {
		var req protocol.ReapRequest
		_ = json.Unmarshal(m.Data, &req)
		f.mu.Lock()
		f.reqs = append(f.reqs, req)
		f.mu.Unlock()
		body, _ := json.Marshal(answer(req))
		_ = m.Respond(body)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	f.sub = sub
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return f
}

func (f *fakeReaper) requests() []protocol.ReapRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]protocol.ReapRequest(nil), f.reqs...)
}

// TestOrphanWatchAsksTheRunners: the watch judges the liveness the runners
// report on its own clock and asks them to end the turn at the revision it
// judged; it acts on their verdict.
func TestOrphanWatchAsksTheRunners(t *testing.T) {
	s := newRelayService(t)
	const id = "asked"
	endVerdict := protocol.ReapEnded
	var mu sync.Mutex
	live := uint64(7)
	f := startReaper(t, s.nc, func(req protocol.ReapRequest) protocol.ReapReply {
		mu.Lock()
		defer mu.Unlock()
		if req.End {
			return protocol.ReapReply{Verdict: endVerdict, Liveness: live}
		}
		return protocol.ReapReply{Verdict: protocol.ReapAlive, Liveness: live}
	})
	clk := &fakeClock{t: time.Unix(1000, 0)}
	o := &orphanWatch{s: s, turnID: id, now: clk.now}
	ctx := context.Background()

	if v := o.tick(ctx); v != orphanNo {
		t.Fatalf("first look: %v", v)
	}
	clk.add(protocol.LeaseOrphanAfter - time.Second)
	if v := o.tick(ctx); v != orphanNo {
		t.Fatalf("before LeaseOrphanAfter: %v", v)
	}
	// The liveness moves: the clock starts again.
	mu.Lock()
	live = 8
	mu.Unlock()
	clk.add(time.Second)
	if v := o.tick(ctx); v != orphanNo {
		t.Fatalf("after a beat: %v", v)
	}
	for _, r := range f.requests() {
		if r.End || r.TurnID != id {
			t.Fatalf("asked %+v before judging", r)
		}
	}
	// The owner answers the runner's probe: alive, and judged afresh.
	mu.Lock()
	endVerdict = protocol.ReapAlive
	mu.Unlock()
	clk.add(protocol.LeaseOrphanAfter)
	if v := o.tick(ctx); v != orphanNo {
		t.Fatalf("owner answered: %v", v)
	}
	reqs := f.requests()
	if last := reqs[len(reqs)-1]; !last.End || last.Liveness != 8 {
		t.Fatalf("end request %+v, want end at liveness 8", last)
	}
	n := len(reqs)
	clk.add(time.Second)
	if v := o.tick(ctx); v != orphanNo || len(f.requests()) != n+1 || f.requests()[n].End {
		t.Fatalf("after an alive end: %v %+v", v, f.requests()[n:])
	}
	mu.Lock()
	endVerdict = protocol.ReapEnded
	mu.Unlock()
	clk.add(protocol.LeaseOrphanAfter)
	if v := o.tick(ctx); v != orphanEnded {
		t.Fatalf("ended by the runner: %v", v)
	}
	mu.Lock()
	endVerdict = protocol.ReapGone
	mu.Unlock()
	clk.add(protocol.LeaseOrphanAfter)
	if v := o.tick(ctx); v != orphanGone {
		t.Fatalf("gone: %v", v)
	}
	// The gateway wrote nothing: the runners own the turn's end.
	if st, err := s.js.Stream(ctx, protocol.StreamTurns); err != nil {
		t.Fatal(err)
	} else if _, err := st.GetLastMsgForSubject(ctx, protocol.TurnEvents(id)); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("the gateway stored an event: %v", err)
	}
}

// TestOrphanWatchAloneEndsTheTurn: with no runner subscribed at all, the
// watch ends a turn whose stream has not moved for LeaseOrphanAfter, in the
// stream, with the turn's end id, and touches no runner state.
func TestOrphanWatchAloneEndsTheTurn(t *testing.T) {
	s := newRelayService(t)
	const id = "alone"
	storeEvent(t, s, id, protocol.EventStart)
	storeEvent(t, s, id, protocol.EventToken)
	clk := &fakeClock{t: time.Unix(1000, 0)}
	o := &orphanWatch{s: s, turnID: id, now: clk.now}
	ctx := context.Background()
	if v := o.tick(ctx); v != orphanNo {
		t.Fatalf("first look: %v", v)
	}
	clk.add(protocol.LeaseOrphanAfter)
	if v := o.tick(ctx); v != orphanEnded {
		t.Fatalf("after LeaseOrphanAfter: %v", v)
	}
	m := lastStored(t, s, id)
	var d protocol.ErrorData
	_ = json.Unmarshal(m.Data, &d)
	if m.Header.Get(protocol.HeaderEvent) != protocol.EventError || d.Message != protocol.TurnOrphanedText ||
		m.Header.Get(jetstream.MsgIDHeader) != protocol.TurnEndMsgID(id) {
		t.Fatalf("last event %v %s", m.Header, m.Data)
	}
	if _, err := s.js.KeyValue(ctx, protocol.BucketTurnLeases); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("lease bucket: %v (the gateway must not touch it)", err)
	}
	// A watch on a turn that has ended does nothing more.
	clk.add(protocol.LeaseOrphanAfter)
	if v := o.tick(ctx); v != orphanNo {
		t.Fatalf("ended turn: %v", v)
	}
}

// TestOrphanWatchAloneYields: the gateway's own end never lands after
// anything a runner published since it judged, and a runner that came up
// meanwhile judges instead. The owner's probe is the hook: it is the last
// step before the end.
func TestOrphanWatchAloneYields(t *testing.T) {
	tests := []struct {
		name  string
		probe func(t *testing.T, s *Service, id string)
	}{
		{"an event published meanwhile", func(t *testing.T, s *Service, id string) { storeEvent(t, s, id, protocol.EventToken) }},
		{"a runner came up meanwhile", func(t *testing.T, s *Service, id string) {
			startReaper(t, s.nc, func(protocol.ReapRequest) protocol.ReapReply {
				return protocol.ReapReply{Verdict: protocol.ReapAlive, Liveness: 1}
			})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newRelayService(t)
			id := "yield"
			storeEvent(t, s, id, protocol.EventToken)
			// A subscriber that does not answer the probe (as runners that
			// do not own the turn): the watch's probe times out.
			probed := make(chan struct{}, 1)
			hook, err := s.nc.Subscribe(protocol.TurnControl(id).Subject, func(*nats.Msg) { probed <- struct{}{} })
			if err != nil {
				t.Fatal(err)
			}
			defer hook.Unsubscribe()
			clk := &fakeClock{t: time.Unix(1000, 0)}
			o := &orphanWatch{s: s, turnID: id, now: clk.now}
			ctx := context.Background()
			if v := o.tick(ctx); v != orphanNo {
				t.Fatalf("first look: %v", v)
			}
			clk.add(protocol.LeaseOrphanAfter)
			done := make(chan orphanVerdict, 1)
			go func() { done <- o.tick(ctx) }()
			<-probed
			tc.probe(t, s, id)
			if v := <-done; v != orphanNo {
				t.Fatalf("verdict %v, want orphanNo", v)
			}
			if m := lastStored(t, s, id); m.Header.Get(protocol.HeaderEvent) == protocol.EventError {
				t.Fatal("the gateway ended the turn")
			}
		})
	}
}
