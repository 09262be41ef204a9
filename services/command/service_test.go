package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
)

// env is a real embedded NATS server with the command service on it, a
// session store and a turn runner played by the test (bus services on
// their own connections), and a client connection.
type env struct {
	t   *testing.T
	nc  *nats.Conn
	js  jetstream.JetStream
	svc *Service

	groups map[string]protocol.AgentGroup
	// reply is the turn runner's behaviour: the done event's content for
	// a turn, or ok=false for a turn that never ends.
	reply func(req protocol.TurnRequest) (content string, ok bool)

	mu    sync.Mutex
	turns []protocol.TurnRequest
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := natstest.Start(t)
	e := &env{t: t, nc: srv.Conn("client"), groups: map[string]protocol.AgentGroup{},
		reply: func(req protocol.TurnRequest) (string, bool) { return "out of " + req.Session, true }}
	var err error
	if e.js, err = jetstream.New(e.nc); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.EnsureTurnStream(context.Background(), e.js, bus.TurnStreamConfig{}); err != nil {
		t.Fatal(err)
	}
	e.fakeStore(srv)
	e.fakeRunner(srv)
	e.svc = New(Config{DataDir: t.TempDir()}, srv.Dial, slog.New(slog.DiscardHandler))
	if err := e.svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.svc.Stop(context.Background()) })
	return e
}

func (e *env) service(srv *natstest.Server, name string) *bus.Service {
	e.t.Helper()
	s, err := bus.NewService(srv.Conn(name), bus.ServiceConfig{Name: name, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

func (e *env) fakeStore(srv *natstest.Server) {
	s := e.service(srv, protocol.ServiceSessionStore)
	must(e.t, bus.Handle(s, protocol.GetGroup, func(_ context.Context, r protocol.AgentGroupRef) (protocol.AgentGroup, error) {
		g, ok := e.groups[r.ID]
		if !ok {
			return g, &protocol.Error{Kind: protocol.NotFound, Message: "Group not found"}
		}
		return g, nil
	}))
	must(e.t, bus.Handle(s, protocol.SearchMemory, func(_ context.Context, r protocol.MemorySearchRequest) (protocol.MemorySearchReply, error) {
		if r.Workspace == "broken" {
			return protocol.MemorySearchReply{}, errors.New("disk full")
		}
		return protocol.MemorySearchReply{Memories: []protocol.Memory{{Content: "ADR: " + r.Query}, {Content: "notes"}}}, nil
	}))
}

// fakeRunner publishes a turn's events to the turn stream as a runner
// does, before it answers the start.
func (e *env) fakeRunner(srv *natstest.Server) {
	s := e.service(srv, protocol.ServiceTurnRunner)
	must(e.t, bus.Handle(s, protocol.StartTurn, func(ctx context.Context, r protocol.TurnRequest) (protocol.TurnStarted, error) {
		e.mu.Lock()
		e.turns = append(e.turns, r)
		e.mu.Unlock()
		content, ok := e.reply(r)
		if ok {
			for _, ev := range []struct{ name, data string }{
				{protocol.EventToken, `{"content":"tok "}`},
				{protocol.EventDone, fmt.Sprintf(`{"content":%q}`, content)},
			} {
				m := &nats.Msg{Subject: protocol.TurnEvents(r.TurnID), Header: nats.Header{protocol.HeaderEvent: {ev.name}}, Data: []byte(ev.data)}
				if _, err := e.js.PublishMsg(ctx, m); err != nil {
					return protocol.TurnStarted{}, err
				}
			}
		}
		return protocol.TurnStarted{TurnID: r.TurnID}, nil
	}))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ask[Req, Rep any](e *env, ep protocol.Endpoint[Req, Rep], req Req) (Rep, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return bus.Call(ctx, e.nc, ep, req)
}

func (e *env) job(groupID, jobID string) protocol.GroupJob {
	e.t.Helper()
	job, err := ask(e, protocol.GetGroupJob, protocol.GroupJobRequest{GroupID: groupID, JobID: jobID})
	if err != nil {
		e.t.Fatalf("read job %s: %v", jobID, err)
	}
	return job
}

func (e *env) finished(groupID, jobID string) protocol.GroupJob {
	e.t.Helper()
	var job protocol.GroupJob
	waitfor.True(e.t, "job "+jobID+" finished", func() bool {
		job = e.job(groupID, jobID)
		return job.FinishedAt != ""
	})
	return job
}

func TestExecuteSearchesTheStoresMemory(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, workspace, want string
	}{
		{"results", "ws", "## Memory Search: \"architecture\"\n\n1. ADR: architecture\n2. notes"},
		{"store failure reads as unavailable", "broken", "## Memory Search: \"architecture\"\n\n" + "Memory search unavailable."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := ask(e, protocol.ExecuteCommand, protocol.CommandRequest{Command: "/memory architecture", Workspace: tc.workspace})
			if err != nil || rep.Result != tc.want {
				t.Fatalf("reply %q, %v\nwant %q", rep.Result, err, tc.want)
			}
		})
	}
	_, err := ask(e, protocol.ExecuteCommand, protocol.CommandRequest{Command: "/help", Workspace: "../x"})
	if pe := protocol.AsError(err); pe == nil || pe.Kind != protocol.Invalid {
		t.Fatalf("bad workspace: %v", err)
	}
}

func TestGroupRunChecksBeforeQueueing(t *testing.T) {
	e := newEnv(t)
	e.groups["g1"] = protocol.AgentGroup{ID: "g1", Name: "G", Strategy: protocol.StrategySequential}
	tests := []struct {
		name string
		req  protocol.GroupRunRequest
		kind protocol.Kind
	}{
		{"unknown group", protocol.GroupRunRequest{GroupID: "nope", Task: "x"}, protocol.NotFound},
		{"invalid group id", protocol.GroupRunRequest{GroupID: "../g", Task: "x"}, protocol.NotFound},
		{"no task", protocol.GroupRunRequest{GroupID: "g1", Task: "  "}, protocol.Invalid},
		{"bad workspace", protocol.GroupRunRequest{GroupID: "g1", Task: "x", Workspace: "a/b"}, protocol.Invalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ask(e, protocol.RunGroup, tc.req)
			if pe := protocol.AsError(err); pe == nil || pe.Kind != tc.kind {
				t.Fatalf("err %v, want %s", err, tc.kind)
			}
		})
	}
}

// A sequential run hands each member's output to the next, and its result
// is the last member's output.
func TestSequentialGroupRun(t *testing.T) {
	e := newEnv(t)
	e.groups["g1"] = protocol.AgentGroup{ID: "g1", Name: "Writers", Strategy: protocol.StrategySequential, Members: []protocol.AgentGroupMember{
		{AgentID: "drafter", RoleInGroup: "worker", ExecutionOrder: 1}, {AgentID: "editor", RoleInGroup: "worker", ExecutionOrder: 2},
	}}
	queued, err := ask(e, protocol.RunGroup, protocol.GroupRunRequest{GroupID: "g1", Task: "write it", Workspace: "ws"})
	if err != nil || queued.Status != protocol.JobQueued || len(queued.Steps) != 2 {
		t.Fatalf("queued %+v, %v", queued, err)
	}
	job := e.finished("g1", queued.JobID)
	if job.Status != protocol.JobCompleted || job.Result != "out of "+job.Steps[1].Session {
		t.Fatalf("job %+v", job)
	}
	for i, st := range job.Steps {
		if st.Status != protocol.JobCompleted || st.Output != "out of "+st.Session || st.TurnID == "" {
			t.Fatalf("step %d %+v", i, st)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.turns) != 2 || e.turns[0].Workspace != "ws" || !strings.Contains(e.turns[1].Message, "Output of the previous member, agent \"drafter\":\nout of "+job.Steps[0].Session) {
		t.Fatalf("turns %+v", e.turns)
	}
	if _, err := ask(e, protocol.GetGroupJob, protocol.GroupJobRequest{GroupID: "other", JobID: queued.JobID}); protocol.KindOf(err) != protocol.NotFound {
		t.Fatalf("job read through another group: %v", err)
	}
}

// Stopping the service under a running group run ends it: the job is
// marked failed (later steps skipped), the member turn is cancelled on its
// runner, and no goroutine of the run is left (TestMain's leak check).
func TestStopInterruptsARunningGroupRun(t *testing.T) {
	e := newEnv(t)
	e.reply = func(protocol.TurnRequest) (string, bool) { return "", false }
	e.groups["g1"] = protocol.AgentGroup{ID: "g1", Name: "Slow", Strategy: protocol.StrategySequential, Members: []protocol.AgentGroupMember{
		{AgentID: "a", ExecutionOrder: 1}, {AgentID: "b", ExecutionOrder: 2},
	}}
	cancels, err := e.nc.SubscribeSync(protocol.TurnControl("*").Subject)
	must(t, err)
	must(t, e.nc.Flush())
	queued, err := ask(e, protocol.RunGroup, protocol.GroupRunRequest{GroupID: "g1", Task: "t"})
	must(t, err)
	var running protocol.GroupJob
	waitfor.True(t, "first step running", func() bool {
		running = e.job("g1", queued.JobID)
		return running.Steps[0].Status == protocol.JobRunning
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.svc.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	kv, err := e.js.KeyValue(ctx, protocol.BucketGroupJobs)
	must(t, err)
	entry, err := kv.Get(ctx, queued.JobID)
	must(t, err)
	var job protocol.GroupJob
	must(t, json.Unmarshal(entry.Value(), &job))
	if job.Status != protocol.JobFailed || job.Error != `agent "a" failed: interrupted: the command service stopped` ||
		job.Steps[0].Status != protocol.JobFailed || job.Steps[1].Status != protocol.StepSkipped || job.FinishedAt == "" {
		t.Fatalf("job after stop %+v", job)
	}
	m, err := cancels.NextMsg(5 * time.Second)
	if err != nil || m.Subject != protocol.TurnControl(running.Steps[0].TurnID).Subject {
		t.Fatalf("cancel of the member turn: %v %v", m, err)
	}
	var ctl protocol.TurnControlMsg
	if json.Unmarshal(m.Data, &ctl) != nil || ctl.Action != protocol.ControlCancel {
		t.Fatalf("control %s", m.Data)
	}
}

// A user's cancel stops a running group run whichever command service
// answers it: the job is cancelled at once and stays so (the run's later
// writes keep it), the running member turn is cancelled on its runner,
// later steps never start, and a second cancel is the original's 409.
func TestCancelStopsARunningGroupRun(t *testing.T) {
	e := newEnv(t)
	// A second instance on the same bus: the cancel may reach either.
	other := New(Config{DataDir: t.TempDir()}, e.svc.dial, slog.New(slog.DiscardHandler))
	must(t, other.Start(context.Background()))
	t.Cleanup(func() { _ = other.Stop(context.Background()) })
	e.reply = func(protocol.TurnRequest) (string, bool) { return "", false }
	e.groups["g1"] = protocol.AgentGroup{ID: "g1", Name: "Slow", Strategy: protocol.StrategySequential, Members: []protocol.AgentGroupMember{
		{AgentID: "a", ExecutionOrder: 1}, {AgentID: "b", ExecutionOrder: 2},
	}}
	cancels, err := e.nc.SubscribeSync(protocol.TurnControl("*").Subject)
	must(t, err)
	must(t, e.nc.Flush())
	queued, err := ask(e, protocol.RunGroup, protocol.GroupRunRequest{GroupID: "g1", Task: "t"})
	must(t, err)
	var running protocol.GroupJob
	waitfor.True(t, "first step running", func() bool {
		running = e.job("g1", queued.JobID)
		return running.Steps[0].Status == protocol.JobRunning
	})

	rep, err := ask(e, protocol.CancelGroupJob, protocol.GroupJobRequest{JobID: queued.JobID})
	if err != nil || !rep.Cancelled || rep.JobID != queued.JobID {
		t.Fatalf("cancel: %+v %v", rep, err)
	}
	if job := e.job("g1", queued.JobID); job.Status != protocol.JobCancelled {
		t.Fatalf("job right after the cancel: %+v", job)
	}
	m, err := cancels.NextMsg(10 * time.Second)
	if err != nil || m.Subject != protocol.TurnControl(running.Steps[0].TurnID).Subject {
		t.Fatalf("cancel of the member turn: %v %v", m, err)
	}
	waitfor.True(t, "the run ended", func() bool {
		for _, s := range []*Service{e.svc, other} {
			s.activeMu.Lock()
			n := len(s.active)
			s.activeMu.Unlock()
			if n > 0 {
				return false
			}
		}
		return true
	})
	job := e.job("g1", queued.JobID)
	if job.Status != protocol.JobCancelled || job.Error != "Cancelled by user" || job.FinishedAt == "" ||
		job.Steps[0].Status != protocol.JobCancelled || job.Steps[1].Status != protocol.StepSkipped {
		t.Fatalf("job after the run ended %+v", job)
	}
	e.mu.Lock()
	turns := len(e.turns)
	e.mu.Unlock()
	if turns != 1 {
		t.Fatalf("%d member turns started, want 1 (the second member never starts)", turns)
	}
	_, err = ask(e, protocol.CancelGroupJob, protocol.GroupJobRequest{JobID: queued.JobID})
	if pe := protocol.AsError(err); pe == nil || pe.Kind != protocol.Conflict || pe.Message != `Cannot cancel job with status "cancelled"` {
		t.Fatalf("second cancel: %v", err)
	}
}

// A finished job cannot be cancelled; an unknown one is not found; a job
// left running by a command service that crashed is cancelled all the
// same (no instance runs it, the bucket is the truth).
func TestCancelRefusesAndOrphans(t *testing.T) {
	e := newEnv(t)
	e.groups["g1"] = protocol.AgentGroup{ID: "g1", Name: "Quick", Strategy: protocol.StrategySequential, Members: []protocol.AgentGroupMember{{AgentID: "a"}}}
	queued, err := ask(e, protocol.RunGroup, protocol.GroupRunRequest{GroupID: "g1", Task: "t"})
	must(t, err)
	e.finished("g1", queued.JobID)
	_, err = ask(e, protocol.CancelGroupJob, protocol.GroupJobRequest{JobID: queued.JobID})
	if pe := protocol.AsError(err); pe == nil || pe.Kind != protocol.Conflict || pe.Message != `Cannot cancel job with status "completed"` {
		t.Fatalf("cancel of a completed job: %v", err)
	}
	for _, id := range []string{"no-such-job", "../x"} {
		if _, err := ask(e, protocol.CancelGroupJob, protocol.GroupJobRequest{JobID: id}); protocol.KindOf(err) != protocol.NotFound {
			t.Fatalf("cancel %q: %v", id, err)
		}
	}

	orphan := protocol.GroupJob{JobID: "orphan-1", GroupID: "g1", Status: protocol.JobRunning,
		Steps: []protocol.GroupJobStep{{AgentID: "a", Status: protocol.JobRunning}, {AgentID: "b", Status: protocol.StepPending}}}
	data, err := json.Marshal(orphan)
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := e.js.KeyValue(ctx, protocol.BucketGroupJobs)
	must(t, err)
	_, err = kv.Put(ctx, orphan.JobID, data)
	must(t, err)
	if rep, err := ask(e, protocol.CancelGroupJob, protocol.GroupJobRequest{JobID: orphan.JobID}); err != nil || !rep.Cancelled {
		t.Fatalf("cancel of an orphan: %+v %v", rep, err)
	}
	job := e.job("", orphan.JobID)
	if job.Status != protocol.JobCancelled || job.Steps[0].Status != protocol.JobCancelled || job.Steps[1].Status != protocol.StepSkipped {
		t.Fatalf("orphan after cancel %+v", job)
	}
}
