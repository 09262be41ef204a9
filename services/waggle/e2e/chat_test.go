// Package e2e holds black-box tests: a real waggle app on a random port,
// real NATS and JetStream, real HTTP and SSE bytes.
package e2e

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

func echoText(msg string) string {
	return "**Waggle is running in local mode** (no LLM proxy connected).\n\nYour message: \"" + msg +
		"\"\n\nTo get AI replies, set WAGGLE_LLM_URL and save any key at /api/vault."
}

func jsonString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// TestEchoStreamExactBytes checks the whole echo-mode response byte for
// byte: headers, framing, ids, tokens with trailing spaces, done payload.
func TestEchoStreamExactBytes(t *testing.T) {
	srv := waggletest.Start(t)
	msg := `hello <b> & "quotes"`
	resp := srv.Do(http.MethodPost, "/api/chat", map[string]any{"message": msg, "workspace": "default", "session": "s1"},
		"Origin", "http://127.0.0.1:1420")
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	for k, v := range map[string]string{
		"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "Connection": "keep-alive",
		"X-Accel-Buffering": "no", "Access-Control-Allow-Origin": "http://127.0.0.1:1420",
	} {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if !regexp.MustCompile(`^[0-9a-f-]{36}$`).MatchString(resp.Header.Get("X-Waggle-Turn-Id")) {
		t.Errorf("X-Waggle-Turn-Id = %q", resp.Header.Get("X-Waggle-Turn-Id"))
	}
	text := echoText(msg)
	var want strings.Builder
	// Ids are stream sequences: the runner's internal markers (never sent
	// to clients) come first, so the first event's id is whatever follows
	// them; from there every event's id is one more.
	var first int
	if _, err := fmt.Sscanf(string(body), "id: %d\n", &first); err != nil {
		t.Fatalf("no id on the first event: %q", body[:min(len(body), 40)])
	}
	id := first - 1
	for _, piece := range strings.Split(text, " ") {
		id++
		fmt.Fprintf(&want, "id: %d\nevent: token\ndata: {\"content\":%s}\n\n", id, jsonString(piece+" "))
	}
	id++
	fmt.Fprintf(&want, "id: %d\nevent: done\ndata: {\"content\":%s,\"usage\":{\"prompt_tokens\":0,\"completion_tokens\":0,\"total_tokens\":0},\"toolsUsed\":[]}\n\n",
		id, jsonString(text))
	if string(body) != want.String() {
		t.Fatalf("stream bytes differ\n got: %q\nwant: %q", body, want.String())
	}
}

func TestStreamOriginFallback(t *testing.T) {
	srv := waggletest.Start(t)
	var turn string
	for origin, want := range map[string]string{
		"":                  "http://localhost:1420",
		"tauri://localhost": "tauri://localhost",
	} {
		var hdr []string
		if origin != "" {
			hdr = []string{"Origin", origin}
		}
		st := srv.Chat(map[string]any{"message": "hi"}, hdr...)
		if got := st.Resp.Header.Get("Access-Control-Allow-Origin"); got != want {
			t.Errorf("origin %q: ACAO = %q, want %q", origin, got, want)
		}
		turn = st.Resp.Header.Get("X-Waggle-Turn-Id")
		st.All(t)
	}
	// A foreign origin cannot start a turn (403 ORIGIN_NOT_ALLOWED) but
	// may follow one by GET: its stream names the first allowed origin,
	// never the foreign one.
	resp := srv.Do(http.MethodGet, "/api/chat/turns/"+turn+"/events", nil, "Origin", "http://localhost:1420.evil.com", "Last-Event-ID", "0")
	resp.Body.Close()
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "http://localhost:1420" {
		t.Errorf("foreign origin: ACAO = %q, want the first allowed origin", got)
	}
}

func TestHistoryAfterTurnAndRestart(t *testing.T) {
	srv := waggletest.Start(t)
	for _, m := range []string{"first message", "second message"} {
		evs := srv.Chat(map[string]any{"message": m, "workspace": "ws-a", "session": "sess-1"}).All(t)
		if evs[len(evs)-1].Name != "done" {
			t.Fatalf("last event %s", evs[len(evs)-1].Name)
		}
	}
	type histMsg struct{ ID, Role, Content, Timestamp string }
	var h struct {
		SessionID string
		Messages  []histMsg
		Count     int
	}
	check := func(when string) {
		t.Helper()
		if st := srv.JSON(http.MethodGet, "/api/history?workspace=ws-a&session=sess-1", nil, &h); st != 200 {
			t.Fatalf("%s: status %d", when, st)
		}
		if h.SessionID != "sess-1" || h.Count != 4 || len(h.Messages) != 4 {
			t.Fatalf("%s: history = %+v", when, h)
		}
		wantRoles := []string{"user", "assistant", "user", "assistant"}
		for i, m := range h.Messages {
			if m.ID != fmt.Sprintf("hist-%d", i) || m.Role != wantRoles[i] {
				t.Errorf("%s: message %d = %+v", when, i, m)
			}
		}
		if h.Messages[2].Content != "second message" || h.Messages[3].Content != echoText("second message") {
			t.Errorf("%s: contents %+v", when, h.Messages)
		}
	}
	check("before restart")
	stamps := []string{h.Messages[0].Timestamp, h.Messages[3].Timestamp}
	time.Sleep(5 * time.Millisecond)
	srv.Restart()
	check("after restart")
	// Timestamps are the stored ones, never "now".
	if h.Messages[0].Timestamp != stamps[0] || h.Messages[3].Timestamp != stamps[1] {
		t.Fatalf("timestamps changed across restart: %v vs %s,%s", stamps, h.Messages[0].Timestamp, h.Messages[3].Timestamp)
	}
}

func TestHistoryDefaultsAndUnknownSession(t *testing.T) {
	srv := waggletest.Start(t)
	srv.Chat(map[string]any{"message": "x", "workspaceId": "team-1"}).All(t)
	// session defaults to the workspace, as in the original.
	var h struct {
		SessionID string
		Count     int
	}
	srv.JSON(http.MethodGet, "/api/history?workspace=team-1", nil, &h)
	if h.SessionID != "team-1" || h.Count != 2 {
		t.Fatalf("history = %+v", h)
	}
	srv.JSON(http.MethodGet, "/api/history?workspace=team-1&session=nope", nil, &h)
	if h.Count != 0 {
		t.Fatalf("unknown session count = %d", h.Count)
	}
}

func TestDeleteChatHistory(t *testing.T) {
	srv := waggletest.Start(t)
	srv.Chat(map[string]any{"message": "keep me", "session": "s-del"}).All(t)
	var out map[string]any
	// The web client sends a JSON content type with no body (DESIGN §9).
	if st := srv.JSON(http.MethodDelete, "/api/chat/history?session=s-del", "", &out); st != 200 {
		t.Fatalf("status %d %v", st, out)
	}
	if out["ok"] != true || out["cleared"] != "s-del" {
		t.Fatalf("body = %v", out)
	}
	// The file stays (contract §1): history still reads it.
	var h struct{ Count int }
	srv.JSON(http.MethodGet, "/api/history?session=s-del", nil, &h)
	if h.Count != 2 {
		t.Fatalf("count after clear = %d, want 2 (disk untouched)", h.Count)
	}
}

func TestConcurrentTurnsOnTwoSessions(t *testing.T) {
	srv := waggletest.Start(t, waggletest.WithConfig(func(c *appConfig) { c.TurnRunner.EchoDelay = 2 * time.Millisecond }))
	var wg sync.WaitGroup
	results := make([][]waggletest.Event, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = srv.Chat(map[string]any{"message": fmt.Sprintf("stream %d", i), "session": fmt.Sprintf("conc-%d", i)}).All(t)
		}()
	}
	wg.Wait()
	for i, evs := range results {
		want := echoText(fmt.Sprintf("stream %d", i))
		if got := waggletest.Text(evs); got != want+" " {
			t.Errorf("stream %d text = %q", i, got)
		}
		var done struct{ Content string }
		evs[len(evs)-1].Decode(t, &done)
		if done.Content != want {
			t.Errorf("stream %d done = %q", i, done.Content)
		}
	}
}

// TestDisconnectCancelsTurn drops the client mid-stream: the turn stops,
// the partial reply is persisted with the reason, and neither the relay
// nor the turn goroutine is left behind.
func TestDisconnectCancelsTurn(t *testing.T) {
	srv := waggletest.Start(t, waggletest.WithConfig(func(c *appConfig) { c.TurnRunner.EchoDelay = 50 * time.Millisecond }))
	st := srv.Chat(map[string]any{"message": "please stop me midway", "session": "gone"})
	first, err := st.Next()
	if err != nil || first.Name != "token" {
		t.Fatalf("first event %v %v", first, err)
	}
	st.Close()

	var h struct {
		Messages []struct{ Role, Content string }
	}
	deadline := time.Now().Add(5 * time.Second)
	waitfor.Within(5*time.Second).NoError(t, "history after disconnect", func() error {
		srv.JSON(http.MethodGet, "/api/history?session=gone", nil, &h)
		if len(h.Messages) == 2 {
			return nil
		}
		return fmt.Errorf("%d messages: %+v", len(h.Messages), h.Messages)
	})
	if len(h.Messages) != 2 || h.Messages[1].Role != "assistant" {
		t.Fatalf("history after disconnect = %+v", h.Messages)
	}
	full := echoText("please stop me midway")
	if got := h.Messages[1].Content; got == full || !strings.HasPrefix(full, got) || got == "" {
		t.Fatalf("partial reply = %q (want a non-empty prefix of the full echo)", got)
	}
	// Within the same 5 s as the history.
	waitfor.Within(time.Until(deadline)).True(t, "relay and turn goroutines gone after the client left", func() bool {
		return !goroutineRunning("gateway.(*Service).relay", "turnrunner.(*turn).run")
	})
}

func goroutineRunning(names ...string) bool {
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	for _, n := range names {
		if strings.Contains(stacks, n) {
			return true
		}
	}
	return false
}
