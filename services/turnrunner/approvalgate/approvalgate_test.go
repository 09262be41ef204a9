package approvalgate

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/turnrunner/agent"
)

// fakeService plays the approval service on a real embedded NATS server:
// check answers with the reply the test sets (creating the pending entry
// for an "ask", as the real service does), resolve and cancelturn
// compare-and-set the entry, a final state is announced on its decision
// subject, and state reads the entry. The real service's rules are tested in its own
// module; this tests the runner's side of the protocol.
type fakeService struct {
	t   *testing.T
	nc  *nats.Conn
	kv  jetstream.KeyValue
	svc *bus.Service

	mu        sync.Mutex
	reply     protocol.ApprovalCheckReply
	deadline  time.Duration
	checks    []protocol.ApprovalCheckRequest
	cancelled []string
	// onState, when set, runs in each state request before it is answered;
	// what it returns is the answer.
	onState func(id string, stored protocol.ApprovalStateReply) protocol.ApprovalStateReply
	states  int // state requests served
	// onMissing, when set, runs in each state request for an entry the
	// bucket does not have.
	onMissing func(id string)
	// onCheck, when set, runs in each check before the entry is created.
	onCheck func()
	created []string // ids of the entries checks created
}

type env struct {
	nc   *nats.Conn
	fake *fakeService
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dial := bus.OptionDialer(natstest.Start(t).ConnectOption())
	runner, err := dial("runner")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(runner.Close)
	svcConn, err := dial("fake-approval")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svcConn.Close)
	js, err := jetstream.New(svcConn)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: protocol.BucketApprovals, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeService{t: t, nc: svcConn, kv: kv, deadline: time.Minute}
	f.start()
	t.Cleanup(f.stop)
	return &env{nc: runner, fake: f}
}

func (f *fakeService) start() {
	f.t.Helper()
	if err := f.startErr(); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeService) startErr() error {
	svc, err := bus.NewService(f.nc, bus.ServiceConfig{Name: protocol.ServiceApproval, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.svc = svc
	f.mu.Unlock()
	return errors.Join(
		bus.Handle(svc, protocol.CheckApproval, f.check),
		bus.Handle(svc, protocol.ResolveApproval, f.resolve),
		bus.Handle(svc, protocol.GetApprovalState, f.state),
		bus.Handle(svc, protocol.CancelTurnApprovals, f.cancelTurn),
		f.nc.Flush(),
	)
}

func (f *fakeService) stop() {
	f.mu.Lock()
	svc := f.svc
	f.mu.Unlock()
	_ = svc.Stop(context.Background())
	_ = f.nc.Flush()
}

func (f *fakeService) set(reply protocol.ApprovalCheckReply) {
	f.mu.Lock()
	f.reply = reply
	f.mu.Unlock()
}

func (f *fakeService) check(ctx context.Context, req protocol.ApprovalCheckRequest) (protocol.ApprovalCheckReply, error) {
	f.mu.Lock()
	rep, d, onCheck := f.reply, f.deadline, f.onCheck
	f.checks = append(f.checks, req)
	f.mu.Unlock()
	if onCheck != nil {
		onCheck()
	}
	if rep.Action != protocol.ApprovalAsk {
		return rep, nil
	}
	now := time.Now()
	rep.RequestID = protocol.NewUUID()
	rep.Deadline = now.Add(d).UnixMilli()
	ws := req.Workspace
	e := protocol.PendingApproval{
		RequestID: rep.RequestID, TurnID: req.TurnID, Workspace: req.Workspace, ToolName: req.ToolName, Input: req.Input,
		SourceWorkspaceID: &ws, Timestamp: now.UnixMilli(), Deadline: rep.Deadline, State: protocol.ApprovalStatePending,
	}
	data, _ := json.Marshal(e)
	if _, err := f.kv.Create(ctx, e.RequestID, data); err != nil {
		return protocol.ApprovalCheckReply{}, err
	}
	f.mu.Lock()
	f.created = append(f.created, e.RequestID)
	f.mu.Unlock()
	return rep, nil
}

func (f *fakeService) createdIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.created...)
}

// setState is a compare-and-set of a non-final entry to state, announced
// as the real service does; it returns the final state.
func (f *fakeService) setState(ctx context.Context, id, state string) (string, error) {
	st, changed, err := f.writeState(ctx, id, state)
	if err == nil && changed {
		body, _ := json.Marshal(protocol.ApprovalDecidedEvent{RequestID: id, State: st})
		err = errors.Join(f.nc.Publish(protocol.ApprovalDecided(id).Subject, body), f.nc.Flush())
	}
	return st, err
}

// writeState is setState without the announcement (a service that died
// between its write and its publish); changed reports that it wrote.
func (f *fakeService) writeState(ctx context.Context, id, state string) (final string, changed bool, err error) {
	for {
		kve, err := f.kv.Get(ctx, id)
		if err != nil {
			return "", false, err
		}
		var e protocol.PendingApproval
		if err := json.Unmarshal(kve.Value(), &e); err != nil {
			return "", false, err
		}
		if protocol.ApprovalFinal(e.State) {
			return e.State, false, nil
		}
		e.State = state
		data, _ := json.Marshal(e)
		if _, err := f.kv.Update(ctx, id, data, kve.Revision()); errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue
		} else if err != nil {
			return "", false, err
		}
		return state, true, nil
	}
}

func (f *fakeService) state(ctx context.Context, req protocol.ApprovalStateRequest) (protocol.ApprovalStateReply, error) {
	kve, err := f.kv.Get(ctx, req.RequestID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		f.mu.Lock()
		hook := f.onMissing
		f.mu.Unlock()
		if hook != nil {
			hook(req.RequestID)
		}
		return protocol.ApprovalStateReply{}, &protocol.Error{Kind: protocol.NotFound, Message: "No pending approval with that ID"}
	}
	if err != nil {
		return protocol.ApprovalStateReply{}, err
	}
	var e protocol.PendingApproval
	if err := json.Unmarshal(kve.Value(), &e); err != nil {
		return protocol.ApprovalStateReply{}, err
	}
	rep := protocol.ApprovalStateReply{State: e.State}
	f.mu.Lock()
	f.states++
	hook := f.onState
	f.mu.Unlock()
	if hook != nil {
		rep = hook(req.RequestID, rep)
	}
	return rep, nil
}

func (f *fakeService) resolve(ctx context.Context, req protocol.ApprovalResolveRequest) (protocol.ApprovalResolveReply, error) {
	st, err := f.setState(ctx, req.RequestID, req.Outcome)
	return protocol.ApprovalResolveReply{State: st}, err
}

func (f *fakeService) cancelTurn(ctx context.Context, req protocol.ApprovalCancelTurnRequest) (protocol.ApprovalCancelTurnReply, error) {
	f.mu.Lock()
	f.cancelled = append(f.cancelled, req.TurnID)
	f.mu.Unlock()
	keys, err := f.kv.ListKeys(ctx)
	if err != nil {
		return protocol.ApprovalCancelTurnReply{}, err
	}
	n := 0
	for id := range keys.Keys() {
		if e := f.entry(ctx, id); e.TurnID == req.TurnID && e.State == protocol.ApprovalStatePending {
			if _, err := f.setState(ctx, id, protocol.ApprovalStateCancelled); err == nil {
				n++
			}
		}
	}
	return protocol.ApprovalCancelTurnReply{Cancelled: n}, nil
}

func (f *fakeService) entry(ctx context.Context, id string) protocol.PendingApproval {
	kve, err := f.kv.Get(ctx, id)
	if err != nil {
		f.t.Errorf("get %s: %v", id, err)
		return protocol.PendingApproval{}
	}
	var e protocol.PendingApproval
	_ = json.Unmarshal(kve.Value(), &e)
	return e
}

func (f *fakeService) cancelledTurns() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.cancelled...)
}

// recorder is the turn's event stream.
type recorder struct {
	mu     sync.Mutex
	events []emitted
	asked  chan protocol.ApprovalRequiredData
}

type emitted struct {
	name string
	data any
}

func newRecorder() *recorder { return &recorder{asked: make(chan protocol.ApprovalRequiredData, 8)} }

func (r *recorder) Emit(event string, data any) error {
	r.mu.Lock()
	r.events = append(r.events, emitted{event, data})
	r.mu.Unlock()
	if d, ok := data.(protocol.ApprovalRequiredData); ok {
		r.asked <- d
	}
	return nil
}

// steps returns the step texts and names of the events in order.
func (r *recorder) log() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		switch d := e.data.(type) {
		case protocol.TokenData:
			out = append(out, e.name+":"+d.Content)
		case protocol.ApprovalRequiredData:
			out = append(out, e.name+":"+d.ToolName)
		default:
			out = append(out, e.name)
		}
	}
	return out
}

func (r *recorder) waitAsked(t *testing.T) protocol.ApprovalRequiredData {
	t.Helper()
	select {
	case d := <-r.asked:
		return d
	case <-time.After(5 * time.Second):
		t.Fatal("no approval_required within 5s")
	}
	return protocol.ApprovalRequiredData{}
}

var writeCall = agent.ToolCall{ID: "call-1", Name: "write_file", Input: json.RawMessage(`{"path":"a.txt","content":"hi"}`)}

func newGate(e *env, rec *recorder, cfg Config) *Gate {
	cfg.Logger = slog.New(slog.DiscardHandler)
	return New(e.nc, Turn{TurnID: "turn-1", Workspace: "ws", Session: "s1", Autonomy: protocol.Autonomy{Level: "trusted"}}, rec, cfg)
}

type result struct {
	v   agent.Verdict
	err error
}

func checkAsync(g *Gate, ctx context.Context) <-chan result {
	ch := make(chan result, 1)
	go func() {
		v, err := g.Check(ctx, writeCall)
		ch <- result{v, err}
	}()
	return ch
}

func await(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("Check did not return within 10s")
	}
	return result{}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRunVerdicts(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name  string
		reply protocol.ApprovalCheckReply
		log   []string
	}{
		{"silent", protocol.ApprovalCheckReply{Action: protocol.ApprovalRun}, nil},
		{"auto-approved", protocol.ApprovalCheckReply{Action: protocol.ApprovalRun, Step: "⚡ write_file auto-approved (trusted)"},
			[]string{"step:⚡ write_file auto-approved (trusted)"}},
		{"grant", protocol.ApprovalCheckReply{Action: protocol.ApprovalRun, Step: "✔ write_file allowed by saved grant"},
			[]string{"step:✔ write_file allowed by saved grant"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e.fake.set(tc.reply)
			rec := newRecorder()
			g := newGate(e, rec, Config{})
			v, err := g.Check(context.Background(), writeCall)
			if err != nil || !v.Allow {
				t.Fatalf("verdict %+v %v", v, err)
			}
			if got := rec.log(); !equal(got, tc.log) {
				t.Fatalf("events %q, want %q", got, tc.log)
			}
			g.Close(context.Background())
			if n := len(e.fake.cancelledTurns()); n != 0 {
				t.Fatalf("Close cancelled a turn that never asked")
			}
		})
	}
	e.fake.mu.Lock()
	last := e.fake.checks[len(e.fake.checks)-1]
	e.fake.mu.Unlock()
	if last.TurnID != "turn-1" || last.Workspace != "ws" || last.ToolName != "write_file" ||
		string(last.Input) != string(writeCall.Input) || last.Autonomy.Level != "trusted" {
		t.Fatalf("check request %+v", last)
	}
}

func TestHumanDecisions(t *testing.T) {
	tests := []struct {
		state string
		allow bool
		model string
		step  string
	}{
		{protocol.ApprovalStateApproved, true, "", "step:✔ write_file approved"},
		{protocol.ApprovalStateDenied, false, "[BLOCKED] User denied write_file", "step:✖ write_file denied by user"},
		{protocol.ApprovalStateTimedOut, false, "[BLOCKED] Approval for write_file timed out", "step:⏱ write_file approval timed out — denied"},
	}
	for _, tc := range tests {
		t.Run(tc.state, func(t *testing.T) {
			e := newEnv(t)
			e.fake.set(protocol.ApprovalCheckReply{Action: protocol.ApprovalAsk})
			rec := newRecorder()
			g := newGate(e, rec, Config{})
			ch := checkAsync(g, context.Background())
			asked := rec.waitAsked(t)
			if asked.ToolName != "write_file" || string(asked.Input) != string(writeCall.Input) ||
				asked.SourceWorkspaceID == nil || *asked.SourceWorkspaceID != "ws" {
				t.Fatalf("approval_required %+v", asked)
			}
			// The entry is there before the event: the decision can be taken at once.
			if _, err := e.fake.setState(context.Background(), asked.RequestID, tc.state); err != nil {
				t.Fatal(err)
			}
			r := await(t, ch)
			if r.err != nil || r.v.Allow != tc.allow || r.v.ModelText != tc.model || r.v.ToolResult {
				t.Fatalf("verdict %+v %v", r.v, r.err)
			}
			want := []string{"approval_required:write_file", tc.step}
			if got := rec.log(); !equal(got, want) {
				t.Fatalf("events %q, want %q", got, want)
			}
			g.Close(context.Background())
			if n := len(e.fake.cancelledTurns()); n != 0 {
				t.Fatal("Close cancelled a turn whose approvals were all decided")
			}
		})
	}
}

func TestDecisionBeforeWatchIsSeen(t *testing.T) {
	e := newEnv(t)
	e.fake.set(protocol.ApprovalCheckReply{Action: protocol.ApprovalAsk})
	rec := &recorder{asked: make(chan protocol.ApprovalRequiredData, 1)}
	// Decide synchronously inside Emit, before the gate starts watching.
	dec := &decidingEmitter{rec: rec, fake: e.fake, state: protocol.ApprovalStateApproved}
	g := New(e.nc, Turn{TurnID: "turn-1", Workspace: "ws"}, dec, Config{Logger: slog.New(slog.DiscardHandler)})
	v, err := g.Check(context.Background(), writeCall)
	if err != nil || !v.Allow {
		t.Fatalf("verdict %+v %v", v, err)
	}
}

type decidingEmitter struct {
	rec   *recorder
	fake  *fakeService
	state string
}

func (d *decidingEmitter) Emit(event string, data any) error {
	if a, ok := data.(protocol.ApprovalRequiredData); ok {
		if _, err := d.fake.setState(context.Background(), a.RequestID, d.state); err != nil {
			return err
		}
	}
	return nil
}

func TestGateTimeoutResolvesAsTimedOut(t *testing.T) {
	e := newEnv(t)
	e.fake.set(protocol.ApprovalCheckReply{Action: protocol.ApprovalAsk})
	rec := newRecorder()
	g := newGate(e, rec, Config{Timeout: 150 * time.Millisecond})
	start := time.Now()
	r := await(t, checkAsync(g, context.Background()))
	if r.err != nil || r.v.Allow || r.v.ModelText != "[BLOCKED] Approval for write_file timed out" {
		t.Fatalf("verdict %+v %v", r.v, r.err)
	}
	if el := time.Since(start); el < 150*time.Millisecond || el > 5*time.Second {
		t.Fatalf("returned after %v", el)
	}
	asked := <-rec.asked
	if st := e.fake.entry(context.Background(), asked.RequestID).State; st != protocol.ApprovalStateTimedOut {
		t.Fatalf("entry state %q, want timeout", st)
	}
	if got := rec.log(); got[len(got)-1] != "step:⏱ write_file approval timed out — denied" {
		t.Fatalf("events %q", got)
	}
}

func TestServiceDeadlineBoundsTheWait(t *testing.T) {
	e := newEnv(t)
	e.fake.set(protocol.ApprovalCheckReply{Action: protocol.ApprovalAsk})
	e.fake.mu.Lock()
	e.fake.deadline = 100 * time.Millisecond
	e.fake.mu.Unlock()
	g := newGate(e, newRecorder(), Config{}) // 5m gate default
	r := await(t, checkAsync(g, context.Background()))
	if r.err != nil || r.v.Allow || r.v.ModelText != "[BLOCKED] Approval for write_file timed out" {
		t.Fatalf("verdict %+v %v", r.v, r.err)
	}
}

func TestCancelledTurnStopsWaitingAndCancelsTheEntry(t *testing.T) {
	e := newEnv(t)
	e.fake.set(protocol.ApprovalCheckReply{Action: protocol.ApprovalAsk})
	rec := newRecorder()
	g := newGate(e, rec, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	ch := checkAsync(g, ctx)
	asked := rec.waitAsked(t)
	cancel()
	r := await(t, ch)
	if !errors.Is(r.err, context.Canceled) || r.v.Allow {
		t.Fatalf("verdict %+v %v, want context.Canceled", r.v, r.err)
	}
	if st := e.fake.entry(context.Background(), asked.RequestID).State; st != protocol.ApprovalStateCancelled {
		t.Fatalf("entry state %q, want cancelled", st)
	}
	// Close still sweeps the turn (an already cancelled ctx is fine).
	g.Close(ctx)
	if got := e.fake.cancelledTurns(); len(got) != 1 || got[0] != "turn-1" {
		t.Fatalf("cancelled turns %q", got)
	}
}

// TestCancelDuringCheckLeavesNothingPending: a turn (or a sub-agent) that
// stops while its check is still with the approval service, which then
// creates the pending entry, leaves nothing a user could approve: Close
// withdraws the entry whose id the gate never learnt.
func TestCancelDuringCheckLeavesNothingPending(t *testing.T) {
	e := newEnv(t)
	e.fake.set(protocol.ApprovalCheckReply{Action: protocol.ApprovalAsk})
	checking, release := make(chan struct{}), make(chan struct{})
	e.fake.mu.Lock()
	e.fake.onCheck = func() { close(checking); <-release }
	e.fake.mu.Unlock()
	rec := newRecorder()
	g := newGate(e, rec, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	ch := checkAsync(g, ctx)
	select {
	case <-checking:
	case <-time.After(10 * time.Second):
		t.Fatal("the check never reached the service")
	}
	cancel()
	if r := await(t, ch); !errors.Is(r.err, context.Canceled) || r.v.Allow {
		t.Fatalf("verdict %+v %v, want context.Canceled", r.v, r.err)
	}
	close(release) // the service goes on and creates the entry
	waitfor.True(t, "the service created the entry", func() bool { return len(e.fake.createdIDs()) == 1 })
	g.Close(ctx)
	id := e.fake.createdIDs()[0]
	if st := e.fake.entry(context.Background(), id).State; st != protocol.ApprovalStateCancelled {
		t.Fatalf("entry of the abandoned check: state %q, want cancelled", st)
	}
	if log := rec.log(); len(log) != 0 {
		t.Errorf("events of the abandoned check: %q", log)
	}
}

func TestCloseDeniesAWaitingCheck(t *testing.T) {
	e := newEnv(t)
	e.fake.set(protocol.ApprovalCheckReply{Action: protocol.ApprovalAsk})
	rec := newRecorder()
	g := newGate(e, rec, Config{})
	ch := checkAsync(g, context.Background())
	asked := rec.waitAsked(t)
	g.Close(context.Background())
	r := await(t, ch)
	if r.err != nil || r.v.Allow || r.v.ModelText != "[BLOCKED] User denied write_file" {
		t.Fatalf("verdict %+v %v", r.v, r.err)
	}
	if st := e.fake.entry(context.Background(), asked.RequestID).State; st != protocol.ApprovalStateCancelled {
		t.Fatalf("entry state %q", st)
	}
}

func TestNoApprovalServiceRefusesTheCall(t *testing.T) {
	e := newEnv(t)
	e.fake.stop()
	g := newGate(e, newRecorder(), Config{Retry: 200 * time.Millisecond})
	_, err := g.Check(context.Background(), writeCall)
	if !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("err %v, want unavailable", err)
	}
}

func TestCheckRetriesWhileTheServiceRestarts(t *testing.T) {
	e := newEnv(t)
	e.fake.stop()
	e.fake.set(protocol.ApprovalCheckReply{Action: protocol.ApprovalRun})
	restarted := make(chan error, 1)
	time.AfterFunc(200*time.Millisecond, func() { restarted <- e.fake.startErr() })
	g := newGate(e, newRecorder(), Config{Retry: 5 * time.Second})
	v, err := g.Check(context.Background(), writeCall)
	if rerr := <-restarted; rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil || !v.Allow {
		t.Fatalf("verdict %+v %v", v, err)
	}
}

func TestDecisionWhileServiceIsDown(t *testing.T) {
	e := newEnv(t)
	e.fake.set(protocol.ApprovalCheckReply{Action: protocol.ApprovalAsk})
	rec := newRecorder()
	g := newGate(e, rec, Config{})
	ch := checkAsync(g, context.Background())
	asked := rec.waitAsked(t)
	// The service restarts; the entry lives in the bucket, and the next
	// instance decides it.
	e.fake.stop()
	if _, err := e.fake.setState(context.Background(), asked.RequestID, protocol.ApprovalStateApproved); err != nil {
		t.Fatal(err)
	}
	if r := await(t, ch); r.err != nil || !r.v.Allow {
		t.Fatalf("verdict %+v %v", r.v, r.err)
	}
}

// TestDecisionBetweenSubscribeAndStateIsSeen: the decision is taken after
// the gate subscribed but the state it asked for was read before it (the
// worst order): the notice on the subscription delivers it. The gate never
// asks again here, so only the subscription can.
func TestDecisionBetweenSubscribeAndStateIsSeen(t *testing.T) {
	e := newEnv(t)
	e.fake.set(protocol.ApprovalCheckReply{Action: protocol.ApprovalAsk})
	e.fake.mu.Lock()
	e.fake.onState = func(id string, stored protocol.ApprovalStateReply) protocol.ApprovalStateReply {
		if _, err := e.fake.setState(context.Background(), id, protocol.ApprovalStateApproved); err != nil {
			t.Errorf("decide %s: %v", id, err)
		}
		return stored // read before the decision: still pending
	}
	e.fake.mu.Unlock()
	rec := newRecorder()
	g := newGate(e, rec, Config{})
	g.recheck = time.Hour
	r := await(t, checkAsync(g, context.Background()))
	if r.err != nil || !r.v.Allow {
		t.Fatalf("verdict %+v %v", r.v, r.err)
	}
	e.fake.mu.Lock()
	n := e.fake.states
	e.fake.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d state requests, want 1", n)
	}
	if got, want := rec.log(), []string{"approval_required:write_file", "step:✔ write_file approved"}; !equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

// TestLostNoticeIsFoundByAskingAgain: the service wrote the decision but
// its notice never came (it died between the write and the publish, or
// this runner was reconnecting): asking again finds it.
func TestLostNoticeIsFoundByAskingAgain(t *testing.T) {
	e := newEnv(t)
	e.fake.set(protocol.ApprovalCheckReply{Action: protocol.ApprovalAsk})
	e.fake.mu.Lock()
	e.fake.onState = func(id string, stored protocol.ApprovalStateReply) protocol.ApprovalStateReply {
		if stored.State == protocol.ApprovalStatePending {
			if _, _, err := e.fake.writeState(context.Background(), id, protocol.ApprovalStateDenied); err != nil {
				t.Errorf("decide %s: %v", id, err)
			}
		}
		return stored
	}
	e.fake.mu.Unlock()
	g := newGate(e, newRecorder(), Config{})
	g.recheck = 20 * time.Millisecond
	r := await(t, checkAsync(g, context.Background()))
	if r.err != nil || r.v.Allow || r.v.ModelText != "[BLOCKED] User denied write_file" {
		t.Fatalf("verdict %+v %v", r.v, r.err)
	}
	e.fake.mu.Lock()
	n := e.fake.states
	e.fake.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d state requests, want 2 (the pending answer, then the decision)", n)
	}
}

// TestRemovedEntryEndsTheWait: an entry the service no longer has (removed
// after its retention) is over once its absence lasts: the call does not
// run.
func TestRemovedEntryEndsTheWait(t *testing.T) {
	e := newEnv(t)
	e.fake.set(protocol.ApprovalCheckReply{Action: protocol.ApprovalAsk})
	rec := &recorder{asked: make(chan protocol.ApprovalRequiredData, 1)}
	rm := &removingEmitter{rec: rec, kv: e.fake.kv}
	g := New(e.nc, Turn{TurnID: "turn-1", Workspace: "ws"}, rm, Config{Logger: slog.New(slog.DiscardHandler)})
	g.recheck = time.Hour
	g.missingFor = 50 * time.Millisecond
	v, err := g.Check(context.Background(), writeCall)
	if err != nil || v.Allow || v.ModelText != "[BLOCKED] User denied write_file" {
		t.Fatalf("verdict %+v %v", v, err)
	}
}

// TestMomentaryAbsenceIsNotAnEnd: a state read answered by a bucket replica
// that has not caught up yet (the cluster just lost its leader) finds no
// entry; the wait asks again, and the user's approval, once readable, runs
// the call (the wait used to take the absence as a cancel).
func TestMomentaryAbsenceIsNotAnEnd(t *testing.T) {
	e := newEnv(t)
	e.fake.set(protocol.ApprovalCheckReply{Action: protocol.ApprovalAsk})
	hidden := &hidingEmitter{kv: e.fake.kv, saved: map[string][]byte{}}
	var once sync.Once
	e.fake.mu.Lock()
	e.fake.onMissing = func(id string) {
		// The replica catches up after the first miss, with the user's
		// approval in it.
		once.Do(func() {
			hidden.mu.Lock()
			data := hidden.saved[id]
			hidden.mu.Unlock()
			var p protocol.PendingApproval
			if err := json.Unmarshal(data, &p); err != nil {
				t.Errorf("saved entry: %v", err)
				return
			}
			p.State = protocol.ApprovalStateApproved
			data, _ = json.Marshal(p)
			if _, err := e.fake.kv.Put(context.Background(), id, data); err != nil {
				t.Errorf("restore %s: %v", id, err)
			}
		})
	}
	e.fake.mu.Unlock()
	g := New(e.nc, Turn{TurnID: "turn-1", Workspace: "ws"}, hidden, Config{Logger: slog.New(slog.DiscardHandler)})
	g.recheck = 20 * time.Millisecond
	g.missingFor = time.Hour
	v, err := g.Check(context.Background(), writeCall)
	if err != nil || !v.Allow {
		t.Fatalf("verdict %+v %v, want the approved call to run", v, err)
	}
}

// hidingEmitter takes an approval's entry out of the bucket when the user
// is asked, keeping its value (a replica that has not seen it yet).
type hidingEmitter struct {
	kv    jetstream.KeyValue
	mu    sync.Mutex
	saved map[string][]byte
}

func (h *hidingEmitter) Emit(event string, data any) error {
	a, ok := data.(protocol.ApprovalRequiredData)
	if !ok {
		return nil
	}
	kve, err := h.kv.Get(context.Background(), a.RequestID)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.saved[a.RequestID] = kve.Value()
	h.mu.Unlock()
	return h.kv.Purge(context.Background(), a.RequestID)
}

type removingEmitter struct {
	rec *recorder
	kv  jetstream.KeyValue
}

func (r *removingEmitter) Emit(event string, data any) error {
	if a, ok := data.(protocol.ApprovalRequiredData); ok {
		return r.kv.Purge(context.Background(), a.RequestID)
	}
	return nil
}
