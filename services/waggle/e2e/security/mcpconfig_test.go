package security

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
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

// mcpconfigMarkerServer is an mcpServers entry whose command, if the
// server ever ran it, would create marker.
func mcpconfigMarkerServer(marker string) map[string]any {
	return map[string]any{"command": "sh", "args": []string{"-c", "touch " + marker}}
}

// mcpconfigServers is the reply of GET /api/mcp/servers.
type mcpconfigServers struct {
	Servers []protocol.MCPServerStatus `json:"servers"`
}

func mcpconfigDecode(t *testing.T, resp *http.Response, out any) {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, b, err)
		}
	}
}

// mcpconfigStatus sends a request and returns its status and body.
func mcpconfigStatus(t *testing.T, p *waggletest.Proc, method, path string, body any, headers ...string) (int, string) {
	t.Helper()
	resp := p.Do(t, method, path, body, headers...)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// mcpconfigSettled lists the workspace's servers until the runner has
// settled on server name (any state but connecting: it was never started,
// was refused, or its start ended) and returns its status (ok false: the
// server is not listed at all).
func mcpconfigSettled(t *testing.T, url, workspace, name string, headers ...string) (protocol.MCPServerStatus, bool) {
	t.Helper()
	var st protocol.MCPServerStatus
	var found bool
	waitfor.True(t, "the runner settled on server "+name, func() bool {
		var rep mcpconfigServers
		mcpconfigDecode(t, waggletest.Request(t, http.MethodGet, url+"/api/mcp/servers?workspace="+workspace, nil, headers...), &rep)
		found = false
		for _, s := range rep.Servers {
			if s.Name == name {
				st, found = s, true
			}
		}
		return !found || st.State != protocol.MCPStateConnecting
	})
	return st, found
}

func mcpconfigExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestWorkspaceCreateWithMCPServersRunsNothing: a web page (or a team
// member) creates a workspace whose body carries mcpServers with a shell
// command, then has the server list that workspace's MCP servers (a GET,
// which an <img> tag can send). The body field is refused, nothing is
// stored, and the command never runs.
func TestWorkspaceCreateWithMCPServersRunsNothing(t *testing.T) {
	p := waggletest.StartProc(t, waggleBin)
	marker := filepath.Join(t.TempDir(), "MARKER")
	code, body := mcpconfigStatus(t, p, http.MethodPost, "/api/workspaces",
		map[string]any{"name": "x", "mcpServers": map[string]any{"p": mcpconfigMarkerServer(marker)}})
	if code != http.StatusBadRequest || !strings.Contains(body, "/api/workspaces/{id}/mcp-servers") {
		t.Errorf("create with mcpServers: %d %s, want 400 naming the mcp-servers route", code, body)
	}
	code, body = mcpconfigStatus(t, p, http.MethodPatch, "/api/workspaces/default",
		map[string]any{"mcpServers": map[string]any{"p": mcpconfigMarkerServer(marker)}})
	if code != http.StatusBadRequest {
		t.Errorf("update with mcpServers: %d %s, want 400", code, body)
	}
	for _, ws := range []string{"x", "default"} {
		if st, found := mcpconfigSettled(t, p.URL, ws, "p"); found {
			t.Errorf("workspace %s lists the refused server: %+v", ws, st)
		}
	}
	if mcpconfigExists(marker) {
		t.Fatal("the command of a workspace body's mcpServers ran")
	}
}

// TestListingMCPServersStartsNothing: a workspace has a stdio server
// configured; GET /api/mcp/servers?workspace= (a GET anyone can make a
// browser send) reports it idle and does not start it.
func TestListingMCPServersStartsNothing(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(t.TempDir(), "MARKER")
	doc, _ := json.Marshal(map[string]any{"id": "ops", "name": "Ops", "created": "2026-01-01T00:00:00.000Z",
		"mcpServers": map[string]any{"p": mcpconfigMarkerServer(marker)}})
	if err := os.MkdirAll(filepath.Join(dir, "workspaces", "ops"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "workspaces", "ops", "workspace.json"), doc, 0o600); err != nil {
		t.Fatal(err)
	}
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcDataDir(dir))
	st, found := mcpconfigSettled(t, p.URL, "ops", "p")
	if !found || st.State != protocol.MCPStateIdle {
		t.Errorf("listed server: found %v, %+v; want it idle", found, st)
	}
	if mcpconfigExists(marker) {
		t.Fatal("listing the MCP servers started one")
	}
}

// TestMCPServersRouteRefusesOtherOrigins: the route that sets what the
// server runs answers only the server's own page or a non-browser client;
// a foreign page and even the desktop app's origin (allowed for the rest
// of the API) are refused, and nothing they sent is stored.
func TestMCPServersRouteRefusesOtherOrigins(t *testing.T) {
	p := waggletest.StartProc(t, waggleBin)
	if code, body := mcpconfigStatus(t, p, http.MethodPost, "/api/workspaces", map[string]any{"name": "o"}); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	const path = "/api/workspaces/o/mcp-servers"
	marker := filepath.Join(t.TempDir(), "MARKER")
	evil := map[string]any{"mcpServers": map[string]any{"p": mcpconfigMarkerServer(marker)}}
	for _, origin := range []string{"http://evil.example", "tauri://localhost", "http://localhost:1420"} {
		if code, body := mcpconfigStatus(t, p, http.MethodPut, path, evil, "Origin", origin); code != http.StatusForbidden {
			t.Errorf("PUT from %s: %d %s, want 403", origin, code, body)
		}
		if code, body := mcpconfigStatus(t, p, http.MethodGet, path, nil, "Origin", origin); code != http.StatusForbidden {
			t.Errorf("GET from %s: %d %s, want 403", origin, code, body)
		}
	}
	var got struct {
		Servers map[string]any `json:"mcpServers"`
	}
	mcpconfigDecode(t, p.Do(t, http.MethodGet, path, nil), &got)
	if len(got.Servers) != 0 {
		t.Fatalf("a refused PUT was stored: %v", got.Servers)
	}

	// A local client (no Origin) and the server's own page may set them.
	web := map[string]any{"mcpServers": map[string]any{"web": map[string]any{"url": "http://127.0.0.1:9/mcp"}}}
	if code, body := mcpconfigStatus(t, p, http.MethodPut, path, web); code != http.StatusOK {
		t.Fatalf("PUT without Origin: %d %s", code, body)
	}
	if code, body := mcpconfigStatus(t, p, http.MethodPut, path, web, "Origin", p.URL); code != http.StatusOK {
		t.Fatalf("PUT from the server's own origin: %d %s", code, body)
	}
	mcpconfigDecode(t, p.Do(t, http.MethodGet, path, nil), &got)
	if _, ok := got.Servers["web"]; !ok || len(got.Servers) != 1 {
		t.Fatalf("stored servers %v", got.Servers)
	}
	// Strict: an unknown field of an entry is refused.
	bad := map[string]any{"mcpServers": map[string]any{"web": map[string]any{"url": "http://127.0.0.1:9/mcp", "cmd": "sh"}}}
	if code, body := mcpconfigStatus(t, p, http.MethodPut, path, bad); code != http.StatusBadRequest {
		t.Fatalf("PUT with an unknown entry field: %d %s, want 400", code, body)
	}
	if mcpconfigExists(marker) {
		t.Fatal("a refused configuration ran")
	}
}

// mcpconfigModel is a model that answers every request with a short reply.
func mcpconfigModel(t *testing.T) *llmtest.Server {
	t.Helper()
	m := llmtest.New(llmtest.WithHandler(func(*llmtest.Request) llmtest.Response { return llmtest.Reply("ok") }))
	m.Start()
	t.Cleanup(m.Close)
	return m
}

// mcpconfigProcesses are the pids of live processes whose environment
// holds mark (zombies have none, so an ended process does not count).
func mcpconfigProcesses(mark string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(env, []byte(mark)) {
			out = append(out, pid)
		}
	}
	return out
}

func mcpconfigRandom(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestDeletedWorkspaceStopsItsMCPServer: a workspace's stdio server runs
// (a turn started it); deleting the workspace ends the process at once,
// not when the idle timer (10 minutes) would have.
func TestDeletedWorkspaceStopsItsMCPServer(t *testing.T) {
	llm := mcpconfigModel(t)
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()))
	var ws map[string]any
	if code := srv.JSON(http.MethodPost, "/api/workspaces", map[string]any{"name": "Doomed"}, &ws); code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, ws)
	}
	id := fmt.Sprint(ws["id"])
	mark := "MCPCONFIG_MARK=" + mcpconfigRandom(t)
	name, value, _ := strings.Cut(mark, "=")
	cfg := map[string]any{"mcpServers": map[string]any{"tools": map[string]any{
		"command": os.Args[0], "env": map[string]string{mcptest.EnvServe: "1", name: value},
	}}}
	var out map[string]any
	if code := srv.JSON(http.MethodPut, "/api/workspaces/"+id+"/mcp-servers", cfg, &out); code != http.StatusOK {
		t.Fatalf("set servers: %d %v", code, out)
	}
	srv.Chat(map[string]any{"message": "hello", "workspace": id, "session": "s1"}).All(t)
	waitfor.True(t, "the workspace's server process runs", func() bool { return len(mcpconfigProcesses(mark)) == 1 })

	var del map[string]any
	if code := srv.JSON(http.MethodDelete, "/api/workspaces/"+id, nil, &del); code != http.StatusOK {
		t.Fatalf("delete: %d %v", code, del)
	}
	waitfor.Within(5*time.Second).True(t, "the deleted workspace's server process is gone", func() bool {
		return len(mcpconfigProcesses(mark)) == 0
	})
}

// mcpconfigTeam is a team server (PostgreSQL, --auth=required) with team
// acme: olga its owner (admin), greg a member, and workspace id of acme.
type mcpconfigTeam struct {
	srv        *waggletest.Server
	id         string
	olga, greg []string // Authorization headers
}

func mcpconfigStartTeam(t *testing.T, allowPrivate bool) mcpconfigTeam {
	t.Helper()
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	llm := mcpconfigModel(t)
	natsAddr := waggletest.FreeAddr(t)
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()), waggletest.WithConfig(func(c *app.Config) {
		c.SessionStore.PostgresURL = pgtest.URL(t)
		c.Gateway.Auth = "required"
		c.NATSListen = natsAddr
		c.TurnRunner.MCP.AllowPrivateURLs = allowPrivate
	}))
	nc := srv.DialNATS()
	waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "acme", Owner: "olga"})
	waggletest.Operate(t, nc, protocol.PutMember, protocol.MemberPutRequest{TeamRef: protocol.TeamRef{Team: "acme"}, User: "greg", Role: "member"})
	token := func(user string) []string {
		tok, err := bus.Call(context.Background(), nc, protocol.CreateToken, protocol.TokenCreateRequest{User: user})
		if err != nil {
			t.Fatal(err)
		}
		return []string{"Authorization", "Bearer " + tok.Token}
	}
	tm := mcpconfigTeam{srv: srv, olga: token("olga"), greg: token("greg")}
	var ws map[string]any
	if code := srv.JSON(http.MethodPost, "/api/workspaces", map[string]any{"name": "Acme", "teamId": "acme"}, &ws, tm.olga...); code != http.StatusCreated {
		t.Fatalf("create workspace: %d %v", code, ws)
	}
	tm.id = fmt.Sprint(ws["id"])
	return tm
}

// TestTeamMemberCannotSetMCPServers: on a team server a member (not an
// admin) can neither read nor set the MCP servers of a team workspace, nor
// smuggle them in at workspace creation; an admin can.
func TestTeamMemberCannotSetMCPServers(t *testing.T) {
	tm := mcpconfigStartTeam(t, false)
	path := "/api/workspaces/" + tm.id + "/mcp-servers"
	web := map[string]any{"mcpServers": map[string]any{"web": map[string]any{"url": "https://mcp.example.com/mcp"}}}
	var out map[string]any
	if code := tm.srv.JSON(http.MethodPut, path, web, &out, tm.greg...); code != http.StatusForbidden {
		t.Errorf("member PUT: %d %v, want 403", code, out)
	}
	if code := tm.srv.JSON(http.MethodGet, path, nil, &out, tm.greg...); code != http.StatusForbidden {
		t.Errorf("member GET: %d %v, want 403", code, out)
	}
	if code := tm.srv.JSON(http.MethodPost, "/api/workspaces", map[string]any{"name": "Sneaky", "teamId": "acme", "mcpServers": web["mcpServers"]}, &out, tm.greg...); code != http.StatusBadRequest {
		t.Errorf("member create with mcpServers: %d %v, want 400", code, out)
	}
	var got struct {
		Servers map[string]any `json:"mcpServers"`
	}
	if code := tm.srv.JSON(http.MethodGet, path, nil, &got, tm.olga...); code != http.StatusOK || len(got.Servers) != 0 {
		t.Fatalf("admin GET after the member's attempts: %d %v", code, got.Servers)
	}
	if code := tm.srv.JSON(http.MethodPut, path, web, &got, tm.olga...); code != http.StatusOK || got.Servers["web"] == nil {
		t.Fatalf("admin PUT: %d %v", code, got.Servers)
	}
}

// TestTeamMCPURLAtLoopbackRefused: on a team server an HTTP MCP server at
// 127.0.0.1 (the runner's own loopback: SSRF) is never contacted, and the
// error users see says no more than "could not connect"; the operator's
// --mcp-allow-private-urls lets it connect.
func TestTeamMCPURLAtLoopbackRefused(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		var hits atomic.Int64
		target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			hits.Add(1)
			http.Error(w, "internal admin page: secret", http.StatusUnauthorized)
		}))
		t.Cleanup(target.Close)
		tm := mcpconfigStartTeam(t, false)
		mcpconfigSetAndUse(t, tm, target.URL+"/mcp")
		st, found := mcpconfigSettled(t, tm.srv.URL, tm.id, "inside", tm.olga...)
		if !found || st.State != protocol.MCPStateError {
			t.Fatalf("server at loopback: found %v %+v, want state error", found, st)
		}
		if st.Error != "could not connect to the MCP server" {
			t.Errorf("error shown %q: want the same text as for any unreachable server", st.Error)
		}
		if n := hits.Load(); n != 0 {
			t.Fatalf("the loopback address was contacted %d times", n)
		}
	})
	t.Run("allowed by the operator", func(t *testing.T) {
		remote := mcptest.NewHTTP()
		t.Cleanup(remote.Close)
		tm := mcpconfigStartTeam(t, true)
		mcpconfigSetAndUse(t, tm, remote.URL())
		st, found := mcpconfigSettled(t, tm.srv.URL, tm.id, "inside", tm.olga...)
		if !found || st.State != protocol.MCPStateConnected {
			t.Fatalf("server at loopback with --mcp-allow-private-urls: found %v %+v, want connected", found, st)
		}
	})
}

// mcpconfigSetAndUse sets the team workspace's server "inside" at url (as
// its admin) and runs a turn there, which starts it.
func mcpconfigSetAndUse(t *testing.T, tm mcpconfigTeam, url string) {
	t.Helper()
	cfg := map[string]any{"mcpServers": map[string]any{"inside": map[string]any{"url": url}}}
	var out map[string]any
	if code := tm.srv.JSON(http.MethodPut, "/api/workspaces/"+tm.id+"/mcp-servers", cfg, &out, tm.olga...); code != http.StatusOK {
		t.Fatalf("set servers: %d %v", code, out)
	}
	tm.srv.Chat(map[string]any{"message": "hello", "workspace": tm.id, "session": "s1"}, tm.olga...).All(t)
}
