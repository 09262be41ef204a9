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
	"github.com/waggle-os/core/services/turnrunner/ownership/sessionqueue"
	"github.com/waggle-os/core/services/turnrunner/runnerconfig"
)

// reapEnv is a real runner on an embedded NATS server and a connection
// that plays the gateway, the other runners (their leases)
// and the turns' past events. The claim loop's and the look-up's tests
// share it.
type reapEnv struct {
	t      *testing.T
	srv    *natstest.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	leases jetstream.KeyValue
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
	s := New(runnerconfig.Config{DataDir: e.t.TempDir(), LLMURL: "http://127.0.0.1:9/v1", RunnerID: "runner-under-test"},
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
		s.own.StopClaiming()
	}
	var err error
	ctx := context.Background()
	if e.leases, err = e.js.KeyValue(ctx, ownership.BucketLeases); err != nil {
		e.t.Fatal(err)
	}
	return s
}

// lease writes a turn's lease naming runner/incarnation; it returns its
// revision.
func (e *reapEnv) lease(turnID, runner, incarnation string) uint64 {
	e.t.Helper()
	body, _ := json.Marshal(ownership.Lease{Request: protocol.TurnRequest{TurnID: turnID, Workspace: "ws", Session: "s1"},
		Runner: runner, Incarnation: incarnation, Accepted: time.Now().UnixMilli()})
	rev, err := e.leases.Put(context.Background(), turnID, body)
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

// TestLaterRunnerDoesNotResumeAnEndedTurn: a turn's end is in its stream
// but its lease stayed (its runner died between the two writes, or an
// older gateway ended it). A runner that comes up later claims the turn,
// finds it ended and only cleans up: the lease goes, nothing more is
// published, and the session is free.
func TestLaterRunnerDoesNotResumeAnEndedTurn(t *testing.T) {
	e := newReapEnv(t)
	// The turn's state as the dead runner and the gateway left it.
	ctx := context.Background()
	js := e.js
	if _, err := bus.EnsureTurnStream(ctx, js, bus.TurnStreamConfig{}); err != nil {
		t.Fatal(err)
	}
	const id = "told-it-failed"
	leases, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: ownership.BucketLeases, History: 1,
		TTL: ownership.LeaseMaxAge, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	queue, err := sessionqueue.Open(ctx, js, sessionqueue.Config{Alive: func(context.Context, string) (bool, error) { return true, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(queue.Close)
	e.leases = leases
	e.lease(id, "dead", "inc-0")
	session := sessionqueue.Session{Workspace: "ws", Session: "s1"}
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

// TestOwnLeaseLeftBehindIsSettled: leases that name this runner as it is
// now but stand behind no turn here — a finished turn's, whose removal was
// lost in an election, and a failed start's, whose write landed while its
// answer was lost — would never be claimed by another runner. This runner
// settles both: the finished turn's lease goes with no event added, the
// failed start's turn gets the orphan error (it never ran).
func TestOwnLeaseLeftBehindIsSettled(t *testing.T) {
	e := newReapEnv(t)
	s := e.startRunner(true)
	const finished, failed = "own-finished", "own-failed"
	e.startMarker(finished, "ws")
	e.event(finished, protocol.EventToken, "")
	e.event(finished, protocol.EventDone, protocol.TurnEndMsgID(finished))
	_, n := e.last(finished)
	e.lease(finished, s.id, s.own.Incarnation())
	e.lease(failed, s.id, s.own.Incarnation())

	waitfor.True(t, "both leases settled", func() bool { return !e.hasLease(finished) && !e.hasLease(failed) })
	if last, k := e.last(finished); k != n || last.Header.Get(protocol.HeaderEvent) != protocol.EventDone {
		t.Errorf("the finished turn has %d events (had %d), the last %s", k, n, last.Header.Get(protocol.HeaderEvent))
	}
	m, k := e.last(failed)
	if m == nil || k != 1 || m.Header.Get(protocol.HeaderEvent) != protocol.EventError {
		t.Fatalf("the failed start's turn: %d events, want its orphan error only", k)
	}
}
