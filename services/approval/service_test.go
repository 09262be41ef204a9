package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
)

// env is a real embedded NATS server with an approval service on it and a
// client connection that plays the runner and the gateway.
type env struct {
	t    *testing.T
	dial bus.Dialer
	nc   *nats.Conn
	kv   jetstream.KeyValue
	svc  *Service
	cfg  Config
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	srv := natstest.Start(t)
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	e := &env{t: t, dial: bus.OptionDialer(srv.ConnectOption()), nc: srv.Conn("test-client"), cfg: cfg}
	e.start()
	js, err := jetstream.New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	if e.kv, err = js.KeyValue(context.Background(), protocol.BucketApprovals); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) start() {
	e.t.Helper()
	e.svc = New(e.cfg, e.dial, slog.New(slog.DiscardHandler))
	if err := e.svc.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	svc := e.svc
	e.t.Cleanup(func() { _ = svc.Stop(context.Background()) })
}

func (e *env) stop() {
	e.t.Helper()
	if err := e.svc.Stop(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

func request[Req, Rep any](e *env, ep protocol.Endpoint[Req, Rep], req Req) (Rep, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return bus.Call(ctx, e.nc, ep, req)
}

func (e *env) check(turn, workspace, tool, input string, autonomy protocol.Autonomy) protocol.ApprovalCheckReply {
	e.t.Helper()
	rep, err := request(e, protocol.CheckApproval, protocol.ApprovalCheckRequest{
		TurnID: turn, Workspace: workspace, Session: "s1", ToolName: tool, Input: json.RawMessage(input), Autonomy: autonomy,
	})
	if err != nil {
		e.t.Fatalf("check %s %s: %v", tool, input, err)
	}
	return rep
}

func (e *env) ask(turn, workspace, tool, input string) string {
	e.t.Helper()
	rep := e.check(turn, workspace, tool, input, protocol.Autonomy{})
	if rep.Action != protocol.ApprovalAsk || rep.RequestID == "" {
		e.t.Fatalf("check %s %s = %+v, want ask", tool, input, rep)
	}
	return rep.RequestID
}

func (e *env) decide(id string, approved, always bool, source *string) (protocol.ApprovalDecideReply, error) {
	return request(e, protocol.DecideApproval, protocol.ApprovalDecideRequest{
		RequestID: id, Approved: approved, Always: always, SourceWorkspaceID: source,
	})
}

func (e *env) entry(id string) protocol.PendingApproval {
	e.t.Helper()
	kve, err := e.kv.Get(context.Background(), id)
	if err != nil {
		e.t.Fatalf("get %s: %v", id, err)
	}
	var p protocol.PendingApproval
	if err := json.Unmarshal(kve.Value(), &p); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// outcome is "ok" for no error, else the error's kind.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	return protocol.KindOf(err).String()
}

func ptr(s string) *string { return &s }

func TestCheckDecisions(t *testing.T) {
	e := newEnv(t, Config{})
	future := time.Now().Add(time.Hour).UnixMilli()
	past := time.Now().Add(-time.Minute).UnixMilli()
	tests := []struct {
		name     string
		tool     string
		input    string
		autonomy protocol.Autonomy
		action   string
		step     string
	}{
		{"ungated tool runs silently", "read_file", `{"path":"a.txt"}`, protocol.Autonomy{}, protocol.ApprovalRun, ""},
		{"safe bash runs silently", "bash", `{"command":"ls -la"}`, protocol.Autonomy{}, protocol.ApprovalRun, ""},
		{"write_file asks in normal", "write_file", `{"path":"a.txt","content":"x"}`, protocol.Autonomy{}, protocol.ApprovalAsk, ""},
		{"trusted waives write_file", "write_file", `{"path":"a.txt"}`, protocol.Autonomy{Level: "trusted", ExpiresAt: future},
			protocol.ApprovalRun, "⚡ write_file auto-approved (trusted)"},
		{"trusted still asks for git_push", "git_push", `{}`, protocol.Autonomy{Level: "trusted"}, protocol.ApprovalAsk, ""},
		{"yolo waives git_push", "git_push", `{}`, protocol.Autonomy{Level: "yolo"}, protocol.ApprovalRun, "⚡ git_push auto-approved (yolo)"},
		{"expired yolo is normal", "write_file", `{"path":"a"}`, protocol.Autonomy{Level: "yolo", ExpiresAt: past}, protocol.ApprovalAsk, ""},
		{"sudo asks even in yolo", "bash", `{"command":"sudo rm x"}`, protocol.Autonomy{Level: "yolo"}, protocol.ApprovalAsk, ""},
		{"input that is not an object", "bash", `"ls"`, protocol.Autonomy{}, protocol.ApprovalAsk, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep := e.check("turn-1", "ws", tc.tool, tc.input, tc.autonomy)
			if rep.Action != tc.action || rep.Step != tc.step {
				t.Fatalf("reply %+v, want action %q step %q", rep, tc.action, tc.step)
			}
			if tc.action == protocol.ApprovalAsk {
				p := e.entry(rep.RequestID)
				if p.State != protocol.ApprovalStatePending || p.ToolName != tc.tool || p.TurnID != "turn-1" ||
					p.SourceWorkspaceID == nil || *p.SourceWorkspaceID != "ws" || p.Deadline != rep.Deadline {
					t.Fatalf("entry %+v", p)
				}
			}
		})
	}
}

func TestDecideOnceAndOnlyOnce(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.ask("turn-1", "ws", "write_file", `{"path":"a.txt"}`)
	if _, err := e.decide(id, true, false, nil); err != nil {
		t.Fatal(err)
	}
	if got := e.entry(id).State; got != protocol.ApprovalStateApproved {
		t.Fatalf("state %q", got)
	}
	_, err := e.decide(id, false, false, nil)
	if protocol.KindOf(err) != protocol.Conflict {
		t.Fatalf("second decision: %v, want 409", err)
	}
	if got := e.entry(id).State; got != protocol.ApprovalStateApproved {
		t.Fatalf("second decision changed the state to %q", got)
	}
	_, err = e.decide("nope", true, false, nil)
	if pe := protocol.AsError(err); pe == nil || pe.Kind != protocol.NotFound || pe.Message != "No pending approval with that ID" {
		t.Fatalf("unknown id: %v", err)
	}
	if _, err = e.decide("../x", true, false, nil); protocol.KindOf(err) != protocol.NotFound {
		t.Fatalf("invalid id: %v", err)
	}
}

func TestConcurrentDecisionsOneWins(t *testing.T) {
	e := newEnv(t, Config{})
	for round := range 5 {
		path := fmt.Sprintf("r%d.txt", round)
		id := e.ask("turn-1", "ws", "write_file", `{"path":"`+path+`"}`)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := e.decide(id, i%2 == 0, i%3 == 0, nil)
				switch outcome(err) {
				case "ok":
					wins.Add(1)
				case protocol.NotFound.String(), protocol.Conflict.String():
				default:
					t.Errorf("round %d: decide: %v", round, err)
				}
			}()
		}
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Fatalf("round %d: %d decisions won, want 1", round, n)
		}
		p := e.entry(id)
		if !protocol.ApprovalFinal(p.State) {
			t.Fatalf("round %d: state %q", round, p.State)
		}
		// Only the winning decision may leave a grant behind.
		gs, _ := request(e, protocol.ListGrants, protocol.Empty{})
		n := 0
		for _, g := range gs.Grants {
			if g.TargetKey == path {
				n++
			}
		}
		if want := map[bool]int{true: 1, false: 0}[p.Always]; n != want {
			t.Fatalf("round %d: %d grants for %s, winner always=%v", round, n, path, p.Always)
		}
	}
}

func TestAlwaysStoresGrantBeforeApproving(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.ask("turn-1", "ws", "write_file", `{"path":"a.txt"}`)
	rep, err := e.decide(id, true, true, ptr("ws"))
	if err != nil || !rep.Approved || !rep.Always {
		t.Fatalf("decide: %+v %v", rep, err)
	}
	if p := e.entry(id); p.State != protocol.ApprovalStateApproved || !p.Always {
		t.Fatalf("entry %+v", p)
	}
	gs, err := request(e, protocol.ListGrants, protocol.Empty{})
	if err != nil || len(gs.Grants) != 1 {
		t.Fatalf("grants %+v %v", gs, err)
	}
	g := gs.Grants[0]
	if g.ToolName != "write_file" || g.TargetKey != "a.txt" || g.SourceWorkspaceID == nil || *g.SourceWorkspaceID != "ws" ||
		g.Description != "Write to a.txt" || g.ExpiresAt != nil {
		t.Fatalf("grant %+v", g)
	}

	// The same call now passes with the grant step; another path, or the
	// same path in another workspace, still asks.
	if rep := e.check("turn-2", "ws", "write_file", `{"path":"a.txt","content":"new"}`, protocol.Autonomy{}); rep.Action != protocol.ApprovalRun ||
		rep.Step != "✔ write_file allowed by saved grant" {
		t.Fatalf("granted call: %+v", rep)
	}
	e.ask("turn-2", "ws", "write_file", `{"path":"b.txt"}`)
	e.ask("turn-2", "other", "write_file", `{"path":"a.txt"}`)

	// Revoke: asks again.
	if _, err := request(e, protocol.RevokeGrant, protocol.ApprovalRevokeRequest{ID: g.ID}); err != nil {
		t.Fatal(err)
	}
	e.ask("turn-3", "ws", "write_file", `{"path":"a.txt"}`)
	_, err = request(e, protocol.RevokeGrant, protocol.ApprovalRevokeRequest{ID: g.ID})
	if pe := protocol.AsError(err); pe == nil || pe.Kind != protocol.NotFound || pe.Message != "Grant not found" {
		t.Fatalf("second revoke: %v", err)
	}
}

func TestNullScopedGrantAppliesEverywhere(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.ask("turn-1", "ws", "git_commit", `{"message":"x"}`)
	if _, err := e.decide(id, true, true, nil); err != nil {
		t.Fatal(err)
	}
	for _, ws := range []string{"ws", "other", "default"} {
		if rep := e.check("turn-2", ws, "git_commit", `{"message":"y"}`, protocol.Autonomy{}); rep.Action != protocol.ApprovalRun {
			t.Fatalf("workspace %s: %+v", ws, rep)
		}
	}
	if _, err := request(e, protocol.ClearGrants, protocol.Empty{}); err != nil {
		t.Fatal(err)
	}
	e.ask("turn-3", "ws", "git_commit", `{}`)
}

func TestDenyWithAlwaysStoresNoGrant(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.ask("turn-1", "ws", "write_file", `{"path":"a.txt"}`)
	if _, err := e.decide(id, false, true, ptr("ws")); err != nil {
		t.Fatal(err)
	}
	if st := e.entry(id).State; st != protocol.ApprovalStateDenied {
		t.Fatalf("state %q", st)
	}
	gs, _ := request(e, protocol.ListGrants, protocol.Empty{})
	if len(gs.Grants) != 0 {
		t.Fatalf("grants %+v", gs.Grants)
	}
}

func TestSweeperTimesOutWithoutARunner(t *testing.T) {
	e := newEnv(t, Config{Timeout: 200 * time.Millisecond, SweepInterval: 20 * time.Millisecond})
	id := e.ask("turn-1", "ws", "write_file", `{"path":"a.txt"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w, err := e.kv.Watch(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for kve := range w.Updates() {
		if kve == nil {
			continue
		}
		var p protocol.PendingApproval
		_ = json.Unmarshal(kve.Value(), &p)
		if p.State == protocol.ApprovalStateTimedOut {
			break
		}
		if protocol.ApprovalFinal(p.State) {
			t.Fatalf("state %q", p.State)
		}
	}
	if ctx.Err() != nil {
		t.Fatal("not timed out within 5s")
	}
	if _, err := e.decide(id, true, false, nil); protocol.KindOf(err) != protocol.NotFound {
		t.Fatalf("decide after timeout: %v, want 404 (no longer pending)", err)
	}
	pend, _ := request(e, protocol.ListPendingApprovals, protocol.Empty{})
	if len(pend.Pending) != 0 {
		t.Fatalf("pending %+v", pend.Pending)
	}
}

func TestDecideAfterDeadlineIsNotAnApproval(t *testing.T) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	// A long sweep interval: the decision, not the sweeper, sees the deadline.
	e := newEnv(t, Config{Timeout: time.Minute, SweepInterval: time.Hour, Now: clock})
	id := e.ask("turn-1", "ws", "write_file", `{"path":"a.txt"}`)
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	if _, err := e.decide(id, true, true, nil); protocol.KindOf(err) != protocol.NotFound {
		t.Fatalf("late decision: %v, want 404", err)
	}
	if st := e.entry(id).State; st != protocol.ApprovalStateTimedOut {
		t.Fatalf("state %q", st)
	}
	gs, _ := request(e, protocol.ListGrants, protocol.Empty{})
	if len(gs.Grants) != 0 {
		t.Fatalf("a late always-approval stored a grant: %+v", gs.Grants)
	}
}

func TestResolveKeepsTheWinner(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.ask("turn-1", "ws", "write_file", `{"path":"a.txt"}`)
	rep, err := request(e, protocol.ResolveApproval,
		protocol.ApprovalResolveRequest{RequestID: id, Outcome: protocol.ApprovalStateTimedOut})
	if err != nil || rep.State != protocol.ApprovalStateTimedOut {
		t.Fatalf("resolve: %+v %v", rep, err)
	}

	id = e.ask("turn-1", "ws", "write_file", `{"path":"a.txt"}`)
	if _, err := e.decide(id, true, false, nil); err != nil {
		t.Fatal(err)
	}
	rep, err = request(e, protocol.ResolveApproval,
		protocol.ApprovalResolveRequest{RequestID: id, Outcome: protocol.ApprovalStateTimedOut})
	if err != nil || rep.State != protocol.ApprovalStateApproved {
		t.Fatalf("resolve after approval: %+v %v", rep, err)
	}
	if _, err := request(e, protocol.ResolveApproval,
		protocol.ApprovalResolveRequest{RequestID: id, Outcome: protocol.ApprovalStateApproved}); protocol.KindOf(err) != protocol.Invalid {
		t.Fatalf("a runner must not approve: %v", err)
	}
}

func TestCancelTurnOnlyTouchesThatTurn(t *testing.T) {
	e := newEnv(t, Config{})
	a1 := e.ask("turn-a", "ws", "write_file", `{"path":"1"}`)
	a2 := e.ask("turn-a", "ws", "write_file", `{"path":"2"}`)
	b := e.ask("turn-b", "ws", "write_file", `{"path":"3"}`)
	rep, err := request(e, protocol.CancelTurnApprovals, protocol.ApprovalCancelTurnRequest{TurnID: "turn-a"})
	if err != nil || rep.Cancelled != 2 {
		t.Fatalf("cancel: %+v %v", rep, err)
	}
	for id, want := range map[string]string{a1: protocol.ApprovalStateCancelled, a2: protocol.ApprovalStateCancelled, b: protocol.ApprovalStatePending} {
		if st := e.entry(id).State; st != want {
			t.Errorf("%s: state %q, want %q", id, st, want)
		}
	}
	if _, err := e.decide(a1, true, false, nil); protocol.KindOf(err) != protocol.NotFound {
		t.Fatalf("decide a cancelled approval: %v, want 404 (no longer pending)", err)
	}
}

func TestPendingListsOnlyWaitingOldestFirst(t *testing.T) {
	// Every reading of the clock is a millisecond later: the approvals
	// get distinct timestamps in the order they were asked.
	var ms atomic.Int64
	start := time.Now()
	clock := func() time.Time { return start.Add(time.Duration(ms.Add(1)) * time.Millisecond) }
	e := newEnv(t, Config{Now: clock})
	first := e.ask("turn-1", "ws", "write_file", `{"path":"1"}`)
	decided := e.ask("turn-1", "ws", "write_file", `{"path":"2"}`)
	last := e.ask("turn-2", "ws", "bash", `{"command":"rm x"}`)
	if _, err := e.decide(decided, false, false, nil); err != nil {
		t.Fatal(err)
	}
	rep, err := request(e, protocol.ListPendingApprovals, protocol.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Pending) != 2 || rep.Pending[0].RequestID != first || rep.Pending[1].RequestID != last {
		t.Fatalf("pending %+v", rep.Pending)
	}
	if string(rep.Pending[1].Input) != `{"command":"rm x"}` || rep.Pending[1].ToolName != "bash" || rep.Pending[1].Timestamp == 0 {
		t.Fatalf("entry %+v", rep.Pending[1])
	}
}

func TestRestartLosesNothing(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.ask("turn-1", "ws", "write_file", `{"path":"a.txt"}`)
	e.stop()
	if _, err := e.decide(id, true, false, nil); !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("decide with no service: %v, want unavailable", err)
	}
	e.start()
	pend, err := request(e, protocol.ListPendingApprovals, protocol.Empty{})
	if err != nil || len(pend.Pending) != 1 || pend.Pending[0].RequestID != id {
		t.Fatalf("pending after restart: %+v %v", pend, err)
	}
	if _, err := e.decide(id, true, false, nil); err != nil {
		t.Fatalf("decide after restart: %v", err)
	}
}

func TestRetentionRemovesDecidedEntries(t *testing.T) {
	e := newEnv(t, Config{SweepInterval: 20 * time.Millisecond, Retention: 50 * time.Millisecond})
	id := e.ask("turn-1", "ws", "write_file", `{"path":"a.txt"}`)
	if _, err := e.decide(id, false, false, nil); err != nil {
		t.Fatal(err)
	}
	waitfor.NoError(t, "decided entry removed", func() error {
		_, err := e.kv.Get(context.Background(), id)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			return nil
		}
		return fmt.Errorf("entry still there (get: %v)", err)
	})
	if _, err := e.decide(id, true, false, nil); protocol.KindOf(err) != protocol.NotFound {
		t.Fatalf("decide removed entry: %v", err)
	}
}
