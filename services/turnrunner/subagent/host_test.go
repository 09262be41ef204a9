package subagent

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
)

// TestHostRunsOnlyForTheTurnsRunner: who may hand a runner a sub-agent.
// A job naming a parent runner that does not run the turn (a forged or
// stale job: nobody answers the turn's probe, or another runner does) is
// refused before anything of the turn is read; a job from the turn's own
// runner is taken, and its end — here its environment failing to build —
// comes back on the sub-agent's events subject as an error result that
// names no internals.
func TestHostRunsOnlyForTheTurnsRunner(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Conn("host")
	var builds atomic.Int32
	var free atomic.Int32
	free.Store(1)
	h := &Host{Conn: nc, Runner: "r2", Log: slog.New(slog.DiscardHandler),
		Free:    func() int { return int(free.Load()) },
		Reserve: func() bool { return free.Add(-1) >= 0 }, Unreserve: func() { free.Add(1) },
		Build: func(context.Context, protocol.TurnRequest, string, func(string)) (Env, error) {
			builds.Add(1)
			return Env{}, errors.New("session store at 10.0.0.7 unreachable")
		}}
	if err := h.Start(); err != nil {
		t.Fatal(err)
	}
	defer h.Stop()

	job := Job{Turn: protocol.TurnRequest{TurnID: "t1", Workspace: "w", Session: "s"}, Parent: "r1",
		Info:  protocol.SubAgent{ID: "sub1", ParentTurnID: "t1"},
		Spawn: spawnWire{Name: "Scribe", Role: "custom", Task: "write"}, MaxSteps: 3, Timeout: time.Minute}
	place := func(j Job) placed {
		t.Helper()
		body, _ := json.Marshal(j)
		m, err := nc.Request(protocol.SubAgentRun("r2"), body, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var p placed
		if err := json.Unmarshal(m.Data, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// Nobody runs t1.
	if p := place(job); p.Accepted || p.Refused != "not the turn's runner" {
		t.Fatalf("job for a turn no runner runs: %+v", p)
	}
	// Another runner runs t1.
	owner := srv.Conn("owner")
	probe, err := owner.Subscribe(protocol.TurnControl("t1").Subject, func(m *nats.Msg) { _ = m.Respond([]byte("r3")) })
	if err != nil {
		t.Fatal(err)
	}
	if p := place(job); p.Accepted {
		t.Fatalf("job naming r1 for a turn r3 runs was taken: %+v", p)
	}
	if n := builds.Load(); n != 0 {
		t.Fatalf("a refused job read its turn's environment %d times", n)
	}
	_ = probe.Unsubscribe()

	// r1 runs t1: the job is taken, and its end comes back.
	if _, err := owner.Subscribe(protocol.TurnControl("t1").Subject, func(m *nats.Msg) { _ = m.Respond([]byte("r1")) }); err != nil {
		t.Fatal(err)
	}
	events := make(chan *nats.Msg, 16)
	if _, err := owner.ChanSubscribe(protocol.SubAgentEvents("sub1"), events); err != nil {
		t.Fatal(err)
	}
	if err := owner.Flush(); err != nil {
		t.Fatal(err)
	}
	if p := place(job); !p.Accepted {
		t.Fatalf("job of the turn's own runner refused: %+v", p)
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case <-timeout:
			t.Fatal("no result from the host")
		case m := <-events:
			var e envelope
			if err := json.Unmarshal(m.Data, &e); err != nil || e.Kind != kindResult {
				continue
			}
			if e.Result == nil || !strings.Contains(e.Result.Error, `sub-agent "Scribe" could not start`) || strings.Contains(e.Result.Error, "10.0.0.7") {
				t.Fatalf("result %+v", e.Result)
			}
			if e.Result.Runner != "r2" {
				t.Errorf("result from %q, want r2", e.Result.Runner)
			}
			h.Stop() // waits for the job's goroutine
			if free.Load() != 1 {
				t.Errorf("free slots after the job: %d, want 1 (its slot given back)", free.Load())
			}
			return
		}
	}
}

// TestHostRefusesWithoutRoom: a runner with no free turn slot refuses a
// sub-agent (its parent then runs it itself).
func TestHostRefusesWithoutRoom(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Conn("host")
	h := &Host{Conn: nc, Runner: "r2", Log: slog.New(slog.DiscardHandler),
		Free: func() int { return 0 }, Reserve: func() bool { return false }, Unreserve: func() {},
		Build: func(context.Context, protocol.TurnRequest, string, func(string)) (Env, error) {
			t.Error("a refused job was built")
			return Env{}, errors.New("no")
		}}
	if err := h.Start(); err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	owner := srv.Conn("owner")
	if _, err := owner.Subscribe(protocol.TurnControl("t1").Subject, func(m *nats.Msg) { _ = m.Respond([]byte("r1")) }); err != nil {
		t.Fatal(err)
	}
	if err := owner.Flush(); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(Job{Turn: protocol.TurnRequest{TurnID: "t1", Workspace: "w", Session: "s"}, Parent: "r1",
		Info: protocol.SubAgent{ID: "sub1", ParentTurnID: "t1"}, Spawn: spawnWire{Name: "S", Task: "x"}, MaxSteps: 1, Timeout: time.Minute})
	m, err := nc.Request(protocol.SubAgentRun("r2"), body, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var p placed
	if err := json.Unmarshal(m.Data, &p); err != nil || p.Accepted || p.Refused != "busy" {
		t.Fatalf("answer %s (%v), want refused busy", m.Data, err)
	}
}

// TestPlaceAsksOnlyWhenThereArePeers: a runner that knows it is alone
// (the desktop) keeps its sub-agents without asking anyone for room; with
// a peer that has more room, the sub-agent goes there.
func TestPlaceAsksOnlyWhenThereArePeers(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Conn("parent")
	other := srv.Conn("other")
	var asked atomic.Int32
	sub, err := other.Subscribe(protocol.SubjSubAgentRoom, func(m *nats.Msg) {
		asked.Add(1)
		body, _ := json.Marshal(room{Runner: "r2", Free: 4})
		_ = m.Respond(body)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := other.Flush(); err != nil {
		t.Fatal(err)
	}
	var peers atomic.Int32
	r := &Remote{Conn: nc, Runner: "r1", Free: func() int { return 1 }, Peers: func() int { return int(peers.Load()) },
		Log: slog.New(slog.DiscardHandler)}
	if got := r.place(context.Background()); got != "" || asked.Load() != 0 {
		t.Fatalf("alone: placed on %q after asking %d runners; want here, asking none", got, asked.Load())
	}
	peers.Store(1)
	if got := r.place(context.Background()); got != "r2" {
		t.Fatalf("with a roomier peer: placed on %q, want r2", got)
	}
}
