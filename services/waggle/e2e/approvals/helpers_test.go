// Package approvals holds black-box tests of tool approvals: a real waggle
// app (or several on one NATS) driving the agent loop against libs/llmtest,
// gated tool calls pausing the stream, and the approval routes resolving
// them over real HTTP.
package approvals

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
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

const ws = "ws1"

// modelPrefix marks the model's final reply: it repeats what the tool call
// returned, so a test sees exactly what the model was told.
const modelPrefix = "MODEL SAW: "

// scriptedModel answers every chat request from its content, so concurrent
// chats need no shared script: a user message containing
// "CALL <tool> <json args>" gets that tool call; a request whose last
// message is a tool result gets modelPrefix + that result.
func scriptedModel(t *testing.T) *llmtest.Server {
	t.Helper()
	s := llmtest.New(llmtest.WithHandler(llmtest.ToolCaller(modelPrefix)))
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// start runs a whole waggle app against the scripted model. Approvals time
// out after 10s instead of 5m, so a test that wrongly gets a prompt fails
// quickly instead of hanging.
func start(t *testing.T, llm *llmtest.Server, opts ...waggletest.Option) *waggletest.Server {
	t.Helper()
	base := []waggletest.Option{waggletest.WithLLM(llm.URL()), withConfig(func(c *app.Config) { c.Approval.Timeout = 10 * time.Second })}
	return waggletest.Start(t, append(base, opts...)...)
}

func withConfig(fn func(c *app.Config)) waggletest.Option { return waggletest.WithConfig(fn) }

// body is a chat request that makes the model call tool with args.
func body(session, tool, args string, autonomy map[string]any) map[string]any {
	b := map[string]any{"message": "please CALL " + tool + " " + args, "workspace": ws, "session": session}
	if autonomy != nil {
		b["autonomy"] = autonomy
	}
	return b
}

func writeArgs(path, content string) string {
	data, _ := json.Marshal(map[string]string{"path": path, "content": content})
	return string(data)
}

func filePath(srv *waggletest.Server, workspace, rel string) string {
	return filepath.Join(srv.DataDir, "workspaces", workspace, "files", filepath.FromSlash(rel))
}

func readFile(t *testing.T, path string) (string, bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(data), true
}

type approvalRequired struct {
	RequestID         string          `json:"requestId"`
	ToolName          string          `json:"toolName"`
	Input             json.RawMessage `json:"input"`
	SourceWorkspaceID *string         `json:"sourceWorkspaceId"`
}

// untilApproval reads the stream up to its approval_required event.
func untilApproval(t *testing.T, st *waggletest.Stream) ([]waggletest.Event, approvalRequired) {
	t.Helper()
	evs := until(t, st, "approval_required")
	var a approvalRequired
	evs[len(evs)-1].Decode(t, &a)
	if a.RequestID == "" {
		t.Fatalf("approval_required without requestId: %s", evs[len(evs)-1].Data)
	}
	return evs, a
}

// until reads events until one named name (returned last); the test fails
// if the stream ends first.
func until(t *testing.T, st *waggletest.Stream, name string) []waggletest.Event {
	t.Helper()
	var out []waggletest.Event
	for {
		ev, err := st.Next()
		if err == io.EOF {
			t.Fatalf("stream ended before %s: %s", name, describe(out))
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
		if ev.Name == name {
			return out
		}
		if ev.Name == "done" || ev.Name == "error" {
			t.Fatalf("stream ended before %s: %s", name, describe(out))
		}
	}
}

func describe(evs []waggletest.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "\n  %s %s", e.Name, e.Data)
	}
	return b.String()
}

func steps(evs []waggletest.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Name == "step" {
			out = append(out, e.Content())
		}
	}
	return out
}

func hasStep(evs []waggletest.Event, text string) bool {
	for _, s := range steps(evs) {
		if s == text {
			return true
		}
	}
	return false
}

func count(evs []waggletest.Event, name string) int {
	n := 0
	for _, e := range evs {
		if e.Name == name {
			n++
		}
	}
	return n
}

// toolResults counts the tool_result events of one tool.
func toolResults(t *testing.T, evs []waggletest.Event, tool string) int {
	t.Helper()
	n := 0
	for _, e := range evs {
		if e.Name != "tool_result" {
			continue
		}
		var r struct{ Name string }
		e.Decode(t, &r)
		if r.Name == tool {
			n++
		}
	}
	return n
}

// finish reads the rest of the stream, which must end with done.
func finish(t *testing.T, st *waggletest.Stream) []waggletest.Event {
	t.Helper()
	evs := st.All(t)
	if len(evs) == 0 || evs[len(evs)-1].Name != "done" {
		t.Fatalf("stream does not end with done: %s", describe(evs))
	}
	return evs
}

type decideReply struct {
	OK        bool   `json:"ok"`
	RequestID string `json:"requestId"`
	Approved  bool   `json:"approved"`
	Always    bool   `json:"always"`
	Error     string `json:"error"`
}

func decide(t *testing.T, srv *waggletest.Server, id string, b any) (int, decideReply) {
	t.Helper()
	var rep decideReply
	st := srv.JSON(http.MethodPost, "/api/approval/"+id, b, &rep)
	return st, rep
}

func approve(t *testing.T, srv *waggletest.Server, id string, b map[string]any) {
	t.Helper()
	st, rep := decide(t, srv, id, b)
	approved, _ := b["approved"].(bool)
	always, _ := b["always"].(bool)
	if st != http.StatusOK || !rep.OK || rep.RequestID != id || rep.Approved != approved || rep.Always != always {
		t.Fatalf("POST /api/approval/%s %v: %d %+v", id, b, st, rep)
	}
}

type pendingList struct {
	Pending []struct {
		RequestID string          `json:"requestId"`
		ToolName  string          `json:"toolName"`
		Input     json.RawMessage `json:"input"`
		Timestamp int64           `json:"timestamp"`
	} `json:"pending"`
	Count int `json:"count"`
}

func pending(t *testing.T, srv *waggletest.Server) pendingList {
	t.Helper()
	var p pendingList
	if st := srv.JSON(http.MethodGet, "/api/approval/pending", nil, &p); st != http.StatusOK {
		t.Fatalf("GET pending: %d", st)
	}
	if p.Count != len(p.Pending) {
		t.Fatalf("count %d for %d pending", p.Count, len(p.Pending))
	}
	return p
}

type grant struct {
	ID                string  `json:"id"`
	ToolName          string  `json:"toolName"`
	TargetKey         string  `json:"targetKey"`
	SourceWorkspaceID *string `json:"sourceWorkspaceId"`
	Description       string  `json:"description"`
	GrantedAt         string  `json:"grantedAt"`
	ExpiresAt         *string `json:"expiresAt"`
}

func grants(t *testing.T, srv *waggletest.Server) []grant {
	t.Helper()
	var g struct {
		Grants []grant `json:"grants"`
		Count  int     `json:"count"`
	}
	if st := srv.JSON(http.MethodGet, "/api/approval/grants", nil, &g); st != http.StatusOK || g.Count != len(g.Grants) {
		t.Fatalf("GET grants: %d %+v", st, g)
	}
	return g.Grants
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}
