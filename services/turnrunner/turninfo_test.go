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
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/turnrunner/ownership"
	"github.com/waggle-os/core/services/turnrunner/runnerconfig"
)

// startMarker stores a turn's start marker naming its workspace.
func (e *reapEnv) startMarker(turnID, workspace string) {
	e.t.Helper()
	body, _ := json.Marshal(protocol.StartMarker{Runner: "gone", Workspace: workspace})
	m := &nats.Msg{Subject: protocol.TurnEvents(turnID), Data: body, Header: nats.Header{}}
	m.Header.Set(protocol.HeaderEvent, protocol.EventStart)
	if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
		e.t.Fatal(err)
	}
}

func (e *reapEnv) info(turnID string) (protocol.TurnInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return bus.Call(ctx, e.nc, protocol.LookupTurn, protocol.TurnInfoRequest{TurnID: turnID})
}

// TestLookupTurn: what a gateway is told about a turn, from the runners'
// lease and the turn's events — who owns it, whether it waits for an
// approval or ended, and its workspace even once its lease is gone; a turn
// nobody knows is unknown, and a bad id is refused.
func TestLookupTurn(t *testing.T) {
	e := newReapEnv(t)
	e.startRunner(false)

	// Accepted, nothing published yet: the lease says it all.
	e.lease("t-new", "r1", "i1")
	want := protocol.TurnInfo{State: protocol.TurnRunning, Runner: "r1", Workspace: "ws"}
	if got, err := e.info("t-new"); err != nil || got != want {
		t.Fatalf("accepted turn: %+v %v, want %+v", got, err, want)
	}

	// Waiting for an approval.
	e.lease("t-paused", "r2", "i2")
	e.event("t-paused", protocol.EventToken, "")
	e.event("t-paused", protocol.EventApprovalRequired, "")
	want = protocol.TurnInfo{State: protocol.TurnPaused, Runner: "r2", Workspace: "ws"}
	if got, err := e.info("t-paused"); err != nil || got != want {
		t.Fatalf("paused turn: %+v %v, want %+v", got, err, want)
	}

	// Ended, its lease gone: the workspace comes from the start marker.
	e.startMarker("t-done", "ws-b")
	e.event("t-done", protocol.EventToken, "")
	e.event("t-done", protocol.EventDone, "")
	want = protocol.TurnInfo{State: protocol.TurnEnded, Workspace: "ws-b"}
	if got, err := e.info("t-done"); err != nil || got != want {
		t.Fatalf("ended turn: %+v %v, want %+v", got, err, want)
	}

	// Events and no lease, not ended: followable, owned by nobody.
	e.startMarker("t-left", "ws-c")
	e.event("t-left", protocol.EventToken, "")
	want = protocol.TurnInfo{State: protocol.TurnRunning, Workspace: "ws-c"}
	if got, err := e.info("t-left"); err != nil || got != want {
		t.Fatalf("turn without a lease: %+v %v, want %+v", got, err, want)
	}

	if got, err := e.info("t-nobody"); err != nil || got.State != protocol.TurnUnknown || got.Workspace != "" {
		t.Fatalf("unknown turn: %+v %v", got, err)
	}
	if _, err := e.info("a b"); protocol.KindOf(err) != protocol.Invalid {
		t.Fatalf("bad id: %v, want Invalid", err)
	}
}

// TestRunnerEndsAnOrphan: a turn given up by its runner that no runner
// can take over (this one is full) is ended by a runner, once: its lease
// is removed and its stream gets the orphan error with the turn's end
// id, so its followers — who only watch the stream — stop.
func TestRunnerEndsAnOrphan(t *testing.T) {
	e := newReapEnv(t)
	s := New(runnerconfig.Config{DataDir: t.TempDir(), LLMURL: "http://127.0.0.1:9/v1", RunnerID: "full-runner", MaxTurns: 1},
		bus.Dialer(e.srv.Dial), slog.New(slog.DiscardHandler))
	s.orphanAfter = 50 * time.Millisecond
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Stop(ctx)
	})
	s.slots <- struct{}{} // full: it cannot take the turn over
	var err error
	if e.leases, err = e.js.KeyValue(context.Background(), ownership.BucketLeases); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(ownership.Lease{Request: protocol.TurnRequest{TurnID: "t-orphan", Workspace: "ws", Session: "s1", Message: "hi"},
		Released: true, Accepted: time.Now().UnixMilli()})
	if _, err := e.leases.Put(context.Background(), "t-orphan", body); err != nil {
		t.Fatal(err)
	}
	e.event("t-orphan", protocol.EventToken, "")
	waitfor.True(t, "the orphan's end in its stream", func() bool {
		m, _ := e.last("t-orphan")
		return m != nil && protocol.IsTerminal(m.Header.Get(protocol.HeaderEvent))
	})
	m, n := e.last("t-orphan")
	var data protocol.ErrorData
	_ = json.Unmarshal(m.Data, &data)
	if m.Header.Get(protocol.HeaderEvent) != protocol.EventError || data.Message != protocol.TurnOrphanedText || n != 2 {
		t.Fatalf("the turn ended with %s %q after %d events", m.Header.Get(protocol.HeaderEvent), data.Message, n)
	}
	if _, err := e.leases.Get(context.Background(), "t-orphan"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the orphan's lease: %v, want gone", err)
	}
	if got, err := e.info("t-orphan"); err != nil || got.State != protocol.TurnEnded {
		t.Fatalf("after the end: %+v %v", got, err)
	}
}
