// Package mcp holds black-box tests of MCP tool servers: a real waggle app
// whose config.json names real MCP servers written with the go-sdk (this
// test binary re-executed as a stdio server, and a Streamable HTTP server
// on loopback), the model scripted with libs/llmtest, everything observed
// over HTTP.
package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/turnrunner/mcp/mcptest"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

func TestMain(m *testing.M) {
	mcptest.MaybeServeStdio()
	os.Exit(m.Run())
}

const modelPrefix = "MODEL SAW: "

// model answers "CALL <tool> <json>" with that tool call and a tool result
// with modelPrefix + the result; it records the tools each request offered.
type model struct {
	*llmtest.Server
	mu      sync.Mutex
	offered [][]string
}

func scriptedModel(t *testing.T) *model {
	t.Helper()
	m := &model{}
	m.Server = llmtest.New(llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		var names []string
		for _, tool := range r.Chat.Tools {
			names = append(names, tool.Function.Name)
		}
		m.mu.Lock()
		m.offered = append(m.offered, names)
		m.mu.Unlock()
		msgs := r.Chat.Messages
		last := msgs[len(msgs)-1]
		if last.Role == "tool" {
			return llmtest.Reply(modelPrefix + last.Content)
		}
		if resp, ok := llmtest.CallDirective(last.Content); ok {
			return resp
		}
		return llmtest.Reply("nothing to do")
	}))
	m.Start()
	t.Cleanup(m.Close)
	return m
}

func (m *model) lastOffered() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.offered) == 0 {
		return nil
	}
	return m.offered[len(m.offered)-1]
}

// setup is a data dir whose config.json has the stdio server "local"
// (events recorded in rec) and the HTTP server "remote" (trusting its
// read-only tools).
type setup struct {
	dir, rec string
	remote   *mcptest.HTTP
}

func newSetup(t *testing.T) setup {
	t.Helper()
	dir := t.TempDir()
	s := setup{dir: dir, rec: filepath.Join(dir, "mcp-events"), remote: mcptest.NewHTTP()}
	t.Cleanup(s.remote.Close)
	writeJSON(t, filepath.Join(dir, "config.json"), map[string]any{"mcpServers": map[string]any{
		"local":  map[string]any{"command": os.Args[0], "env": map[string]string{mcptest.EnvServe: "1", mcptest.EnvRecord: s.rec}},
		"remote": map[string]any{"url": s.remote.URL(), "trust": "readOnly"},
	}})
	return s
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func start(t *testing.T, s setup, llm *model, opts ...waggletest.Option) *waggletest.Server {
	t.Helper()
	base := []waggletest.Option{waggletest.WithLLM(llm.URL()), waggletest.WithDataDir(s.dir),
		waggletest.WithConfig(func(c *app.Config) { c.Approval.Timeout = 10 * time.Second })}
	return waggletest.Start(t, append(base, opts...)...)
}

func chat(session, tool, args string, autonomy map[string]any) map[string]any {
	b := map[string]any{"message": "please CALL " + tool + " " + args, "workspace": "ws1", "session": session}
	if autonomy != nil {
		b["autonomy"] = autonomy
	}
	return b
}

var yolo = map[string]any{"level": "yolo"}

type serversReply struct {
	Runner  string                     `json:"runner"`
	Servers []protocol.MCPServerStatus `json:"servers"`
}

func servers(t *testing.T, srv *waggletest.Server, query string, headers ...string) serversReply {
	t.Helper()
	var rep serversReply
	if st := srv.JSON(http.MethodGet, "/api/mcp/servers"+query, nil, &rep, headers...); st != http.StatusOK {
		t.Fatalf("GET /api/mcp/servers: %d", st)
	}
	return rep
}

// until reads events up to one named name (returned last).
func until(t *testing.T, st *waggletest.Stream, name string) []waggletest.Event {
	t.Helper()
	var out []waggletest.Event
	for {
		ev, err := st.Next()
		if err == io.EOF {
			t.Fatalf("stream ended before %s: %v", name, waggletest.Names(out))
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
		if ev.Name == name {
			return out
		}
	}
}

type toolResult struct {
	Name    string `json:"name"`
	Result  string `json:"result"`
	IsError bool   `json:"isError"`
}

// results are the tool_results of MCP tools (auto_recall left out).
func results(t *testing.T, evs []waggletest.Event) []toolResult {
	t.Helper()
	var out []toolResult
	for _, e := range evs {
		if e.Name == "tool_result" {
			var r toolResult
			e.Decode(t, &r)
			if strings.HasPrefix(r.Name, protocol.MCPToolPrefix) {
				out = append(out, r)
			}
		}
	}
	return out
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

func done(t *testing.T, evs []waggletest.Event) {
	t.Helper()
	if n := len(evs); n == 0 || evs[n-1].Name != "done" {
		t.Fatalf("stream does not end with done: %v", waggletest.Names(evs))
	}
}

// eventually is these tests' wait: 15 s, since what they wait for goes
// through MCP server processes the app starts and stops.
var eventually = waitfor.Within(15 * time.Second)

func recorded(path, event string) bool {
	b, _ := os.ReadFile(path)
	return slices.Contains(strings.Split(string(b), "\n"), event)
}

// TestServersAndToolCalls: GET /api/mcp/servers lists both servers with
// their tools; the model is offered them as mcp__<server>__<tool> and a
// call with arguments comes back as its tool_result; an error result is
// isError:true and the turn still completes; a trusted read-only tool runs
// without an approval.
func TestServersAndToolCalls(t *testing.T) {
	s := newSetup(t)
	llm := scriptedModel(t)
	srv := start(t, s, llm)

	// A server is "connecting" until its first handshake ends.
	var rep serversReply
	eventually.True(t, "both servers connected", func() bool {
		rep = servers(t, srv, "")
		return len(rep.Servers) == 2 && rep.Servers[0].State != protocol.MCPStateConnecting && rep.Servers[1].State != protocol.MCPStateConnecting
	})
	if rep.Runner == "" {
		t.Fatalf("servers %+v", rep)
	}
	for i, want := range []string{"local", "remote"} {
		st := rep.Servers[i]
		if st.Name != want || st.State != protocol.MCPStateConnected || len(st.Tools) != 8 {
			t.Fatalf("server %s: %+v", want, st)
		}
	}

	evs := srv.Chat(chat("s1", "mcp__local__add", `{"a":20,"b":22}`, yolo)).All(t)
	done(t, evs)
	if !slices.Contains(llm.lastOffered(), "mcp__local__add") || !slices.Contains(llm.lastOffered(), "mcp__remote__echo") {
		t.Fatalf("offered %v", llm.lastOffered())
	}
	if r := results(t, evs); len(r) != 1 || r[0] != (toolResult{Name: "mcp__local__add", Result: "42"}) {
		t.Fatalf("results %+v", r)
	}
	if text := waggletest.Text(evs); text != modelPrefix+"42" {
		t.Fatalf("reply %q", text)
	}

	evs = srv.Chat(chat("s2", "mcp__remote__fail", `{"message":"no such record"}`, yolo)).All(t)
	done(t, evs)
	want := toolResult{Name: "mcp__remote__fail", Result: "Error executing mcp__remote__fail: no such record", IsError: true}
	if r := results(t, evs); len(r) != 1 || r[0] != want {
		t.Fatalf("error result %+v", r)
	}

	// Trusted (remote trusts read-only tools, echo is one): no approval at
	// the normal level.
	evs = srv.Chat(chat("s3", "mcp__remote__echo", `{"text":"hi"}`, nil)).All(t)
	done(t, evs)
	if slices.Contains(waggletest.Names(evs), "approval_required") {
		t.Fatalf("a trusted tool asked: %v", waggletest.Names(evs))
	}
	if r := results(t, evs); len(r) != 1 || r[0].Result != "echo: hi" {
		t.Fatalf("echo %+v", r)
	}
}

// TestApprovalThenGrant: an untrusted MCP tool asks; approved with
// "always", a grant keyed <server>/<tool> is stored and the next call runs
// on it without asking.
func TestApprovalThenGrant(t *testing.T) {
	s := newSetup(t)
	srv := start(t, s, scriptedModel(t))

	st := srv.Chat(chat("s1", "mcp__local__add", `{"a":1,"b":2}`, nil))
	evs := until(t, st, "approval_required")
	var a struct {
		RequestID string          `json:"requestId"`
		ToolName  string          `json:"toolName"`
		Input     json.RawMessage `json:"input"`
	}
	evs[len(evs)-1].Decode(t, &a)
	if a.ToolName != "mcp__local__add" || string(a.Input) != `{"a":1,"b":2}` {
		t.Fatalf("approval_required %+v", a)
	}
	var dec map[string]any
	if code := srv.JSON(http.MethodPost, "/api/approval/"+a.RequestID, map[string]any{"approved": true, "always": true, "sourceWorkspaceId": "ws1"}, &dec); code != 200 {
		t.Fatalf("approve: %d %v", code, dec)
	}
	rest := st.All(t)
	done(t, rest)
	if r := results(t, rest); len(r) != 1 || r[0].Result != "3" {
		t.Fatalf("after approval %+v", r)
	}
	var g struct {
		Grants []struct {
			ToolName, TargetKey, Description string
		} `json:"grants"`
	}
	srv.JSON(http.MethodGet, "/api/approval/grants", nil, &g)
	if len(g.Grants) != 1 || g.Grants[0].ToolName != "mcp__local__add" || g.Grants[0].TargetKey != "local/add" ||
		g.Grants[0].Description != `Use add of MCP server "local"` {
		t.Fatalf("grants %+v", g)
	}

	evs = srv.Chat(chat("s2", "mcp__local__add", `{"a":5,"b":5}`, nil)).All(t)
	done(t, evs)
	if slices.Contains(waggletest.Names(evs), "approval_required") || !slices.Contains(steps(evs), "✔ mcp__local__add allowed by saved grant") {
		t.Fatalf("second call: %v %q", waggletest.Names(evs), steps(evs))
	}
	if r := results(t, evs); len(r) != 1 || r[0].Result != "10" {
		t.Fatalf("second call %+v", r)
	}
	// The grant is for add only.
	st = srv.Chat(chat("s3", "mcp__local__echo", `{"text":"x"}`, nil))
	until(t, st, "approval_required")
	st.Close()
}

// TestCancelReachesServer: cancelling a turn while an MCP call runs ends
// the stream at once and the server observes the cancellation.
func TestCancelReachesServer(t *testing.T) {
	s := newSetup(t)
	srv := start(t, s, scriptedModel(t))
	for _, server := range []string{"local", "remote"} {
		t.Run(server, func(t *testing.T) {
			st := srv.Chat(chat("c-"+server, "mcp__"+server+"__slow", `{}`, yolo))
			until(t, st, "tool")
			started := func() bool { return recorded(s.rec, "started slow") }
			cancelled := func() bool { return recorded(s.rec, "cancelled slow") }
			if server == "remote" {
				started = func() bool { return slices.Contains(s.remote.Events(), "started slow") }
				cancelled = func() bool { return slices.Contains(s.remote.Events(), "cancelled slow") }
			}
			eventually.True(t, "the call reached the server", started)
			var out map[string]any
			if code := srv.JSON(http.MethodPost, "/api/chat/turns/"+st.Resp.Header.Get("X-Waggle-Turn-Id")+"/cancel", nil, &out); code != 200 {
				t.Fatalf("cancel: %d %v", code, out)
			}
			began := time.Now()
			evs := st.All(t)
			if last := evs[len(evs)-1]; last.Name != "error" {
				t.Fatalf("stream after cancel: %v", waggletest.Names(evs))
			}
			if d := time.Since(began); d > 5*time.Second {
				t.Fatalf("the stream took %v to end", d)
			}
			eventually.True(t, "the server saw the cancellation", cancelled)
		})
	}
}

// TestCrashedServerRestarted: a server that dies during a call gives that
// call an error result and a step; it is restarted and the next turn's
// call works.
func TestCrashedServerRestarted(t *testing.T) {
	s := newSetup(t)
	srv := start(t, s, scriptedModel(t))
	evs := srv.Chat(chat("k1", "mcp__local__crash", `{}`, yolo)).All(t)
	done(t, evs)
	if !slices.Contains(steps(evs), "MCP server local stopped — restarting it") {
		t.Fatalf("steps %q", steps(evs))
	}
	if r := results(t, evs); len(r) != 1 || !r[0].IsError || !strings.Contains(r[0].Result, `MCP server "local" stopped during the call`) {
		t.Fatalf("crash result %+v", r)
	}
	eventually.True(t, "the server restarted", func() bool {
		st := servers(t, srv, "").Servers[0]
		return st.Restarts == 1 && st.State == protocol.MCPStateConnected
	})
	evs = srv.Chat(chat("k2", "mcp__local__add", `{"a":1,"b":1}`, yolo)).All(t)
	done(t, evs)
	if r := results(t, evs); len(r) != 1 || r[0].Result != "2" {
		t.Fatalf("after restart %+v", r)
	}
}

// TestWorkspaceServersAndReload: a workspace's own mcpServers (set through
// PUT /api/workspaces/{id}/mcp-servers) are offered to its turns only, and
// config.json edits apply without a restart.
func TestWorkspaceServersAndReload(t *testing.T) {
	s := newSetup(t)
	llm := scriptedModel(t)
	srv := start(t, s, llm)
	var ws map[string]any
	if code := srv.JSON(http.MethodPost, "/api/workspaces", map[string]any{"name": "Docs"}, &ws); code != 200 && code != 201 {
		t.Fatalf("create workspace: %d %v", code, ws)
	}
	id := fmt.Sprint(ws["id"])
	var upd map[string]any
	if code := srv.JSON(http.MethodPut, "/api/workspaces/"+id+"/mcp-servers", map[string]any{"mcpServers": map[string]any{
		"docs": map[string]any{"url": s.remote.URL()},
	}}, &upd); code != 200 {
		t.Fatalf("set the workspace's servers: %d %v", code, upd)
	}
	body := chat("w1", "mcp__docs__add", `{"a":3,"b":4}`, yolo)
	body["workspace"] = id
	evs := srv.Chat(body).All(t)
	done(t, evs)
	if r := results(t, evs); len(r) != 1 || r[0].Result != "7" {
		t.Fatalf("workspace server call %+v", r)
	}
	rep := servers(t, srv, "?workspace="+id)
	if len(rep.Servers) != 3 || rep.Servers[0].Name != "docs" || rep.Servers[0].Scope != "workspace" {
		t.Fatalf("workspace servers %+v", rep.Servers)
	}
	if len(servers(t, srv, "").Servers) != 2 {
		t.Fatal("a workspace's server listed globally")
	}

	// Drop "local" from config.json: gone from the next turns, no restart.
	writeJSON(t, filepath.Join(s.dir, "config.json"), map[string]any{"mcpServers": map[string]any{
		"remote": map[string]any{"url": s.remote.URL()},
	}})
	eventually.True(t, "the config edit applied", func() bool { return len(servers(t, srv, "").Servers) == 1 })
	srv.Chat(chat("w2", "mcp__remote__echo", `{"text":"x"}`, yolo)).All(t)
	if slices.Contains(llm.lastOffered(), "mcp__local__add") || !slices.Contains(llm.lastOffered(), "mcp__remote__echo") {
		t.Fatalf("offered after the edit: %v", llm.lastOffered())
	}
}

// TestTeamPolicyBlocksServer (team server, PostgreSQL): a role's policy
// naming mcp__<server> hides every tool of that server from the model, and
// a call to one anyway gets the governance text.
func TestTeamPolicyBlocksServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	s := newSetup(t)
	llm := scriptedModel(t)
	natsAddr := waggletest.FreeAddr(t)
	srv := start(t, s, llm, waggletest.WithConfig(func(c *app.Config) {
		c.SessionStore.PostgresURL = pgtest.URL(t)
		c.Gateway.Auth = "required"
		c.NATSListen = natsAddr
	}))
	nc := srv.DialNATS()
	ctx := context.Background()
	waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "acme", Owner: "olga"})
	waggletest.Operate(t, nc, protocol.PutMember, protocol.MemberPutRequest{TeamRef: protocol.TeamRef{Team: "acme"}, User: "greg", Role: "member"})
	waggletest.Operate(t, nc, protocol.SetPolicy, protocol.PolicySetRequest{TeamRef: protocol.TeamRef{Team: "acme"}, Role: "member", BlockedTools: []string{"mcp__remote"}})
	greg, err := bus.Call(ctx, nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "greg"})
	if err != nil {
		t.Fatal(err)
	}
	olga, err := bus.Call(ctx, nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "olga"})
	if err != nil {
		t.Fatal(err)
	}
	var ws map[string]any
	if code := srv.JSON(http.MethodPost, "/api/workspaces", map[string]any{"name": "Acme", "teamId": "acme"}, &ws, "Authorization", "Bearer "+olga.Token); code != 200 && code != 201 {
		t.Fatalf("create workspace: %d %v", code, ws)
	}
	id := fmt.Sprint(ws["id"])
	auth := []string{"Authorization", "Bearer " + greg.Token}

	// The stdio server runs sandboxed on a team server, or is refused
	// without bubblewrap; either way the HTTP server is what this test uses.
	eventually.True(t, "the HTTP server connected", func() bool {
		rep := servers(t, srv, "?workspace="+id, auth...)
		return len(rep.Servers) == 2 && rep.Servers[1].State == protocol.MCPStateConnected
	})

	body := chat("g1", "mcp__remote__echo", `{"text":"x"}`, yolo)
	body["workspace"] = id
	evs := srv.Chat(body, auth...).All(t)
	done(t, evs)
	for _, name := range llm.lastOffered() {
		if strings.HasPrefix(name, "mcp__remote__") {
			t.Fatalf("blocked server's tool offered: %v", llm.lastOffered())
		}
	}
	if r := results(t, evs); len(r) != 1 || r[0].Result != protocol.GovernanceBlockedText("mcp__remote__echo") {
		t.Fatalf("blocked call %+v", r)
	}
}
