// Package agentloop holds black-box tests of chat turns that run the agent
// loop: a real waggle app talking to libs/llmtest, a scripted
// OpenAI-compatible server, over real HTTP.
package agentloop

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

const (
	ws      = "ws1"
	session = "s1"
)

// newLLM starts a scripted model server that closes after the test.
func newLLM(t *testing.T, opts ...llmtest.Option) *llmtest.Server {
	t.Helper()
	s := llmtest.New(opts...)
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// start runs waggle against llm on a fresh data dir; files maps paths
// relative to the data dir to contents written before the app starts.
func start(t *testing.T, llm *llmtest.Server, files map[string]string) *waggletest.Server {
	t.Helper()
	dir := t.TempDir()
	for rel, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return waggletest.Start(t, waggletest.WithLLM(llm.URL()), waggletest.WithDataDir(dir))
}

// chat is a chat body for the test workspace and session; write tools
// run without a prompt (yolo autonomy).
func chat(message string) map[string]any {
	return map[string]any{"message": message, "workspace": ws, "session": session, "autonomy": map[string]any{"level": "yolo"}}
}

func filesDir(srv *waggletest.Server) string {
	return filepath.Join(srv.DataDir, "workspaces", ws, "files")
}

func named(evs []waggletest.Event, name string) []waggletest.Event {
	var out []waggletest.Event
	for _, e := range evs {
		if e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// toolEvent and toolResult are the tool / tool_result payloads.
type toolEvent struct {
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type toolResult struct {
	Name     string `json:"name"`
	Result   string `json:"result"`
	Duration *int64 `json:"duration"`
	IsError  bool   `json:"isError"`
}

// modelTools are the tool and tool_result events of model tool calls
// (auto-recall left out).
func modelTools(t *testing.T, evs []waggletest.Event) ([]toolEvent, []toolResult) {
	t.Helper()
	var calls []toolEvent
	var results []toolResult
	for _, e := range evs {
		switch e.Name {
		case "tool":
			var c toolEvent
			e.Decode(t, &c)
			if c.Name != "auto_recall" {
				calls = append(calls, c)
			}
		case "tool_result":
			var r toolResult
			e.Decode(t, &r)
			if r.Name != "auto_recall" {
				results = append(results, r)
			}
		}
	}
	return calls, results
}

type doneData struct {
	Content string `json:"content"`
	Usage   struct {
		InputTokens  int `json:"inputTokens"`
		OutputTokens int `json:"outputTokens"`
	} `json:"usage"`
	ToolsUsed []string `json:"toolsUsed"`
	Model     string   `json:"model"`
	Cost      float64  `json:"cost"`
	Tokens    struct {
		Input  int `json:"input"`
		Output int `json:"output"`
	} `json:"tokens"`
}

// done returns the stream's done payload; the stream must end with it.
func done(t *testing.T, evs []waggletest.Event) doneData {
	t.Helper()
	if len(evs) == 0 || evs[len(evs)-1].Name != "done" {
		t.Fatalf("stream does not end with done: %v", describe(evs))
	}
	var d doneData
	evs[len(evs)-1].Decode(t, &d)
	return d
}

func describe(evs []waggletest.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "\n  %s %s", e.Name, e.Data)
	}
	return b.String()
}

func toolNames(ts []toolEvent) []string {
	out := make([]string, len(ts))
	for i, c := range ts {
		out[i] = c.Name
	}
	return out
}

type histMsg struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func history(t *testing.T, srv *waggletest.Server) []histMsg {
	t.Helper()
	var h struct {
		Messages []histMsg `json:"messages"`
		Count    int       `json:"count"`
	}
	if st := srv.JSON(http.MethodGet, "/api/history?workspace="+ws+"&session="+session, nil, &h); st != http.StatusOK {
		t.Fatalf("history status %d", st)
	}
	return h.Messages
}

// waitHistory polls the history until it has n messages: persistence after
// a disconnect happens on the runner with no stream left to tell us.
func waitHistory(t *testing.T, srv *waggletest.Server, n int) []histMsg {
	t.Helper()
	var h []histMsg
	waitfor.NoError(t, fmt.Sprintf("%d messages in the history", n), func() error {
		if h = history(t, srv); len(h) < n {
			return fmt.Errorf("history has %d messages, want %d: %+v", len(h), n, h)
		}
		return nil
	})
	return h
}

// sessionLines returns the raw JSONL lines of the test session's file.
func sessionLines(t *testing.T, srv *waggletest.Server) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(srv.DataDir, "workspaces", ws, "sessions", session+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, ln := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(ln), &m); err != nil {
			t.Fatalf("session line %q: %v", ln, err)
		}
		out = append(out, m)
	}
	return out
}

func toolLines(lines []map[string]any) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l["type"] == "tool" {
			out = append(out, l)
		}
	}
	return out
}

// nextUntil reads events until one satisfies stop (which is returned last).
func nextUntil(t *testing.T, st *waggletest.Stream, stop func(waggletest.Event) bool) []waggletest.Event {
	t.Helper()
	var out []waggletest.Event
	for {
		ev, err := st.Next()
		if err == io.EOF {
			t.Fatalf("stream ended early: %v", describe(out))
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
		if stop(ev) {
			return out
		}
		if ev.Name == "done" || ev.Name == "error" {
			t.Fatalf("stream ended early: %v", describe(out))
		}
	}
}

// retryNow is a server error whose Retry-After makes the agent retry at once.
func retryNow(status int) llmtest.Response {
	r := llmtest.ErrorStatus(status, "upstream failure")
	r.Header = http.Header{"Retry-After": []string{"0"}}
	return r
}

// steps builds a streamed response from steps and step lists.
func steps(parts ...any) llmtest.Response { return llmtest.Response{Steps: llmtest.Steps(parts...)} }

// waitFor waits for ch to close, failing the test after 10s.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// chatRequest is the i-th chat request the model server received.
func chatRequest(t *testing.T, llm *llmtest.Server, i int) llmtest.ChatRequest {
	t.Helper()
	reqs := llm.ChatRequests()
	if len(reqs) <= i {
		t.Fatalf("model received %d requests, want at least %d", len(reqs), i+1)
	}
	return reqs[i].Chat
}
