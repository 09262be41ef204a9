package distributed

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestTurnsSpreadOverRunners: concurrent turns land on more than one
// runner (each runner has its own model server, so the server a turn's
// model request reached names its runner), and every runner's metrics
// count the turns it started.
func TestTurnsSpreadOverRunners(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{})
	hold := c.pause()
	c.model.set(func(_ int, r *llmtest.Request) llmtest.Response {
		return llmtest.Response{Steps: []llmtest.Step{llmtest.Wait(hold), llmtest.Content("re: " + lastUser(r))}}
	})
	const turns = 9
	var wg sync.WaitGroup
	results := make([][]waggletest.Event, turns)
	for i := range turns {
		st := c.chat(i%2, map[string]any{"message": fmt.Sprintf("spread %d", i), "session": fmt.Sprintf("spread-%d", i)})
		wg.Go(func() { results[i] = st.All(t) })
	}
	// Every turn is at its model call at once: they run in parallel.
	calls := c.model.waitCalls(t, "every turn's model call", 15*time.Second, func(cs []modelCall) bool { return len(cs) == turns })
	hold.Release()
	wg.Wait()
	for i, evs := range results {
		if last(evs).Name != "done" || waggletest.Text(evs) != fmt.Sprintf("re: spread %d", i) {
			t.Errorf("turn %d: %v %q", i, waggletest.Names(evs), waggletest.Text(evs))
		}
	}
	served := map[int]int{}
	for _, call := range calls {
		served[call.runner]++
	}
	if len(served) < 2 {
		t.Fatalf("all %d turns ran on one runner: %v", turns, served)
	}
	var counted float64
	for i, r := range c.runners {
		n := c.metric(r, "waggle_turns_started_total")
		if int(n) != served[i] {
			t.Errorf("runner %d: metrics say %v turns started, its model server saw %d", i, n, served[i])
		}
		counted += n
	}
	if counted != turns {
		t.Errorf("runners counted %v turns, want %d", counted, turns)
	}
}

// heldReply is a model that streams "first half " then holds on pause,
// then "second half".
func heldReply(p *llmtest.Pause) llmtest.Response {
	return llmtest.Response{Steps: []llmtest.Step{llmtest.Content("first "), llmtest.Content("half "), llmtest.Wait(p), llmtest.Content("second half")}}
}

func callsFor(calls []modelCall, message string) []modelCall {
	var out []modelCall
	for _, c := range calls {
		if lastUser(c.req) == message {
			out = append(out, c)
		}
	}
	return out
}

// TestSameSessionQueue: a second turn for a busy session waits (showing the
// waiting step) and starts only after the first is done: its model call
// carries the first turn's whole reply.
func TestSameSessionQueue(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{})
	hold := c.pause()
	c.model.set(func(_ int, r *llmtest.Request) llmtest.Response {
		if lastUser(r) == "first" {
			return heldReply(hold)
		}
		return llmtest.Reply("reply to second")
	})
	first := c.chat(0, map[string]any{"message": "first", "session": "q"})
	c.model.waitCalls(t, "the first turn's model call", 10*time.Second, func(cs []modelCall) bool { return len(cs) == 1 })
	second := c.chat(1, map[string]any{"message": "second", "session": "q"})
	readUntil(t, second, "the waiting step", func(e waggletest.Event) bool {
		return e.Name == "step" && e.Content() == "Waiting for the previous turn in this session..."
	})
	if n := len(callsFor(c.model.Calls(), "second")); n != 0 {
		t.Fatalf("the second turn called the model while the first ran (%d calls)", n)
	}
	hold.Release()
	a := first.All(t)
	b := second.All(t)
	if last(a).Name != "done" || last(b).Name != "done" || waggletest.Text(b) != "reply to second" {
		t.Fatalf("first %v, second %v %q", waggletest.Names(a), waggletest.Names(b), waggletest.Text(b))
	}
	sc := callsFor(c.model.Calls(), "second")
	if len(sc) != 1 {
		t.Fatalf("second turn model calls: %d", len(sc))
	}
	msgs := sc[0].req.Chat.Messages
	var sawFirst bool
	for _, m := range msgs {
		if m.Role == "assistant" && m.Content == "first half second half" {
			sawFirst = true
		}
	}
	if !sawFirst {
		t.Fatalf("the second turn started before the first ended: its transcript %+v", msgs)
	}
	h := c.history("q")
	roles := []string{}
	for _, m := range h {
		roles = append(roles, m.Role+":"+m.Content)
	}
	want := []string{"user:first", "assistant:first half second half", "user:second", "assistant:reply to second"}
	if !slices.Equal(roles, want) {
		t.Fatalf("history %v, want %v", roles, want)
	}
}

// TestSameSessionReject: multitask "reject" on a busy session is a 409
// SESSION_BUSY before any stream starts; the running turn is not touched.
func TestSameSessionReject(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{})
	hold := c.pause()
	c.model.set(func(_ int, r *llmtest.Request) llmtest.Response { return heldReply(hold) })
	first := c.chat(0, map[string]any{"message": "first", "session": "r"})
	c.model.waitCalls(t, "the first turn's model call", 10*time.Second, func(cs []modelCall) bool { return len(cs) == 1 })
	var e map[string]any
	st := c.json(1, http.MethodPost, "/api/chat", map[string]any{"message": "second", "session": "r", "multitask": "reject"}, &e)
	if st != http.StatusConflict || e["code"] != "SESSION_BUSY" || e["error"] == "" {
		t.Fatalf("reject: %d %v", st, e)
	}
	hold.Release()
	if evs := first.All(t); last(evs).Name != "done" || waggletest.Text(evs) != "first half second half" {
		t.Fatalf("first turn: %v %q", waggletest.Names(evs), waggletest.Text(evs))
	}
	// The session is free again.
	c.model.set(func(int, *llmtest.Request) llmtest.Response { return llmtest.Reply("again") })
	if evs := c.chat(1, map[string]any{"message": "third", "session": "r", "multitask": "reject"}).All(t); last(evs).Name != "done" {
		t.Fatalf("after the first ended: %v", waggletest.Names(evs))
	}
}

// TestSameSessionInterrupt: multitask "interrupt" cancels the running turn
// (its partial reply is kept) and then runs.
func TestSameSessionInterrupt(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{})
	hold := c.pause()
	c.model.set(func(_ int, r *llmtest.Request) llmtest.Response {
		if lastUser(r) == "first" {
			return heldReply(hold)
		}
		return llmtest.Reply("second wins")
	})
	first := c.chat(0, map[string]any{"message": "first", "session": "i"})
	readUntil(t, first, "the first tokens", func(e waggletest.Event) bool { return e.Name == "token" && e.Content() == "half " })
	second := c.chat(1, map[string]any{"message": "second", "session": "i", "multitask": "interrupt"})
	a := allWithin(t, first, 15*time.Second)
	b := allWithin(t, second, 15*time.Second)
	var ae struct{ Message string }
	last(a).Decode(t, &ae)
	if last(a).Name != "error" || ae.Message != "The turn was cancelled." {
		t.Fatalf("interrupted turn ended with %v %s", waggletest.Names(a), last(a).Data)
	}
	if last(b).Name != "done" || waggletest.Text(b) != "second wins" {
		t.Fatalf("interrupting turn: %v %q", waggletest.Names(b), waggletest.Text(b))
	}
	var got []string
	for _, m := range c.history("i") {
		got = append(got, m.Role+":"+m.Content)
	}
	want := []string{"user:first", "assistant:first half ", "user:second", "assistant:second wins"}
	if !slices.Equal(got, want) {
		t.Fatalf("history %v, want %v", got, want)
	}
}

// crashScript: the model first asks for a bash call appending a line to
// ran.txt, then (with the result) streams "before crash " and holds on
// pause, then finishes. A request that carries the cut-off reply answers
// "after crash".
func crashScript(hold *llmtest.Pause) func(int, *llmtest.Request) llmtest.Response {
	return func(_ int, r *llmtest.Request) llmtest.Response {
		msgs := r.Chat.Messages
		switch {
		case toolResults(r) == 0:
			return llmtest.Response{Steps: llmtest.ToolCall(0, "call_append", "bash", `{"command":"echo ran >> ran.txt"}`, 2)}
		case msgs[len(msgs)-1].Role == "user":
			// Resumed: the cut-off reply and the note to continue.
			return llmtest.Reply("after crash")
		default:
			return llmtest.Response{Steps: []llmtest.Step{llmtest.Content("before "), llmtest.Content("crash "), llmtest.Wait(hold), llmtest.Content("never")}}
		}
	}
}

// TestRunnerCrashMidTurn: kill -9 of the runner in the middle of a turn
// (after a tool ran, while the model streams): another runner takes the
// turn over within seconds, the stream goes on and ends in done with the
// whole reply, and the tool did not run again.
func TestRunnerCrashMidTurn(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{})
	hold := c.pause()
	c.model.set(crashScript(hold))
	st := c.chat(0, map[string]any{"message": "append please", "session": "crash", "autonomy": map[string]any{"level": "yolo"}})
	before := readUntil(t, st, "the partial reply", func(e waggletest.Event) bool { return e.Name == "token" && e.Content() == "crash " })
	calls := c.model.Calls()
	victim := calls[len(calls)-1].runner
	if calls[0].runner != victim {
		t.Fatalf("one turn moved between runners before the crash: %v", describeCalls(calls))
	}
	c.runners[victim].Kill()
	killed := time.Now()
	after := allWithin(t, st, 20*time.Second)
	took := time.Since(killed)
	evs := append(before, after...)
	if last(evs).Name != "done" {
		t.Fatalf("stream after the crash: %v", waggletest.Names(evs))
	}
	if !slices.ContainsFunc(evs, func(e waggletest.Event) bool { return e.Name == "step" && e.Content() == "Resumed on another runner" }) {
		t.Errorf("no resume notice: %v", waggletest.Names(evs))
	}
	var done struct {
		Content   string
		ToolsUsed []string
	}
	last(evs).Decode(t, &done)
	if text := waggletest.Text(evs); text != "before crash after crash" || done.Content != text {
		t.Errorf("reply: tokens %q, done %q", text, done.Content)
	}
	if !slices.Equal(done.ToolsUsed, []string{"bash"}) {
		t.Errorf("toolsUsed %v", done.ToolsUsed)
	}
	ran, err := os.ReadFile(filepath.Join(c.dir, "data", "workspaces", "default", "files", "ran.txt"))
	if err != nil || string(ran) != "ran\n" {
		t.Fatalf("the tool's side effect: %q %v (it must have run exactly once)", ran, err)
	}
	resumed := c.model.Calls()[len(calls):]
	if len(resumed) != 1 || resumed[0].runner == victim || toolResults(resumed[0].req) != 1 {
		t.Fatalf("model calls after the crash: %v", describeCalls(resumed))
	}
	if took > 12*time.Second {
		t.Errorf("takeover took %s", took)
	}
	var got []string
	for _, m := range c.history("crash") {
		got = append(got, m.Role+":"+m.Content)
	}
	if want := []string{"user:append please", "assistant:before crash after crash"}; !slices.Equal(got, want) {
		t.Fatalf("history %v, want %v", got, want)
	}
}

// TestRunnerCrashDuringTool: kill -9 while a tool is running: the call
// began (its effect may have happened), so the runner that takes over
// never runs it again; the model is told it was interrupted.
func TestRunnerCrashDuringTool(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{})
	c.model.set(func(_ int, r *llmtest.Request) llmtest.Response {
		if toolResults(r) == 0 {
			return llmtest.Response{Steps: llmtest.ToolCall(0, "call_slow", "bash", `{"command":"echo ran >> slow.txt && sleep 30"}`, 1)}
		}
		return llmtest.Reply("checked")
	})
	st := c.chat(1, map[string]any{"message": "slow tool", "session": "slow", "autonomy": map[string]any{"level": "yolo"}})
	before := readUntil(t, st, "the tool event", named("tool"))
	file := filepath.Join(c.dir, "data", "workspaces", "default", "files", "slow.txt")
	waitfor.True(t, "the tool ran", func() bool { b, _ := os.ReadFile(file); return len(b) > 0 })
	victim := c.model.Calls()[0].runner
	c.runners[victim].Kill()
	after := allWithin(t, st, 20*time.Second)
	evs := append(before, after...)
	if last(evs).Name != "done" || waggletest.Text(evs) != "checked" {
		t.Fatalf("stream: %v %q", waggletest.Names(evs), waggletest.Text(evs))
	}
	var res struct {
		Name    string
		Result  string
		IsError bool
	}
	i := slices.IndexFunc(evs, func(e waggletest.Event) bool {
		return e.Name == "tool_result" && strings.Contains(string(e.Data), `"name":"bash"`)
	})
	if i < 0 {
		t.Fatalf("no tool_result for the interrupted call: %v", waggletest.Names(evs))
	}
	evs[i].Decode(t, &res)
	if res.Name != "bash" || !res.IsError || !strings.Contains(res.Result, "interrupted") {
		t.Errorf("interrupted call's result: %+v", res)
	}
	if b, _ := os.ReadFile(file); string(b) != "ran\n" {
		t.Fatalf("slow.txt = %q: the tool ran again", b)
	}
	calls := c.model.Calls()
	if len(calls) != 2 || !strings.Contains(toolMessage(calls[1].req), "interrupted") {
		t.Fatalf("model calls: %v", describeCalls(calls))
	}
}

func toolMessage(r *llmtest.Request) string {
	for _, m := range r.Chat.Messages {
		if m.Role == "tool" {
			return m.Content
		}
	}
	return ""
}

// TestGatewayCrashResume: kill -9 of the gateway a client streams from:
// the turn goes on, and the client resumes on the other gateway with
// Last-Event-ID, losing and repeating nothing (the same events as a full
// replay of the finished turn).
func TestGatewayCrashResume(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{})
	hold := c.pause()
	c.model.set(func(int, *llmtest.Request) llmtest.Response { return heldReply(hold) })
	st := c.chat(0, map[string]any{"message": "resume me", "session": "gw"})
	turn := st.Resp.Header.Get("X-Waggle-Turn-Id")
	before := readUntil(t, st, "the first tokens", func(e waggletest.Event) bool { return e.Name == "token" && e.Content() == "half " })
	c.gateways[0].Kill()
	st.Close()
	rest := c.follow(1, turn, "Last-Event-ID", strconv.FormatUint(last(before).ID, 10))
	hold.Release()
	after := allWithin(t, rest, 15*time.Second)
	got := waggletest.Coalesced(append(before, after...))
	full := waggletest.Coalesced(c.follow(1, turn).All(t))
	if last(full).Name != "done" || !slices.EqualFunc(got, full, func(a, b waggletest.Event) bool {
		return a.ID == b.ID && a.Name == b.Name && string(a.Data) == string(b.Data)
	}) {
		t.Fatalf("resumed stream %v\nfull replay %v", got, full)
	}
	seen := map[uint64]bool{}
	for _, e := range append(before, after...) {
		if seen[e.ID] {
			t.Fatalf("event %d delivered twice", e.ID)
		}
		seen[e.ID] = true
	}
	if waggletest.Text(full) != "first half second half" {
		t.Fatalf("text %q", waggletest.Text(full))
	}
}

// TestApprovalOnOtherGateway: a tool approval asked on one gateway's
// stream is answered through the other gateway.
func TestApprovalOnOtherGateway(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{})
	c.model.set(func(_ int, r *llmtest.Request) llmtest.Response {
		if toolResults(r) == 0 {
			return llmtest.Response{Steps: llmtest.ToolCall(0, "call_w", "write_file", `{"path":"approved.txt","content":"yes"}`, 1)}
		}
		return llmtest.Reply("written")
	})
	st := c.chat(0, map[string]any{"message": "write it", "session": "appr"})
	evs := readUntil(t, st, "approval_required", named("approval_required"))
	var a struct{ RequestID string }
	last(evs).Decode(t, &a)
	var out map[string]any
	if code := c.json(1, http.MethodPost, "/api/approval/"+a.RequestID, map[string]any{"approved": true}, &out); code != http.StatusOK {
		t.Fatalf("approve on the other gateway: %d %v", code, out)
	}
	rest := allWithin(t, st, 15*time.Second)
	if last(rest).Name != "done" || waggletest.Text(rest) != "written" {
		t.Fatalf("after approval: %v", waggletest.Names(rest))
	}
	if b, err := os.ReadFile(filepath.Join(c.dir, "data", "workspaces", "default", "files", "approved.txt")); err != nil || string(b) != "yes" {
		t.Fatalf("approved.txt: %q %v", b, err)
	}
}

// TestNoRunnerLeft: when every runner dies mid-turn, nobody ends the
// turn for want of a runner — no gateway judges turns — and its follower
// keeps waiting; the first runner back takes it over and it ends in done,
// its reply stored once.
func TestNoRunnerLeft(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{})
	hold := c.pause()
	c.model.set(func(int, *llmtest.Request) llmtest.Response { return heldReply(hold) })
	st := c.chat(0, map[string]any{"message": "orphan", "session": "orphan"})
	before := readUntil(t, st, "the first tokens", func(e waggletest.Event) bool { return e.Name == "token" && e.Content() == "half " })
	for _, r := range c.runners {
		r.Kill()
	}
	hold.Release()
	start := time.Now()
	c.runners[0] = c.start("runner-0-back", "", append([]string{"--targets=turn-runner", "--nats-url", c.natsURL, "--llm-url", c.model.llm[0].URL(),
		"--disconnect-grace", "30s", "--shutdown-timeout", "10s",
		"--data-dir", filepath.Join(c.dir, "data"), "--log-format", "text", "--log-level", "debug", "--echo-delay", "1ms"}, c.natsAuth...)...)
	evs := append(before, allWithin(t, st, 30*time.Second)...)
	if last(evs).Name != "done" {
		t.Fatalf("the turn left with no runner ended with %v %s", waggletest.Names(evs), last(evs).Data)
	}
	if !slices.ContainsFunc(evs, func(e waggletest.Event) bool { return e.Name == "step" && e.Content() == protocol.StepResumed }) {
		t.Errorf("no resume notice: %v", waggletest.Names(evs))
	}
	var replies []string
	for _, m := range c.history("orphan") {
		if m.Role == "assistant" {
			replies = append(replies, m.Content)
		}
	}
	if len(replies) != 1 {
		t.Fatalf("stored replies %q, want one", replies)
	}
	t.Logf("the turn was resumed %s after a runner came back", time.Since(start).Round(100*time.Millisecond))
}

// TestGracefulShutdownHandsOver: SIGTERM of the runner in the middle of a
// turn that cannot finish within its shutdown budget: the turn is handed
// to another runner at once (no staleness wait) and completes; the
// stopped runner exits cleanly.
func TestGracefulShutdownHandsOver(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{shutdown: "3s"})
	hold := c.pause()
	var once sync.Once
	c.model.set(func(_ int, r *llmtest.Request) llmtest.Response {
		first := false
		once.Do(func() { first = true })
		if first {
			return heldReply(hold)
		}
		return llmtest.Reply("handed over")
	})
	st := c.chat(0, map[string]any{"message": "hand me over", "session": "term"})
	before := readUntil(t, st, "the first tokens", func(e waggletest.Event) bool { return e.Name == "token" && e.Content() == "half " })
	victim := c.model.Calls()[0].runner
	c.runners[victim].Signal(syscall.SIGTERM)
	term := time.Now()
	after := allWithin(t, st, 15*time.Second)
	took := time.Since(term)
	evs := append(before, after...)
	if last(evs).Name != "done" || waggletest.Text(evs) != "first half handed over" {
		t.Fatalf("handed-over turn: %v %q", waggletest.Names(evs), waggletest.Text(evs))
	}
	t.Logf("finished %s after SIGTERM", took)
	// 1s of draining (3s budget − 2s margin), then a claim at once: waiting
	// for the lease to go stale would take LeaseStaleAfter more.
	if took > 3500*time.Millisecond {
		t.Errorf("the turn finished %s after SIGTERM: not handed over at once", took)
	}
	select {
	case <-c.runners[victim].Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("the stopped runner did not exit")
	}
	if err := c.runners[victim].Err(); err != nil {
		t.Fatalf("the stopped runner exited with %v", err)
	}
	calls := c.model.Calls()
	if len(calls) != 2 || calls[1].runner == victim {
		t.Fatalf("model calls: %v", describeCalls(calls))
	}
}

// TestGracefulShutdownDrains: SIGTERM while a turn can finish within the
// budget: the runner finishes it itself before exiting.
func TestGracefulShutdownDrains(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{shutdown: "10s"})
	hold := c.pause()
	c.model.set(func(int, *llmtest.Request) llmtest.Response { return heldReply(hold) })
	st := c.chat(0, map[string]any{"message": "drain me", "session": "drain"})
	readUntil(t, st, "the first tokens", func(e waggletest.Event) bool { return e.Name == "token" && e.Content() == "half " })
	victim := c.runners[c.model.Calls()[0].runner]
	victim.Signal(syscall.SIGTERM)
	// New turns go elsewhere while it drains.
	c.model.set(func(int, *llmtest.Request) llmtest.Response { return llmtest.Reply("elsewhere") })
	if evs := c.chat(1, map[string]any{"message": "meanwhile", "session": "other"}).All(t); last(evs).Name != "done" {
		t.Fatalf("turn during the drain: %v", waggletest.Names(evs))
	}
	hold.Release()
	evs := allWithin(t, st, 10*time.Second)
	if last(evs).Name != "done" || slices.ContainsFunc(evs, func(e waggletest.Event) bool { return e.Content() == "Resumed on another runner" }) {
		t.Fatalf("drained turn: %v", waggletest.Names(evs))
	}
	<-victim.Exited()
	if victim.Err() != nil {
		t.Fatalf("runner exit: %v", victim.Err())
	}
}

// TestDisconnectGrace: a client that drops and comes back (through the
// other gateway) within the grace keeps its turn; once no one follows for
// longer than the grace, the turn is cancelled and its partial reply kept.
func TestDisconnectGrace(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{grace: "2s"})
	hold := c.pause()
	c.model.set(func(_ int, r *llmtest.Request) llmtest.Response { return heldReply(hold) })

	st := c.chat(0, map[string]any{"message": "come back", "session": "back"})
	turn := st.Resp.Header.Get("X-Waggle-Turn-Id")
	first := readUntil(t, st, "the first tokens", func(e waggletest.Event) bool { return e.Name == "token" && e.Content() == "half " })
	st.Close()
	back := c.follow(1, turn, "Last-Event-ID", strconv.FormatUint(last(first).ID, 10))
	time.Sleep(3 * time.Second) // longer than the grace: the follower keeps it alive
	hold.Release()
	if evs := allWithin(t, back, 10*time.Second); last(evs).Name != "done" {
		t.Fatalf("resumed within the grace: %v", waggletest.Names(evs))
	}

	hold2 := c.pause()
	c.model.set(func(_ int, r *llmtest.Request) llmtest.Response { return heldReply(hold2) })
	gone := c.chat(1, map[string]any{"message": "leave", "session": "gone"})
	readUntil(t, gone, "the first tokens", func(e waggletest.Event) bool { return e.Name == "token" && e.Content() == "half " })
	gone.Close()
	req := callsFor(c.model.Calls(), "leave")[0].req
	select {
	case <-req.Cancelled():
	case <-time.After(10 * time.Second):
		t.Fatal("the abandoned turn was not cancelled after the grace")
	}
	waitfor.Within(5*time.Second).Every(50*time.Millisecond).NoError(t, "partial reply kept after the grace", func() error {
		if h := c.history("gone"); len(h) != 2 || h[1].Content != "first half " {
			return fmt.Errorf("history after the grace: %+v", h)
		}
		return nil
	})
}

// TestAbortWorkspace: POST /api/agent/abort {workspaceId} cancels that
// workspace's running turns on every runner, and only those.
func TestAbortWorkspace(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{})
	hold := c.pause()
	c.model.set(func(int, *llmtest.Request) llmtest.Response { return heldReply(hold) })
	var mine []*waggletest.Stream
	for i := range 4 {
		st := c.chat(i%2, map[string]any{"message": fmt.Sprintf("abort %d", i), "session": fmt.Sprintf("a%d", i)})
		readUntil(t, st, "the first tokens", func(e waggletest.Event) bool { return e.Name == "token" && e.Content() == "half " })
		mine = append(mine, st)
	}
	other := c.chat(0, map[string]any{"message": "keep", "workspace": "elsewhere"})
	readUntil(t, other, "the first tokens", func(e waggletest.Event) bool { return e.Name == "token" && e.Content() == "half " })
	var out map[string]any
	if st := c.json(1, http.MethodPost, "/api/agent/abort", map[string]any{"workspaceId": "default"}, &out); st != http.StatusOK {
		t.Fatalf("abort: %d %v", st, out)
	}
	for i, st := range mine {
		if evs := allWithin(t, st, 10*time.Second); last(evs).Name != "error" {
			t.Errorf("turn %d of the aborted workspace: %v", i, waggletest.Names(evs))
		}
	}
	hold.Release()
	if evs := allWithin(t, other, 10*time.Second); last(evs).Name != "done" {
		t.Fatalf("turn of another workspace: %v", waggletest.Names(evs))
	}
}
