package distributed

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
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

// Strict per-session FIFO (issue 11, Required 3): the turns of one session
// run in the order the server accepted them, across a runner's kill -9 and
// a restart of every process. Each test holds the first turn of a session
// in the model, queues more turns behind it (each accepted — its waiting
// step seen — before the next is sent), breaks something, and then checks
// the session's history and the order the model saw the turns in.

// fifoScript answers every message m with "re: m"; the messages in held
// first wait on hold (so a session's first turn keeps the session busy
// while the others queue up behind it).
func fifoScript(hold *llmtest.Pause, held ...string) func(int, *llmtest.Request) llmtest.Response {
	return func(_ int, r *llmtest.Request) llmtest.Response {
		msg := lastUser(r)
		if slices.Contains(held, msg) {
			return llmtest.Response{Steps: []llmtest.Step{llmtest.Wait(hold), llmtest.Content("re: " + msg)}}
		}
		return llmtest.Reply("re: " + msg)
	}
}

// fifoTurn is one chat the test sent.
type fifoTurn struct {
	msg string
	id  string
	gw  int
	st  *waggletest.Stream
	// seen is what the stream delivered before the test went on.
	seen []waggletest.Event
}

// sendHeld posts msg (a turn the model holds) on gateway gw and waits for
// its model call.
func (c *cluster) sendHeld(gw int, session, msg string) *fifoTurn {
	c.t.Helper()
	st := c.chat(gw, map[string]any{"message": msg, "session": session})
	c.model.waitCalls(c.t, "the model call of "+msg, 15*time.Second, func(cs []modelCall) bool { return len(callsFor(cs, msg)) > 0 })
	return &fifoTurn{msg: msg, id: st.Resp.Header.Get("X-Waggle-Turn-Id"), gw: gw, st: st}
}

// sendQueued posts msg on gateway gw to a busy session and waits until the
// turn shows the waiting step: it is accepted and in the session's queue.
func (c *cluster) sendQueued(gw int, session, msg string) *fifoTurn {
	c.t.Helper()
	st := c.chat(gw, map[string]any{"message": msg, "session": session})
	seen := readUntil(c.t, st, "the waiting step of "+msg, func(e waggletest.Event) bool {
		return e.Name == "step" && e.Content() == protocol.StepWaitingForSession
	})
	return &fifoTurn{msg: msg, id: st.Resp.Header.Get("X-Waggle-Turn-Id"), gw: gw, st: st, seen: seen}
}

// drain reads st until it ends or d has passed. It never fails the test,
// so it may run on any goroutine.
func drain(st *waggletest.Stream, d time.Duration) ([]waggletest.Event, error) {
	timer := time.AfterFunc(d, st.Close)
	defer timer.Stop()
	defer st.Close()
	var out []waggletest.Event
	for {
		ev, err := st.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return out, err
		}
		out = append(out, ev)
	}
}

func terminal(evs []waggletest.Event) bool {
	n := last(evs).Name
	return n == "done" || n == "error"
}

// finishAll reads every turn's stream to its end, all at once. A turn
// whose stream broke before its terminal event is followed again from its
// start on the other gateway (a full replay), so every turn's result is
// its whole event list.
func (c *cluster) finishAll(turns []*fifoTurn, d time.Duration) [][]waggletest.Event {
	c.t.Helper()
	out := make([][]waggletest.Event, len(turns))
	errs := make([]error, len(turns))
	var wg sync.WaitGroup
	for i, tr := range turns {
		wg.Go(func() {
			evs, err := drain(tr.st, d)
			out[i], errs[i] = append(slices.Clone(tr.seen), evs...), err
		})
	}
	wg.Wait()
	for i, tr := range turns {
		if terminal(out[i]) {
			continue
		}
		c.t.Logf("%s: stream broke before its end (%v) after %v; following it again", tr.msg, errs[i], waggletest.Names(out[i]))
		evs, err := drain(c.follow(1-tr.gw, tr.id), d)
		if !terminal(evs) {
			c.t.Fatalf("%s did not end within %s (%v): %v", tr.msg, d, err, waggletest.Names(evs))
		}
		out[i] = evs
	}
	return out
}

// exchanges is the history msgs make when each turn answers "re: <msg>".
func exchanges(msgs []string) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, "user:"+m, "assistant:re: "+m)
	}
	return out
}

func historyLines(h []histMsg) []string {
	out := make([]string, len(h))
	for i, m := range h {
		out[i] = m.Role + ":" + m.Content
	}
	return out
}

// waitHistory polls a session's history until it has n messages.
func (c *cluster) waitHistory(session string, n int, d time.Duration) []histMsg {
	c.t.Helper()
	var h []histMsg
	waitfor.Within(d).Every(50*time.Millisecond).NoError(c.t, fmt.Sprintf("%d messages in the history of %s", n, session), func() error {
		if h = c.history(session); len(h) < n {
			return fmt.Errorf("history %v", historyLines(h))
		}
		return nil
	})
	return h
}

// transcript is a model request's conversation: its user and assistant
// messages with text, continuation notes left out.
func transcript(r *llmtest.Request) []string {
	var out []string
	for _, m := range r.Chat.Messages {
		switch {
		case m.Role == "user" && !strings.HasPrefix(m.Content, "[The reply above was cut off"):
			out = append(out, "user:"+m.Content)
		case m.Role == "assistant" && m.Content != "":
			out = append(out, "assistant:"+m.Content)
		}
	}
	return out
}

// checkModelOrder checks that the model saw msgs (one session's turns) one
// after the other: every call for msgs[k] comes after every call for
// msgs[k-1], and carries the finished exchanges of msgs[:k] before it —
// the turn started only once the one before it had ended.
func checkModelOrder(t *testing.T, calls []modelCall, msgs []string) {
	t.Helper()
	var seq []string
	for _, call := range calls {
		m := lastUser(call.req)
		k := slices.Index(msgs, m)
		if k < 0 {
			continue
		}
		if len(seq) == 0 || seq[len(seq)-1] != m {
			seq = append(seq, m)
		}
		want := append(exchanges(msgs[:k]), "user:"+m)
		if got := transcript(call.req); !slices.Equal(got, want) {
			t.Errorf("model call for %q on runner %d carried %v, want %v", m, call.runner, got, want)
		}
	}
	if !slices.Equal(seq, msgs) {
		t.Errorf("the model saw the turns in the order %v, want %v", seq, msgs)
	}
}

// queuedCalls counts the model calls of msgs.
func queuedCalls(calls []modelCall, msgs []string) int {
	n := 0
	for _, call := range calls {
		if slices.Contains(msgs, lastUser(call.req)) {
			n++
		}
	}
	return n
}

// takeovers lists, from the live runners' logs, the turns they took over
// ("message@runner", by the message of each turn in turns).
func (c *cluster) takeovers(turns []*fifoTurn) []string {
	var out []string
	for i, r := range c.runners {
		for _, line := range strings.Split(r.Output(), "\n") {
			if !strings.Contains(line, "took over turn") {
				continue
			}
			for _, tr := range turns {
				if strings.Contains(line, "turn="+tr.id) {
					out = append(out, fmt.Sprintf("%s@%d", tr.msg, i))
				}
			}
		}
	}
	return out
}

// TestSessionFIFOAcrossRunnerKill: the first turn of a session holds in the
// model while 5 more are queued behind it through both gateways; kill -9 of
// the runner running the first turn: the first turn is taken over and the
// queued ones (wherever they wait, the killed runner included) run after
// it, one by one, in the order they were accepted.
func TestSessionFIFOAcrossRunnerKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{})
	hold := c.pause()
	const session = "fifo-kill"
	msgs := []string{"kill m0", "kill m1", "kill m2", "kill m3", "kill m4", "kill m5"}
	c.model.set(fifoScript(hold, msgs[0]))

	turns := []*fifoTurn{c.sendHeld(0, session, msgs[0])}
	for k := 1; k < len(msgs); k++ {
		turns = append(turns, c.sendQueued(k%2, session, msgs[k]))
	}
	if n := queuedCalls(c.model.Calls(), msgs[1:]); n != 0 {
		t.Fatalf("%d queued turns called the model while the first held the session: %v", n, describeCalls(c.model.Calls()))
	}
	victim := callsFor(c.model.Calls(), msgs[0])[0].runner
	c.runners[victim].Kill()
	// The first turn is taken over and calls the model again; the queued
	// turns still wait for it.
	c.model.waitCalls(t, "the first turn's model call after the kill", 20*time.Second, func(cs []modelCall) bool {
		return slices.ContainsFunc(callsFor(cs, msgs[0]), func(mc modelCall) bool { return mc.runner != victim })
	})
	if n := queuedCalls(c.model.Calls(), msgs[1:]); n != 0 {
		t.Fatalf("%d queued turns called the model while the taken-over first turn held the session: %v", n, describeCalls(c.model.Calls()))
	}
	hold.Release()

	results := c.finishAll(turns, 30*time.Second)
	for i, evs := range results {
		if last(evs).Name != "done" || waggletest.Text(evs) != "re: "+msgs[i] {
			t.Errorf("%s: %v %q", msgs[i], waggletest.Names(evs), waggletest.Text(evs))
		}
	}
	if got, want := historyLines(c.history(session)), exchanges(msgs); !slices.Equal(got, want) {
		t.Fatalf("history %v, want %v", got, want)
	}
	checkModelOrder(t, c.model.Calls(), msgs)
	t.Logf("killed runner %d; taken over: %v", victim, c.takeovers(turns))
}

// TestSessionFIFOAcrossRunnerKillManySessions: 4 sessions, each with a held
// first turn and 5 turns queued behind it (sent interleaved across the
// sessions and both gateways); kill -9 of a runner: each session's turns
// still run in the order they were accepted.
func TestSessionFIFOAcrossRunnerKillManySessions(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{})
	hold := c.pause()
	const sessions, perSession = 4, 6
	msgs := make([][]string, sessions)
	var firsts []string
	for s := range sessions {
		for k := range perSession {
			msgs[s] = append(msgs[s], fmt.Sprintf("many s%d m%d", s, k))
		}
		firsts = append(firsts, msgs[s][0])
	}
	c.model.set(fifoScript(hold, firsts...))

	turns := make([][]*fifoTurn, sessions)
	for s := range sessions {
		turns[s] = append(turns[s], c.sendHeld(s%2, fmt.Sprintf("fifo-many-%d", s), msgs[s][0]))
	}
	for k := 1; k < perSession; k++ {
		for s := range sessions {
			turns[s] = append(turns[s], c.sendQueued((k+s)%2, fmt.Sprintf("fifo-many-%d", s), msgs[s][k]))
		}
	}
	var queued []string
	for s := range sessions {
		queued = append(queued, msgs[s][1:]...)
	}
	if n := queuedCalls(c.model.Calls(), queued); n != 0 {
		t.Fatalf("%d queued turns called the model while their sessions were busy: %v", n, describeCalls(c.model.Calls()))
	}
	// The victim is the runner of session 0's first turn; every first turn
	// it ran is taken over before the hold is released.
	calls := c.model.Calls()
	victim := callsFor(calls, firsts[0])[0].runner
	var moved []string
	for _, m := range firsts {
		if callsFor(calls, m)[0].runner == victim {
			moved = append(moved, m)
		}
	}
	c.runners[victim].Kill()
	c.model.waitCalls(t, "the taken-over first turns' model calls", 20*time.Second, func(cs []modelCall) bool {
		for _, m := range moved {
			if !slices.ContainsFunc(callsFor(cs, m), func(mc modelCall) bool { return mc.runner != victim }) {
				return false
			}
		}
		return true
	})
	if n := queuedCalls(c.model.Calls(), queued); n != 0 {
		t.Fatalf("%d queued turns called the model while their sessions were busy: %v", n, describeCalls(c.model.Calls()))
	}
	hold.Release()

	var all []*fifoTurn
	for s := range sessions {
		all = append(all, turns[s]...)
	}
	results := c.finishAll(all, 60*time.Second)
	for i, evs := range results {
		if last(evs).Name != "done" || waggletest.Text(evs) != "re: "+all[i].msg {
			t.Errorf("%s: %v %q", all[i].msg, waggletest.Names(evs), waggletest.Text(evs))
		}
	}
	for s := range sessions {
		if got, want := historyLines(c.history(fmt.Sprintf("fifo-many-%d", s))), exchanges(msgs[s]); !slices.Equal(got, want) {
			t.Errorf("session %d: history %v, want %v", s, got, want)
		}
		checkModelOrder(t, c.model.Calls(), msgs[s])
	}
	t.Logf("killed runner %d (it ran %d of the first turns); taken over: %v", victim, len(moved), c.takeovers(all))
}

// TestSessionFIFOAcrossFullRestart: the first turn of a session holds in
// the model while 5 more are queued behind it; then every process is
// killed -9 and started again on the same data directory and NATS address.
// The turns accepted before the crash run after the restart in the order
// they were accepted (a turn may instead end with an error recorded in
// history, but never out of its place), and a turn sent right after the
// restart runs after all of them.
func TestSessionFIFOAcrossFullRestart(t *testing.T) {
	t.Parallel()
	opts := clusterOpts{}
	c := startCluster(t, opts)
	hold := c.pause()
	const session = "fifo-restart"
	msgs := []string{"restart m0", "restart m1", "restart m2", "restart m3", "restart m4", "restart m5"}
	c.model.set(fifoScript(hold, msgs[0]))

	turns := []*fifoTurn{c.sendHeld(0, session, msgs[0])}
	for k := 1; k < len(msgs); k++ {
		turns = append(turns, c.sendQueued(k%2, session, msgs[k]))
	}
	if n := queuedCalls(c.model.Calls(), msgs[1:]); n != 0 {
		t.Fatalf("%d queued turns called the model while the first held the session: %v", n, describeCalls(c.model.Calls()))
	}
	before := len(c.model.Calls())

	c.crash()
	for _, tr := range turns {
		tr.st.Close()
	}
	c.restart(opts)
	// A turn sent right after the restart, before any runner took the old
	// turns over, queues behind all of them.
	late := c.sendQueued(1, session, "restart m6")
	c.model.waitCalls(t, "the first turn's model call after the restart", 30*time.Second, func(cs []modelCall) bool {
		return len(callsFor(cs[before:], msgs[0])) > 0
	})
	if n := queuedCalls(c.model.Calls(), append(msgs[1:], late.msg)); n != 0 {
		t.Fatalf("%d queued turns called the model while the resumed first turn held the session: %v", n, describeCalls(c.model.Calls()))
	}
	hold.Release()

	// Every turn, followed again from its start on the new gateways, ends.
	// Turn events are kept in memory by default, so a turn is followable
	// again once a runner has taken it over and published to it.
	for i, tr := range turns {
		tr.gw, tr.seen = i%2, nil
		tr.st = c.followOnce(tr.gw, tr.id, 20*time.Second)
	}
	turns, msgs = append(turns, late), append(msgs, late.msg)
	results := c.finishAll(turns, 60*time.Second)
	stored := c.sessionFile(session)
	var got []string
	for k, tr := range turns {
		user, reply, ok := turnLines(stored, tr.id)
		if !ok {
			t.Fatalf("%s (turn %s) has no user message and reply in the session file: %+v", tr.msg, tr.id, stored)
		}
		if user.Content != tr.msg {
			t.Errorf("%s: stored user message %q", tr.msg, user.Content)
		}
		evs := results[k]
		switch {
		case reply.Error != "":
			// Allowed: ended with an error recorded in history.
			t.Logf("%s ended with an error recorded in history: %q (events %v)", tr.msg, reply.Error, waggletest.Names(evs))
			if last(evs).Name != "error" {
				t.Errorf("%s: history records error %q, its stream ended with %v", tr.msg, reply.Error, waggletest.Names(evs))
			}
		case last(evs).Name != "done" || reply.Content != "re: "+tr.msg || waggletest.Text(evs) != reply.Content:
			t.Errorf("%s: stream %v %q, stored reply %q", tr.msg, waggletest.Names(evs), waggletest.Text(evs), reply.Content)
		}
		got = append(got, user.TurnID, reply.TurnID)
	}
	// The stored order: each turn's user message and reply, turn after turn
	// in the order they were accepted.
	var want, order []string
	for _, tr := range turns {
		want = append(want, tr.id, tr.id)
	}
	for _, l := range stored {
		order = append(order, l.TurnID)
	}
	if !slices.Equal(order, want) || !slices.Equal(got, want) {
		t.Fatalf("session file order (by turn) %v, want %v: %+v", order, want, stored)
	}
	if h := historyLines(c.history(session)); len(h) != 2*len(msgs) {
		t.Fatalf("history %v", h)
	}
	checkModelOrder(t, c.model.Calls(), msgs)
	t.Logf("taken over after the restart: %v", c.takeovers(turns))
}

// followOnce follows a turn on gateway gw, waiting (up to d) while the
// gateway does not know it yet.
func (c *cluster) followOnce(gw int, turnID string, d time.Duration) *waggletest.Stream {
	c.t.Helper()
	var st *waggletest.Stream
	waitfor.Within(d).Every(50*time.Millisecond).NoError(c.t, fmt.Sprintf("follow %s on gateway %d", turnID, gw), func() error {
		resp := c.do(gw, http.MethodGet, "/api/chat/turns/"+turnID+"/events", nil)
		if resp.StatusCode == http.StatusOK {
			st = waggletest.NewStream(resp)
			return nil
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			c.t.Fatalf("follow %s on gateway %d: status %d: %s", turnID, gw, resp.StatusCode, data)
		}
		return fmt.Errorf("status %d: %s", resp.StatusCode, data)
	})
	return st
}

// TestSessionFIFOMultitask: with turns queued behind a running one,
// multitask "reject" is still a 409 SESSION_BUSY, and "interrupt" cancels
// the running turn (its partial reply kept) and runs next, ahead of the
// queued turns, which then run in their order.
func TestSessionFIFOMultitask(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{})
	hold := c.pause()
	const session = "fifo-multitask"
	c.model.set(func(_ int, r *llmtest.Request) llmtest.Response {
		msg := lastUser(r)
		if msg == "mt m0" {
			return llmtest.Response{Steps: []llmtest.Step{llmtest.Content("partial "), llmtest.Wait(hold), llmtest.Content("never")}}
		}
		return llmtest.Reply("re: " + msg)
	})
	first := &fifoTurn{msg: "mt m0", gw: 0, st: c.chat(0, map[string]any{"message": "mt m0", "session": session})}
	first.seen = readUntil(t, first.st, "the first tokens", func(e waggletest.Event) bool { return e.Name == "token" && e.Content() == "partial " })
	queued := []*fifoTurn{c.sendQueued(1, session, "mt m1"), c.sendQueued(0, session, "mt m2")}

	var e map[string]any
	if st := c.json(1, http.MethodPost, "/api/chat", map[string]any{"message": "mt rejected", "session": session, "multitask": "reject"}, &e); st != http.StatusConflict || e["code"] != protocol.CodeSessionBusy {
		t.Fatalf("reject with turns queued: %d %v", st, e)
	}
	interrupt := &fifoTurn{msg: "mt interrupt", gw: 1, st: c.chat(1, map[string]any{"message": "mt interrupt", "session": session, "multitask": "interrupt"})}

	results := c.finishAll(append([]*fifoTurn{first, interrupt}, queued...), 30*time.Second)
	var cancelled struct{ Message string }
	last(results[0]).Decode(t, &cancelled)
	if last(results[0]).Name != "error" || cancelled.Message != "The turn was cancelled." {
		t.Fatalf("interrupted turn ended with %v %s", waggletest.Names(results[0]), last(results[0]).Data)
	}
	for i, tr := range []*fifoTurn{interrupt, queued[0], queued[1]} {
		if evs := results[i+1]; last(evs).Name != "done" || waggletest.Text(evs) != "re: "+tr.msg {
			t.Errorf("%s: %v %q", tr.msg, waggletest.Names(evs), waggletest.Text(evs))
		}
	}
	want := append([]string{"user:mt m0", "assistant:partial "}, exchanges([]string{"mt interrupt", "mt m1", "mt m2"})...)
	if got := historyLines(c.history(session)); !slices.Equal(got, want) {
		t.Fatalf("history %v, want %v", got, want)
	}
	var seq []string
	for _, call := range c.model.Calls() {
		seq = append(seq, lastUser(call.req))
	}
	if want := []string{"mt m0", "mt interrupt", "mt m1", "mt m2"}; !slices.Equal(seq, want) {
		t.Fatalf("model calls %v, want %v", seq, want)
	}
}

// storedLine is one user or assistant line of a session file.
type storedLine struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	TurnID  string `json:"turnId"`
	Error   string `json:"error"`
}

// sessionFile reads the user and assistant lines of a session's JSONL
// file in the shared data directory (the history API does not show a
// reply's error).
func (c *cluster) sessionFile(session string) []storedLine {
	c.t.Helper()
	f, err := os.Open(filepath.Join(c.dir, "data", "workspaces", "default", "sessions", session+".jsonl"))
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	var out []storedLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l storedLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && (l.Role == "user" || l.Role == "assistant") {
			out = append(out, l)
		}
	}
	if err := sc.Err(); err != nil {
		c.t.Fatal(err)
	}
	return out
}

// turnLines finds a turn's user message and reply.
func turnLines(lines []storedLine, turnID string) (user, reply storedLine, ok bool) {
	var hasUser, hasReply bool
	for _, l := range lines {
		if l.TurnID != turnID {
			continue
		}
		switch l.Role {
		case "user":
			user, hasUser = l, true
		case "assistant":
			reply, hasReply = l, true
		}
	}
	return user, reply, hasUser && hasReply
}

// crash kills -9 every process of the cluster at once.
func (c *cluster) crash() {
	c.t.Helper()
	all := append(append([]*waggletest.Proc{c.services}, c.runners...), c.gateways...)
	for _, p := range all {
		p.Signal(syscall.SIGKILL)
	}
	for _, p := range all {
		<-p.Exited()
	}
}

// restart starts every process again, as startCluster did, on the same
// data directory and NATS address (the processes from before the crash
// keep their output, logged apart if the test fails).
func (c *cluster) restart(o clusterOpts) {
	c.t.Helper()
	if o.grace == "" {
		o.grace = "30s"
	}
	if o.shutdown == "" {
		o.shutdown = "10s"
	}
	c.restarts++
	suffix := fmt.Sprintf("-r%d", c.restarts)
	natsAddr := strings.TrimPrefix(c.natsURL, "nats://")
	common := []string{"--log-format", "text", "--log-level", "debug", "--echo-delay", "1ms"}
	c.services = c.start("services"+suffix, "", append([]string{"--targets=session-store,approval,command", "--nats-listen", natsAddr,
		"--llm-url", c.model.llm[0].URL()}, common...)...)
	for i := range c.runners {
		c.runners[i] = c.start(fmt.Sprintf("runner-%d%s", i, suffix), "", append(append([]string{"--targets=turn-runner", "--nats-url", c.natsURL,
			"--llm-url", c.model.llm[i].URL(), "--disconnect-grace", o.grace, "--shutdown-timeout", o.shutdown}, c.natsAuth...), common...)...)
	}
	for i := range c.gateways {
		c.gateways[i] = c.start(fmt.Sprintf("gateway-%d%s", i, suffix), "gateway", append(append([]string{"--targets=gateway", "--nats-url", c.natsURL,
			"--llm-url", c.model.llm[0].URL()}, c.natsAuth...), common...)...)
	}
}
