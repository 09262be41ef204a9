package approvals

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestApproveRunsToolOnSameStream: the stream pauses at approval_required
// (the file is not written yet), the approval is listed as pending, and
// after the POST the same connection goes on: approved step, the tool's
// result, the model's reply, done.
func TestApproveRunsToolOnSameStream(t *testing.T) {
	srv := start(t, scriptedModel(t))
	args := writeArgs("notes/a.txt", "hello")
	st := srv.Chat(body("s1", "write_file", args, nil))
	before, a := untilApproval(t, st)
	if a.ToolName != "write_file" || a.SourceWorkspaceID == nil || *a.SourceWorkspaceID != ws {
		t.Fatalf("approval_required %+v", a)
	}
	var in map[string]string
	if err := json.Unmarshal(a.Input, &in); err != nil || in["path"] != "notes/a.txt" || in["content"] != "hello" {
		t.Fatalf("input %s", a.Input)
	}
	if count(before, "tool") == 0 {
		t.Fatalf("approval_required came before the tool event: %s", describe(before))
	}
	if _, ok := readFile(t, filePath(srv, ws, "notes/a.txt")); ok {
		t.Fatal("the file was written before the approval")
	}
	p := pending(t, srv)
	if p.Count != 1 || p.Pending[0].RequestID != a.RequestID || p.Pending[0].ToolName != "write_file" ||
		p.Pending[0].Timestamp == 0 || string(p.Pending[0].Input) != string(a.Input) {
		t.Fatalf("pending %+v", p)
	}

	approve(t, srv, a.RequestID, map[string]any{"approved": true})
	after := finish(t, st)
	if !hasStep(after, "✔ write_file approved") || toolResults(t, after, "write_file") != 1 {
		t.Fatalf("after approval: %s", describe(after))
	}
	if got, _ := readFile(t, filePath(srv, ws, "notes/a.txt")); got != "hello" {
		t.Fatalf("file content %q", got)
	}
	if text := waggletest.Text(after); !strings.HasPrefix(text, modelPrefix) || strings.Contains(text, "BLOCKED") {
		t.Fatalf("model reply %q", text)
	}
	if p := pending(t, srv); p.Count != 0 {
		t.Fatalf("still pending after the decision: %+v", p)
	}
	if st, rep := decide(t, srv, a.RequestID, map[string]any{"approved": true}); st != http.StatusConflict && st != http.StatusNotFound {
		t.Fatalf("second decision: %d %+v", st, rep)
	}
}

// TestDenyBlocksTool: no tool_result, the model reads the denial, the turn
// completes.
func TestDenyBlocksTool(t *testing.T) {
	srv := start(t, scriptedModel(t))
	st := srv.Chat(body("s1", "write_file", writeArgs("a.txt", "x"), nil))
	_, a := untilApproval(t, st)
	approve(t, srv, a.RequestID, map[string]any{"approved": false})
	after := finish(t, st)
	if !hasStep(after, "✖ write_file denied by user") || toolResults(t, after, "write_file") != 0 {
		t.Fatalf("after denial: %s", describe(after))
	}
	if text := waggletest.Text(after); text != modelPrefix+"[BLOCKED] User denied write_file" {
		t.Fatalf("model reply %q", text)
	}
	if _, ok := readFile(t, filePath(srv, ws, "a.txt")); ok {
		t.Fatal("a denied write happened")
	}
}

// TestUnknownAndInvalidDecisions covers the 404 and 400 bodies; a bad body
// leaves the approval pending.
func TestUnknownAndInvalidDecisions(t *testing.T) {
	srv := start(t, scriptedModel(t))
	var e map[string]any
	if st := srv.JSON(http.MethodPost, "/api/approval/no-such-id", map[string]any{"approved": true}, &e); st != 404 ||
		e["error"] != "No pending approval with that ID" {
		t.Fatalf("unknown id: %d %v", st, e)
	}

	st := srv.Chat(body("s1", "write_file", writeArgs("a.txt", "x"), nil))
	_, a := untilApproval(t, st)
	for _, b := range []any{
		map[string]any{"approved": "true"}, map[string]any{"approved": 1}, map[string]any{"approved": nil},
		map[string]any{}, map[string]any{"always": true}, "",
	} {
		var e map[string]any
		if code := srv.JSON(http.MethodPost, "/api/approval/"+a.RequestID, b, &e); code != 400 || e["error"] != "approved must be a boolean" {
			t.Fatalf("body %#v: %d %v", b, code, e)
		}
	}
	if p := pending(t, srv); p.Count != 1 {
		t.Fatalf("a rejected decision changed the approval: %+v", p)
	}
	approve(t, srv, a.RequestID, map[string]any{"approved": false})
	finish(t, st)
}

// TestAlwaysAllowGrantsScopeAndRevoke: "always" stores a grant before the
// tool runs; the next identical call passes with the grant step and no
// prompt; another path still prompts; revoking brings the prompt back.
func TestAlwaysAllowGrantsScopeAndRevoke(t *testing.T) {
	srv := start(t, scriptedModel(t))
	args := writeArgs("docs/plan.md", "v1")
	st := srv.Chat(body("s1", "write_file", args, nil))
	_, a := untilApproval(t, st)
	approve(t, srv, a.RequestID, map[string]any{"approved": true, "always": true, "sourceWorkspaceId": ws})
	finish(t, st)

	gs := grants(t, srv)
	if len(gs) != 1 || gs[0].ToolName != "write_file" || gs[0].TargetKey != "docs/plan.md" || gs[0].SourceWorkspaceID == nil ||
		*gs[0].SourceWorkspaceID != ws || gs[0].Description != "Write to docs/plan.md" || gs[0].ExpiresAt != nil || gs[0].GrantedAt == "" {
		t.Fatalf("grants %+v", gs)
	}

	evs := finish(t, srv.Chat(body("s2", "write_file", writeArgs("docs/plan.md", "v2"), nil)))
	if count(evs, "approval_required") != 0 || !hasStep(evs, "✔ write_file allowed by saved grant") || toolResults(t, evs, "write_file") != 1 {
		t.Fatalf("granted call: %s", describe(evs))
	}
	if got, _ := readFile(t, filePath(srv, ws, "docs/plan.md")); got != "v2" {
		t.Fatalf("content %q", got)
	}

	// Another path is another target.
	st = srv.Chat(body("s3", "write_file", writeArgs("docs/other.md", "x"), nil))
	_, b := untilApproval(t, st)
	approve(t, srv, b.RequestID, map[string]any{"approved": false})
	finish(t, st)

	var rev map[string]any
	if code := srv.JSON(http.MethodDelete, "/api/approval/grants/"+gs[0].ID, nil, &rev); code != 200 || rev["ok"] != true || rev["id"] != gs[0].ID {
		t.Fatalf("revoke: %d %v", code, rev)
	}
	if code := srv.JSON(http.MethodDelete, "/api/approval/grants/"+gs[0].ID, nil, &rev); code != 404 || rev["error"] != "Grant not found" {
		t.Fatalf("second revoke: %d %v", code, rev)
	}
	st = srv.Chat(body("s4", "write_file", writeArgs("docs/plan.md", "v3"), nil))
	_, c := untilApproval(t, st)
	approve(t, srv, c.RequestID, map[string]any{"approved": false})
	finish(t, st)
	if got, _ := readFile(t, filePath(srv, ws, "docs/plan.md")); got != "v2" {
		t.Fatalf("content after revoke %q", got)
	}
}

// TestNullScopedGrantAppliesEverywhere: a grant stored without
// sourceWorkspaceId (what the inbox sends) covers every workspace; clear
// removes it.
func TestNullScopedGrantAppliesEverywhere(t *testing.T) {
	srv := start(t, scriptedModel(t))
	args := writeArgs("shared.txt", "x")
	st := srv.Chat(body("s1", "write_file", args, nil))
	_, a := untilApproval(t, st)
	approve(t, srv, a.RequestID, map[string]any{"approved": true, "always": true})
	finish(t, st)
	if gs := grants(t, srv); len(gs) != 1 || gs[0].SourceWorkspaceID != nil {
		t.Fatalf("grants %+v", gs)
	}
	other := body("s1", "write_file", args, nil)
	other["workspace"] = "ws2"
	evs := finish(t, srv.Chat(other))
	if count(evs, "approval_required") != 0 || !hasStep(evs, "✔ write_file allowed by saved grant") {
		t.Fatalf("other workspace: %s", describe(evs))
	}
	if _, ok := readFile(t, filePath(srv, "ws2", "shared.txt")); !ok {
		t.Fatal("not written in ws2")
	}
	var ok map[string]any
	if code := srv.JSON(http.MethodPost, "/api/approval/grants/clear", nil, &ok); code != 200 || ok["ok"] != true || len(ok) != 1 {
		t.Fatalf("clear: %d %v", code, ok)
	}
	if gs := grants(t, srv); len(gs) != 0 {
		t.Fatalf("grants after clear %+v", gs)
	}
	st = srv.Chat(other)
	_, b := untilApproval(t, st)
	approve(t, srv, b.RequestID, map[string]any{"approved": false})
	finish(t, st)
}

// TestTimeoutDeniesAsTimeout: nobody answers; the step and the model's
// text say it timed out, not that the user said no.
func TestTimeoutDeniesAsTimeout(t *testing.T) {
	srv := start(t, scriptedModel(t), withConfig(func(c *app.Config) { c.Approval.Timeout = 300 * time.Millisecond }))
	st := srv.Chat(body("s1", "write_file", writeArgs("a.txt", "x"), nil))
	_, a := untilApproval(t, st)
	after := finish(t, st)
	if !hasStep(after, "⏱ write_file approval timed out — denied") || hasStep(after, "✖ write_file denied by user") ||
		toolResults(t, after, "write_file") != 0 {
		t.Fatalf("after timeout: %s", describe(after))
	}
	if text := waggletest.Text(after); text != modelPrefix+"[BLOCKED] Approval for write_file timed out" {
		t.Fatalf("model reply %q", text)
	}
	if code, rep := decide(t, srv, a.RequestID, map[string]any{"approved": true}); code != 404 && code != 409 {
		t.Fatalf("late approval: %d %+v", code, rep)
	}
	if _, ok := readFile(t, filePath(srv, ws, "a.txt")); ok {
		t.Fatal("a timed-out write happened")
	}
}

func TestAutonomy(t *testing.T) {
	srv := start(t, scriptedModel(t))
	future := time.Now().Add(time.Hour).UnixMilli()
	past := time.Now().Add(-time.Minute).UnixMilli()

	t.Run("trusted waives write_file", func(t *testing.T) {
		evs := finish(t, srv.Chat(body("t1", "write_file", writeArgs("t.txt", "x"), map[string]any{"level": "trusted", "expiresAt": future})))
		if count(evs, "approval_required") != 0 || !hasStep(evs, "⚡ write_file auto-approved (trusted)") || toolResults(t, evs, "write_file") != 1 {
			t.Fatalf("%s", describe(evs))
		}
	})
	t.Run("trusted waives unsafe bash", func(t *testing.T) {
		evs := finish(t, srv.Chat(body("t2", "bash", `{"command":"touch out.txt"}`, map[string]any{"level": "trusted"})))
		if count(evs, "approval_required") != 0 || !hasStep(evs, "⚡ bash auto-approved (trusted)") {
			t.Fatalf("%s", describe(evs))
		}
	})
	t.Run("safe bash runs silently", func(t *testing.T) {
		evs := finish(t, srv.Chat(body("t3", "bash", `{"command":"pwd"}`, nil)))
		for _, s := range steps(evs) {
			if strings.Contains(s, "auto-approved") || strings.Contains(s, "approved") {
				t.Fatalf("step %q for an ungated call", s)
			}
		}
		if count(evs, "approval_required") != 0 || toolResults(t, evs, "bash") != 1 {
			t.Fatalf("%s", describe(evs))
		}
	})
	t.Run("yolo still asks for sudo", func(t *testing.T) {
		st := srv.Chat(body("t4", "bash", `{"command":"sudo true"}`, map[string]any{"level": "yolo"}))
		_, a := untilApproval(t, st)
		approve(t, srv, a.RequestID, map[string]any{"approved": false})
		evs := finish(t, st)
		if toolResults(t, evs, "bash") != 0 || !hasStep(evs, "✖ bash denied by user") {
			t.Fatalf("%s", describe(evs))
		}
	})
	t.Run("expired yolo is normal", func(t *testing.T) {
		st := srv.Chat(body("t5", "write_file", writeArgs("e.txt", "x"), map[string]any{"level": "yolo", "expiresAt": past}))
		before, a := untilApproval(t, st)
		for _, s := range steps(before) {
			if strings.Contains(s, "auto-approved") {
				t.Fatalf("expired elevation applied: %q", s)
			}
		}
		approve(t, srv, a.RequestID, map[string]any{"approved": false})
		finish(t, st)
	})
}

// TestConcurrentChatsSeeOnlyTheirOwnApproval: two chats wait at once; each
// stream carries exactly its own approval_required, both are listed, and
// each decision reaches only its own turn.
func TestConcurrentChatsSeeOnlyTheirOwnApproval(t *testing.T) {
	srv := start(t, scriptedModel(t))
	st1 := srv.Chat(body("c1", "write_file", writeArgs("one.txt", "1"), nil))
	st2 := srv.Chat(body("c2", "write_file", writeArgs("two.txt", "2"), nil))
	_, a1 := untilApproval(t, st1)
	_, a2 := untilApproval(t, st2)
	if a1.RequestID == a2.RequestID || !strings.Contains(string(a1.Input), "one.txt") || !strings.Contains(string(a2.Input), "two.txt") {
		t.Fatalf("approvals %+v %+v", a1, a2)
	}
	if p := pending(t, srv); p.Count != 2 {
		t.Fatalf("pending %+v", p)
	}
	approve(t, srv, a2.RequestID, map[string]any{"approved": false})
	evs2 := finish(t, st2)
	approve(t, srv, a1.RequestID, map[string]any{"approved": true})
	evs1 := finish(t, st1)
	for i, evs := range [][]waggletest.Event{evs1, evs2} {
		if n := count(evs, "approval_required"); n != 0 {
			t.Fatalf("chat %d saw %d more approval_required: %s", i+1, n, describe(evs))
		}
	}
	if !hasStep(evs1, "✔ write_file approved") || hasStep(evs1, "✖ write_file denied by user") {
		t.Fatalf("chat 1: %s", describe(evs1))
	}
	if !hasStep(evs2, "✖ write_file denied by user") || hasStep(evs2, "✔ write_file approved") {
		t.Fatalf("chat 2: %s", describe(evs2))
	}
	if _, ok := readFile(t, filePath(srv, ws, "one.txt")); !ok {
		t.Fatal("one.txt not written")
	}
	if _, ok := readFile(t, filePath(srv, ws, "two.txt")); ok {
		t.Fatal("two.txt written")
	}
}

// TestDoubleApproveRunsOnce: concurrent approvals of one request; exactly
// one wins and the tool runs once.
func TestDoubleApproveRunsOnce(t *testing.T) {
	srv := start(t, scriptedModel(t))
	st := srv.Chat(body("s1", "write_file", writeArgs("once.txt", "x"), nil))
	_, a := untilApproval(t, st)
	var wg sync.WaitGroup
	codes := make([]int, 6)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _ = decide(t, srv, a.RequestID, map[string]any{"approved": true, "always": i%2 == 0})
		}()
	}
	wg.Wait()
	ok := 0
	for _, c := range codes {
		switch c {
		case 200:
			ok++
		case 404, 409:
		default:
			t.Fatalf("codes %v", codes)
		}
	}
	if ok != 1 {
		t.Fatalf("%d approvals won (codes %v)", ok, codes)
	}
	evs := finish(t, st)
	if n := toolResults(t, evs, "write_file"); n != 1 {
		t.Fatalf("write_file ran %d times: %s", n, describe(evs))
	}
	if n := strings.Count(strings.Join(steps(evs), "\n"), "✔ write_file approved"); n != 1 {
		t.Fatalf("%d approved steps", n)
	}
}

// TestDisconnectDeniesPendingApproval: a client that goes away while its
// approval waits cancels it at once (not after the timeout).
func TestDisconnectDeniesPendingApproval(t *testing.T) {
	srv := start(t, scriptedModel(t))
	st := srv.Chat(body("s1", "write_file", writeArgs("gone.txt", "x"), nil))
	_, a := untilApproval(t, st)
	st.Close()
	waitfor.True(t, "approval cancelled after disconnect", func() bool { return pending(t, srv).Count == 0 })
	if code, _ := decide(t, srv, a.RequestID, map[string]any{"approved": true}); code != 409 && code != 404 {
		t.Fatalf("approving a cancelled request: %d", code)
	}
	if _, ok := readFile(t, filePath(srv, ws, "gone.txt")); ok {
		t.Fatal("tool ran after the client left")
	}
}

// TestTwoGatewaysOneNATS: the stream runs on gateway A; gateway B (another
// process on the same NATS) lists and approves it.
func TestTwoGatewaysOneNATS(t *testing.T) {
	a := start(t, scriptedModel(t), withConfig(func(c *app.Config) { c.NATSListen = waggletest.FreeAddr(t) }))
	if a.App.NATSURL() == "" {
		t.Fatal("embedded NATS has no client URL")
	}
	b := waggletest.Start(t, waggletest.WithNATSOf(a), withConfig(func(c *app.Config) { c.Targets = []string{app.TargetGateway} }))

	st := a.Chat(body("s1", "write_file", writeArgs("ab.txt", "from A"), nil))
	_, req := untilApproval(t, st)
	if p := pending(t, b); p.Count != 1 || p.Pending[0].RequestID != req.RequestID {
		t.Fatalf("pending on B %+v", p)
	}
	approve(t, b, req.RequestID, map[string]any{"approved": true})
	evs := finish(t, st)
	if toolResults(t, evs, "write_file") != 1 {
		t.Fatalf("%s", describe(evs))
	}
	if got, _ := readFile(t, filePath(a, ws, "ab.txt")); got != "from A" {
		t.Fatalf("content %q", got)
	}
}

// TestApprovalServiceRestartLosesNothing: the approval service runs as its
// own process; it is restarted while a request waits; the pending approval
// survives and its decision reaches the waiting turn.
func TestApprovalServiceRestartLosesNothing(t *testing.T) {
	main := start(t, scriptedModel(t), withConfig(func(c *app.Config) {
		c.NATSListen = waggletest.FreeAddr(t)
		c.Targets = []string{app.TargetGateway, app.TargetTurnRunner, app.TargetSessionStore, app.TargetCommand}
	}))
	approvals := waggletest.Start(t, waggletest.WithNATSOf(main), withConfig(func(c *app.Config) {
		c.Targets = []string{app.TargetApproval}
		c.Approval.Timeout = 10 * time.Second
	}))

	st := main.Chat(body("s1", "write_file", writeArgs("kept.txt", "x"), nil))
	_, a := untilApproval(t, st)
	approvals.Stop()
	var e map[string]any
	if code := main.JSON(http.MethodGet, "/api/approval/pending", nil, &e); code != http.StatusServiceUnavailable {
		t.Fatalf("pending with no approval service: %d %v", code, e)
	}
	approvals.Restart()
	if p := pending(t, main); p.Count != 1 || p.Pending[0].RequestID != a.RequestID {
		t.Fatalf("pending after restart %+v", p)
	}
	approve(t, main, a.RequestID, map[string]any{"approved": true})
	evs := finish(t, st)
	if toolResults(t, evs, "write_file") != 1 {
		t.Fatalf("%s", describe(evs))
	}
	if _, ok := readFile(t, filePath(main, ws, "kept.txt")); !ok {
		t.Fatal("kept.txt not written")
	}
}
