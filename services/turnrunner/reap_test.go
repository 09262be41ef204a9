package turnrunner

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/turnrunner/ownership"
)

// reapEnv is a real runner on an embedded NATS server and a connection
// that plays the gateway, the other runners (their leases and heartbeats)
// and the turns' past events.
type reapEnv struct {
	t      *testing.T
	srv    *natstest.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	leases jetstream.KeyValue
	beats  jetstream.KeyValue
}

func newReapEnv(t *testing.T) *reapEnv {
	t.Helper()
	srv := natstest.Start(t)
	e := &reapEnv{t: t, srv: srv, nc: srv.Conn("gateway")}
	var err error
	if e.js, err = jetstream.New(e.nc); err != nil {
		t.Fatal(err)
	}
	return e
}

// startRunner starts a runner; claims reports whether it takes over the
// turns other runners left (false keeps the leases the test writes as the
// test wrote them).
func (e *reapEnv) startRunner(claims bool) *Service {
	e.t.Helper()
	s := New(Config{DataDir: e.t.TempDir(), LLMURL: "http://127.0.0.1:9/v1", RunnerID: "runner-under-test"},
		bus.Dialer(e.srv.Dial), slog.New(slog.DiscardHandler))
	if err := s.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Stop(ctx)
	})
	if !claims {
		s.stopClaim()
	}
	var err error
	ctx := context.Background()
	if e.leases, err = e.js.KeyValue(ctx, protocol.BucketTurnLeases); err != nil {
		e.t.Fatal(err)
	}
	if e.beats, err = e.js.KeyValue(ctx, protocol.BucketRunners); err != nil {
		e.t.Fatal(err)
	}
	return s
}

// lease writes a turn's lease naming runner/incarnation; it returns its
// revision.
func (e *reapEnv) lease(turnID, runner, incarnation string) uint64 {
	e.t.Helper()
	body, _ := json.Marshal(protocol.TurnLease{Request: protocol.TurnRequest{TurnID: turnID, Workspace: "ws", Session: "s1"},
		Runner: runner, Incarnation: incarnation, Accepted: time.Now().UnixMilli()})
	rev, err := e.leases.Put(context.Background(), turnID, body)
	if err != nil {
		e.t.Fatal(err)
	}
	return rev
}

// beat writes a runner's heartbeat entry; it returns its revision.
func (e *reapEnv) beat(runner, incarnation string) uint64 {
	e.t.Helper()
	body, _ := json.Marshal(protocol.RunnerBeat{Incarnation: incarnation, Heartbeat: time.Now().UnixMilli()})
	rev, err := e.beats.Put(context.Background(), runner, body)
	if err != nil {
		e.t.Fatal(err)
	}
	return rev
}

// event stores one event of a turn (msgID "" for none).
func (e *reapEnv) event(turnID, name, msgID string) {
	e.t.Helper()
	m := &nats.Msg{Subject: protocol.TurnEvents(turnID), Data: []byte(`{}`), Header: nats.Header{}}
	m.Header.Set(protocol.HeaderEvent, name)
	if msgID != "" {
		m.Header.Set(jetstream.MsgIDHeader, msgID)
	}
	if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
		e.t.Fatal(err)
	}
}

func (e *reapEnv) reap(req protocol.ReapRequest) (protocol.ReapReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return bus.Call(ctx, e.nc, protocol.ReapTurn, req)
}

// last is the turn's last stored event and how many it has.
func (e *reapEnv) last(turnID string) (*jetstream.RawStreamMsg, uint64) {
	e.t.Helper()
	st, err := e.js.Stream(context.Background(), protocol.StreamTurns)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := st.Info(context.Background(), jetstream.WithSubjectFilter(protocol.TurnEvents(turnID)))
	if err != nil {
		e.t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(context.Background(), protocol.TurnEvents(turnID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return m, info.State.Subjects[protocol.TurnEvents(turnID)]
}

func (e *reapEnv) hasLease(turnID string) bool {
	e.t.Helper()
	_, err := e.leases.Get(context.Background(), turnID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return true
}

// TestReapVerdicts: what a runner answers about a quiet turn, and when it
// ends one.
func TestReapVerdicts(t *testing.T) {
	e := newReapEnv(t)
	e.startRunner(false)
	beatRev := e.beat("other", "inc-1")
	tests := []struct {
		name string
		// setup writes the turn's state; it returns the liveness an End
		// request carries (what the gateway judged).
		setup       func(id string) uint64
		end         bool
		wantVerdict string
		wantLive    func(leaseRev uint64) uint64 // nil: not checked
		wantTerm    bool
		wantLease   bool // the lease is still there after
		wantOrphan  bool // the last event is the orphan error
	}{
		{name: "no lease and no event left is gone",
			setup: func(string) uint64 { return 0 }, wantVerdict: protocol.ReapGone},
		{name: "a lease whose runner beats reports the beat's revision",
			setup:       func(id string) uint64 { e.lease(id, "other", "inc-1"); e.event(id, "_start", ""); return 0 },
			wantVerdict: protocol.ReapAlive, wantLive: func(uint64) uint64 { return beatRev }, wantLease: true},
		{name: "a lease of an earlier incarnation reports the lease's revision",
			setup:       func(id string) uint64 { e.lease(id, "other", "inc-0"); e.event(id, "_start", ""); return 0 },
			wantVerdict: protocol.ReapAlive, wantLive: func(rev uint64) uint64 { return rev }, wantLease: true},
		{name: "an ended turn is not orphaned",
			setup: func(id string) uint64 {
				rev := e.lease(id, "gone", "inc-9")
				e.event(id, "_start", "")
				e.event(id, protocol.EventDone, protocol.TurnEndMsgID(id))
				return rev
			},
			end: true, wantVerdict: protocol.ReapAlive, wantTerm: true, wantLease: true},
		{name: "a liveness that moved since the judgment is alive",
			setup: func(id string) uint64 { rev := e.lease(id, "gone", "inc-9"); e.event(id, "_start", ""); return rev - 1 },
			end:   true, wantVerdict: protocol.ReapAlive, wantLease: true},
		{name: "an orphan is ended: lease removed, error stored",
			setup: func(id string) uint64 { rev := e.lease(id, "gone", "inc-9"); e.event(id, "token", ""); return rev },
			end:   true, wantVerdict: protocol.ReapEnded, wantOrphan: true},
		{name: "an orphan without a lease is ended",
			setup: func(id string) uint64 { e.event(id, "token", ""); return 0 },
			end:   true, wantVerdict: protocol.ReapEnded, wantOrphan: true},
		{name: "an orphan whose own end was stored already is gone",
			setup: func(id string) uint64 {
				rev := e.lease(id, "gone", "inc-9")
				e.event(id, protocol.EventDone, protocol.TurnEndMsgID(id))
				e.event(id, "token", "") // the window lost the end's place: the end id is still known
				return rev
			},
			end: true, wantVerdict: protocol.ReapGone},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := "reap-" + string(rune('a'+i))
			live := tc.setup(id)
			var leaseRev uint64
			if kve, err := e.leases.Get(context.Background(), id); err == nil {
				leaseRev = kve.Revision()
			}
			before, n := e.last(id)
			rep, err := e.reap(protocol.ReapRequest{TurnID: id, End: tc.end, Liveness: live})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Verdict != tc.wantVerdict || rep.Terminal != tc.wantTerm {
				t.Fatalf("reply %+v, want verdict %s terminal %v", rep, tc.wantVerdict, tc.wantTerm)
			}
			if tc.wantLive != nil && rep.Liveness != tc.wantLive(leaseRev) {
				t.Fatalf("liveness %d, want %d", rep.Liveness, tc.wantLive(leaseRev))
			}
			if got := e.hasLease(id); got != tc.wantLease {
				t.Fatalf("lease there: %v, want %v", got, tc.wantLease)
			}
			after, m := e.last(id)
			switch {
			case tc.wantOrphan:
				var d protocol.ErrorData
				_ = json.Unmarshal(after.Data, &d)
				if m != n+1 || after.Header.Get(protocol.HeaderEvent) != protocol.EventError || d.Message != protocol.TurnOrphanedText ||
					after.Header.Get(jetstream.MsgIDHeader) != protocol.TurnEndMsgID(id) {
					t.Fatalf("last event %s %s %v (%d events, were %d)", after.Header.Get(protocol.HeaderEvent), after.Data, after.Header, m, n)
				}
				// Asked again, the turn has ended: nothing more is stored.
				if rep, err := e.reap(protocol.ReapRequest{TurnID: id, End: true, Liveness: 0}); err != nil ||
					rep.Verdict != protocol.ReapAlive || !rep.Terminal {
					t.Fatalf("second end: %+v %v", rep, err)
				}
				if _, k := e.last(id); k != m {
					t.Fatalf("second end stored an event: %d events, want %d", k, m)
				}
			case m != n || (before != nil && after.Sequence != before.Sequence):
				t.Fatalf("stored an event: %d events, were %d", m, n)
			}
		})
	}
}

// TestReapAsksTheOwner: an orphan whose owner still answers the probe (its
// heartbeats are late) is left alone.
func TestReapAsksTheOwner(t *testing.T) {
	e := newReapEnv(t)
	e.startRunner(false)
	const id = "probed"
	rev := e.lease(id, "gone", "inc-9")
	e.event(id, "token", "")
	owner := e.srv.Conn("owner")
	sub, err := owner.Subscribe(protocol.TurnControl(id).Subject, func(m *nats.Msg) {
		var c protocol.TurnControlMsg
		if json.Unmarshal(m.Data, &c) == nil && c.Action == protocol.ControlProbe {
			_ = m.Respond([]byte("owner"))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.Flush(); err != nil {
		t.Fatal(err)
	}
	rep, err := e.reap(protocol.ReapRequest{TurnID: id, End: true, Liveness: rev})
	if err != nil || rep.Verdict != protocol.ReapAlive {
		t.Fatalf("reply %+v %v, want alive", rep, err)
	}
	if !e.hasLease(id) {
		t.Fatal("the lease of a turn whose owner answers was removed")
	}
	_ = sub.Unsubscribe()
	if rep, err := e.reap(protocol.ReapRequest{TurnID: id, End: true, Liveness: rev}); err != nil || rep.Verdict != protocol.ReapEnded {
		t.Fatalf("once the owner is gone: %+v %v, want ended", rep, err)
	}
}

func TestReapRejectsABadTurnID(t *testing.T) {
	e := newReapEnv(t)
	e.startRunner(false)
	if _, err := e.reap(protocol.ReapRequest{TurnID: "a b"}); protocol.KindOf(err) != protocol.Invalid {
		t.Fatalf("err %v, want invalid", err)
	}
}

// TestLaterRunnerDoesNotResumeAnEndedTurn: when no runner was left, the
// gateway ended the turn in its stream and left the lease (it is the
// runners'). A runner that comes up later claims the turn, finds it ended
// and only cleans up: the lease goes, nothing more is published, and the
// session is free.
func TestLaterRunnerDoesNotResumeAnEndedTurn(t *testing.T) {
	e := newReapEnv(t)
	// The turn's state as the dead runner and the gateway left it.
	ctx := context.Background()
	js := e.js
	if _, err := bus.EnsureTurnStream(ctx, js, bus.TurnStreamConfig{}); err != nil {
		t.Fatal(err)
	}
	const id = "told-it-failed"
	leases, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: protocol.BucketTurnLeases, History: 1,
		TTL: protocol.LeaseMaxAge, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	queue, err := ownership.Open(ctx, js, ownership.Config{Alive: func(context.Context, string) (bool, error) { return true, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(queue.Close)
	e.leases = leases
	e.lease(id, "dead", "inc-0")
	session := ownership.Session{Workspace: "ws", Session: "s1"}
	if _, err := queue.Join(ctx, session, id, id, false); err != nil {
		t.Fatal(err)
	}
	e.event(id, "_start", "")
	e.event(id, "token", "")
	body, _ := json.Marshal(protocol.ErrorData{Message: protocol.TurnOrphanedText})
	m := &nats.Msg{Subject: protocol.TurnEvents(id), Data: body, Header: nats.Header{}}
	m.Header.Set(protocol.HeaderEvent, protocol.EventError)
	m.Header.Set(jetstream.MsgIDHeader, protocol.TurnEndMsgID(id))
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	_, n := e.last(id)

	e.startRunner(true)
	waitfor.True(t, "the ended turn's lease removed", func() bool { return !e.hasLease(id) })
	if last, k := e.last(id); k != n || last.Header.Get(protocol.HeaderEvent) != protocol.EventError {
		t.Fatalf("after the claim: %d events (were %d), last %s", k, n, last.Header.Get(protocol.HeaderEvent))
	}
	if seq, err := queue.Find(ctx, session, id); err != nil || seq != 0 {
		t.Fatalf("the ended turn is still in its session's queue at %d (%v)", seq, err)
	}
}
