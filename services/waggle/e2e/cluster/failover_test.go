package cluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// tokenDelay paces the scripted model: 3,000 tokens take a few seconds
// more than an election, so the turn streams on after the pause.
const tokenDelay = 3 * time.Millisecond

// TestTurnStreamLeaderKilled: the node that leads the turn stream is killed
// (SIGKILL) while a 3,000-token reply streams. The client sees the turn go
// on after a pause and receives every token once and in order (what it
// read is done.content and the history), with no stream_gap; a resume
// through the other gateway gives the same events. While the cluster
// elects, new chats on either gateway answer 503 BUS_UNAVAILABLE or work,
// never 500.
func TestTurnStreamLeaderKilled(t *testing.T) {
	h := startHarness(t)
	js := h.dial()
	pieces := numbered(3000)
	want := strings.Join(pieces, "")
	h.setScript(func(r *llmtest.Request) llmtest.Response {
		if msg := lastUser(r); msg != "long" {
			return llmtest.Reply("re: " + msg)
		}
		return slowReply(pieces, tokenDelay)
	})

	st := h.chat(0, map[string]any{"message": "long", "session": "long"})
	turnID := st.Resp.Header.Get("X-Waggle-Turn-Id")
	if turnID == "" {
		t.Fatal("chat answered without X-Waggle-Turn-Id")
	}
	leader := h.leader(js, protocol.StreamTurns)
	t.Logf("%s leads %s", leader.name, protocol.StreamTurns)

	var (
		tokens   int
		killedAt atomic.Pointer[time.Time]
		probes   = make(chan []answer, 1)
		election = make(chan time.Duration, 1)
	)
	evs, err := collect(st, 3*time.Minute, func(e timedEvent) {
		if e.Name != "token" {
			return
		}
		if tokens++; tokens == 300 {
			// Kill while the reply streams, and probe new chats during
			// the election; the stream is read on meanwhile.
			go func() {
				h.kill(leader)
				now := time.Now()
				killedAt.Store(&now)
				go func() { election <- elected(js, protocol.StreamTurns, leader.name, now, time.Minute) }()
				probes <- h.probeChats(now, 15*time.Second)
			}()
		}
	})
	if killedAt.Load() == nil {
		t.Fatalf("the reply ended before the kill (%d tokens)", tokens)
	}
	checkProbes := func() {
		for _, a := range <-probes {
			if a.status != http.StatusOK && !a.retryable() {
				t.Errorf("a chat during the election answered %s, want 200 or a 503 BUS_UNAVAILABLE/BUS_TIMEOUT", a)
			}
		}
	}
	if err != nil {
		checkProbes()
		t.Fatalf("live stream: %v", err)
	}
	live := events(evs)
	for _, e := range live {
		if e.Name == protocol.EventStreamGap {
			t.Errorf("the client got stream_gap: %s", e.Data)
		}
	}
	got := waggletest.Text(live)
	if got != want {
		t.Errorf("the tokens the client read are not the reply: %s", firstDiff(got, want))
	}
	if c := doneContent(t, live); c != want {
		t.Errorf("done.content is not the reply: %s", firstDiff(c, want))
	}
	pause := longestSilence(evs, *killedAt.Load())
	lost, doubled := tokenLoss(got, len(pieces))
	t.Logf("pause after killing the turn-stream leader: %s; the stream had a new leader after %s; tokens lost %d, doubled %d (of %d)",
		pause.Round(time.Millisecond), (<-election).Round(time.Millisecond), lost, doubled, len(pieces))

	checkProbes()

	// The same events through the other gateway, from the start.
	resp := h.do(1, http.MethodGet, "/api/chat/turns/"+turnID+"/events", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("resume on gateway 1: %s", read(resp))
	}
	resumed, err := collect(waggletest.NewStream(resp), time.Minute, nil)
	if err != nil {
		t.Fatalf("resume on gateway 1: %v", err)
	}
	if a, b := waggletest.Coalesced(live), waggletest.Coalesced(events(resumed)); !sameEvents(a, b) {
		t.Errorf("resume through gateway 1 differs from the live stream:\nlive    %v\nresumed %v", tailNames(a), tailNames(b))
	}
	if hist := h.history(1, "long"); len(hist) != 2 || hist[1].Content != want {
		t.Errorf("history: %d messages", len(hist))
	}

	// The killed node comes back on its store and catches up.
	h.restart(leader)
	h.waitCurrent(js, protocol.StreamTurns)
}

// TestApprovalsLeaderKilled: the node that leads the approvals bucket is
// killed while a turn waits for an approval. Deciding the approval through
// the other gateway (retried while it answers 503 BUS_UNAVAILABLE, never
// 500) completes the turn on the client that started it.
func TestApprovalsLeaderKilled(t *testing.T) {
	h := startHarness(t)
	js := h.dial()
	h.setScript(func(r *llmtest.Request) llmtest.Response {
		msg := lastUser(r)
		if file, ok := strings.CutPrefix(msg, "write "); ok {
			if toolResults(r) == 0 {
				return llmtest.Response{Steps: llmtest.ToolCall(0, "call_1", "write_file", fmt.Sprintf(`{"path":%q,"content":"yes"}`, file), 1)}
			}
			return llmtest.Reply("written")
		}
		return llmtest.Reply("re: " + msg)
	})
	st := h.chat(0, map[string]any{"message": "write pending.txt", "session": "approval"})
	var reqID string
	for reqID == "" {
		ev, err := st.Next()
		if err != nil {
			t.Fatalf("stream ended before approval_required: %v", err)
		}
		if ev.Name == "approval_required" {
			var a struct{ RequestID string }
			ev.Decode(t, &a)
			reqID = a.RequestID
		}
	}
	leader := h.leader(js, "KV_"+protocol.BucketApprovals)
	t.Logf("%s leads the approvals bucket", leader.name)
	h.kill(leader)
	killed := time.Now()

	var answers []answer
	waitfor.Within(90*time.Second).Every(100*time.Millisecond).NoError(t, "the approval decided", func() error {
		a := read(h.do(1, http.MethodPost, "/api/approval/"+reqID, map[string]any{"approved": true, "always": false}))
		answers = append(answers, a)
		switch {
		case a.status == http.StatusOK:
			return nil
		case a.retryable():
			return fmt.Errorf("%s", a)
		default:
			t.Fatalf("deciding the approval during the election answered %s (after %v)", a, answers)
			return nil
		}
	})
	t.Logf("approval decided %s after the kill (%d tries)", time.Since(killed).Round(time.Millisecond), len(answers))

	rest, err := collect(st, 90*time.Second, nil)
	if err != nil {
		t.Fatalf("the approving client's stream: %v", err)
	}
	t.Logf("the turn ended %s after the kill", time.Since(killed).Round(time.Millisecond))
	if evs := events(rest); waggletest.Text(evs) != "written" || doneContent(t, evs) != "written" {
		t.Errorf("the approved turn: %v", tailNames(evs))
	}
	if b, err := os.ReadFile(filepath.Join(h.services.DataDir, "workspaces", "default", "files", "pending.txt")); err != nil || string(b) != "yes" {
		t.Errorf("pending.txt: %q %v", b, err)
	}
	h.restart(leader)
}

// TestRollingRestart: every node is stopped as a planned restart stops it
// (SIGTERM) and restarted on its store, one at a time, while turns stream one after another over both gateways.
// Every turn that was accepted ends in done with its whole reply, and its
// history is complete; a chat refused meanwhile is a 503 BUS_UNAVAILABLE.
func TestRollingRestart(t *testing.T) {
	h := startHarness(t)
	js := h.dial()
	pieces := numbered(300)
	want := strings.Join(pieces, "")
	h.setScript(func(r *llmtest.Request) llmtest.Response { return slowReply(pieces, tokenDelay) })

	type turn struct {
		session string
		id      string
		evs     []timedEvent
		err     error
	}
	// describe names a turn for a failure: its id and gateway, and when it
	// started, to find it in the processes' logs.
	describe := func(session string, gw int, resp *http.Response, began time.Time) string {
		return fmt.Sprintf("%s (turn %s on gateway %d, started %s)", session, resp.Header.Get("X-Waggle-Turn-Id"), gw, began.UTC().Format("15:04:05.000"))
	}
	var (
		mu      sync.Mutex
		turns   []turn
		refused []answer
		stop    = make(chan struct{})
		ended   = make(chan struct{})
		halt    = sync.OnceFunc(func() { close(stop); <-ended })
	)
	// Stop the turns before the processes stop, also when the test fails.
	t.Cleanup(halt)
	completed := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(turns)
	}
	go func() {
		defer close(ended)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			session := fmt.Sprintf("roll-%d", i)
			began := time.Now()
			resp, err := h.post(i%2, "/api/chat", map[string]any{"message": "turn " + session, "session": session})
			if err != nil {
				mu.Lock()
				turns = append(turns, turn{session, "", nil, err})
				mu.Unlock()
				continue
			}
			if resp.StatusCode != http.StatusOK {
				a := read(resp)
				mu.Lock()
				refused = append(refused, a)
				mu.Unlock()
				continue
			}
			evs, err := collect(waggletest.NewStream(resp), time.Minute, nil)
			if err != nil {
				err = fmt.Errorf("%s: %w", describe(session, i%2, resp, began), err)
			}
			mu.Lock()
			turns = append(turns, turn{session, resp.Header.Get("X-Waggle-Turn-Id"), evs, err})
			mu.Unlock()
		}
	}()
	var pauses []time.Duration
	// What happened to the cluster when, to tell what a pause waited for.
	type mark struct {
		at   time.Time
		what string
	}
	var marks []mark
	for _, n := range h.nodes {
		before := completed()
		var led []string
		for _, s := range h.streams(js) {
			if h.leader(js, s) == n {
				led = append(led, s)
			}
		}
		meta := h.metaLeader(n)
		h.stop(n)
		marks = append(marks, mark{time.Now(), fmt.Sprintf("stopped (SIGTERM) %s (it led %s; the meta group's leader was %s)", n.name, strings.Join(led, ", "), meta)})
		// At least one turn streams with the node down.
		waitfor.Within(2*time.Minute).Every(100*time.Millisecond).True(t, "two turns ended with "+n.name+" down", func() bool { return completed() > before+1 })
		h.restart(n)
		marks = append(marks, mark{time.Now(), "restarted " + n.name})
		for _, s := range h.streams(js) {
			h.waitCurrent(js, s)
		}
		marks = append(marks, mark{time.Now(), "every replica current"})
	}
	halt()
	// Each pause of a turn, placed among the marks.
	since := func(at time.Time) string { return fmt.Sprintf("+%.2fs", at.Sub(marks[0].at).Seconds()) }
	for _, m := range marks {
		t.Logf("%s (%s) %s", since(m.at), m.at.UTC().Format("15:04:05.000"), m.what)
	}
	defer func() {
		h.keepLogs()
		for _, tr := range turns {
			for i := 1; i < len(tr.evs); i++ {
				if gap := tr.evs[i].at.Sub(tr.evs[i-1].at); gap > time.Second {
					t.Logf("%s paused %s from %s to %s, between %s #%d and %s #%d", tr.session, gap.Round(time.Millisecond),
						since(tr.evs[i-1].at), since(tr.evs[i].at), tr.evs[i-1].Name, tr.evs[i-1].ID, tr.evs[i].Name, tr.evs[i].ID)
				}
			}
		}
	}()

	mu.Lock()
	defer mu.Unlock()
	if len(turns) < 2*nodes {
		t.Errorf("only %d turns during the rolling restart", len(turns))
	}
	for _, tr := range turns {
		if tr.err != nil {
			t.Errorf("%v", tr.err)
			continue
		}
		evs := events(tr.evs)
		if got := waggletest.Text(evs); got != want {
			t.Errorf("%s: the tokens read are not the reply: %s", tr.session, firstDiff(got, want))
		}
		if c := doneContent(t, evs); c != want {
			t.Errorf("%s: done.content: %s", tr.session, firstDiff(c, want))
		}
		if slices.ContainsFunc(evs, func(e waggletest.Event) bool { return e.Name == protocol.EventStreamGap }) {
			t.Errorf("%s: stream_gap", tr.session)
			h.logStored(js, tr.id)
		}
		hist := h.history(0, tr.session)
		if len(hist) != 2 || hist[0].Content != "turn "+tr.session || hist[1].Content != want {
			t.Errorf("%s: history of %d messages", tr.session, len(hist))
		}
		if p := longestSilence(tr.evs, time.Time{}); p > time.Second {
			pauses = append(pauses, p)
		}
	}
	for _, a := range refused {
		if !a.retryable() {
			t.Errorf("a chat during the rolling restart answered %s, want a 503 BUS_UNAVAILABLE/BUS_TIMEOUT", a)
		}
	}
	t.Logf("rolling restart: %d turns done, %d chats refused with 503, pauses over 1s: %v", len(turns), len(refused), pauses)
}

// probeChats starts a chat on each gateway in turn until d has passed
// since from, and returns every answer; a chat that streams is read to
// its end (and must end in done).
func (h *harness) probeChats(from time.Time, d time.Duration) []answer {
	var out []answer
	for i := 0; time.Since(from) < d; i++ {
		msg := fmt.Sprintf("probe %d", i)
		resp, err := h.post(i%2, "/api/chat", map[string]any{"message": msg, "session": fmt.Sprintf("probe-%d", i)})
		if err != nil {
			out = append(out, answer{status: -1, body: err.Error()})
			continue
		}
		if resp.StatusCode != http.StatusOK {
			out = append(out, read(resp))
			continue
		}
		evs, err := collect(waggletest.NewStream(resp), time.Minute, nil)
		a := answer{status: http.StatusOK}
		if err != nil || waggletest.Text(events(evs)) != "re: "+msg {
			a = answer{status: -1, body: fmt.Sprintf("chat %q streamed but did not finish: %v %v", msg, err, lastNames(evs, 3))}
		}
		out = append(out, a)
	}
	return out
}

// streams lists the cluster's streams (Waggle's streams and buckets).
func (h *harness) streams(js jetstream.JetStream) []string {
	h.t.Helper()
	var names []string
	waitfor.Within(60*time.Second).Every(200*time.Millisecond).NoError(h.t, "the list of streams", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		names = names[:0]
		l := js.StreamNames(ctx)
		for n := range l.Name() {
			names = append(names, n)
		}
		return l.Err()
	})
	return names
}

// longestSilence is the longest time between two events the client read
// after from (the zero time: over the whole stream).
func longestSilence(evs []timedEvent, from time.Time) time.Duration {
	var longest time.Duration
	for i := 1; i < len(evs); i++ {
		if evs[i].at.Before(from) {
			continue
		}
		longest = max(longest, evs[i].at.Sub(evs[i-1].at))
	}
	return longest
}

// sameEvents compares two coalesced streams by name and data.
func sameEvents(a, b []waggletest.Event) bool {
	return slices.EqualFunc(a, b, func(x, y waggletest.Event) bool {
		return x.Name == y.Name && (x.Name == "token" && x.Content() == y.Content() || string(x.Data) == string(y.Data))
	})
}

// tokenLoss counts the tokens of a numbered(n) reply missing from got,
// and those it holds more than once.
func tokenLoss(got string, n int) (lost, doubled int) {
	seen := map[string]int{}
	for _, w := range strings.Fields(got) {
		seen[w]++
	}
	for _, w := range numbered(n) {
		switch c := seen[strings.TrimSpace(w)]; {
		case c == 0:
			lost++
		case c > 1:
			doubled += c - 1
		}
	}
	return lost, doubled
}
