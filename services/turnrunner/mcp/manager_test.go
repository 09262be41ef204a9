package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/mcp/mcptest"
)

// The manager owns goroutines (a reader per stdio server, config
// reloads): Stop must end every one of them. As the scripted stdio server
// this binary serves and exits before any test runs.
func TestMain(m *testing.M) {
	mcptest.MaybeServeStdio()
	goleak.VerifyTestMain(m)
}

// stdioEntry runs this test binary as the scripted stdio server, its
// events appended to record.
func stdioEntry(record string, extra map[string]any) map[string]any {
	e := map[string]any{"command": os.Args[0], "env": map[string]string{mcptest.EnvServe: "1", mcptest.EnvRecord: record}}
	for k, v := range extra {
		e[k] = v
	}
	return e
}

func writeConfig(t testing.TB, dir string, servers map[string]any) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"defaultModel": "m", "mcpServers": servers})
	if err != nil {
		t.Fatal(err)
	}
	// Write through a rename so the watcher never reads half a file.
	tmp := filepath.Join(dir, "config.json.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "config.json")); err != nil {
		t.Fatal(err)
	}
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func startManager(t *testing.T, dir string, edit func(*Config)) *Manager {
	t.Helper()
	cfg := Config{DataDir: dir, RunnerID: "r1", RestartBackoff: 50 * time.Millisecond, ConfigCheck: 50 * time.Millisecond, StartWait: 10 * time.Second}
	if edit != nil {
		edit(&cfg)
	}
	m := New(cfg, nil, quietLog())
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(context.Background()) })
	return m
}

func toolByName(t *testing.T, set *ToolSet, name string) *Tool {
	t.Helper()
	for _, tl := range set.Tools() {
		if tl.Name() == name {
			return tl
		}
	}
	var names []string
	for _, tl := range set.Tools() {
		names = append(names, tl.Name())
	}
	t.Fatalf("no tool %s in %v", name, names)
	return nil
}

func call(t *testing.T, tl *Tool, args string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return tl.Call(ctx, json.RawMessage(args))
}

func recorded(path, event string) bool {
	b, _ := os.ReadFile(path)
	return slices.Contains(strings.Split(string(b), "\n"), event)
}

// TestToolsOverStdioAndHTTP: both transports list their tools under
// mcp__<server>__<tool> with their schemas, calls pass arguments, error
// results are errors, non-text content gets a placeholder, and the status
// names every server and tool.
func TestToolsOverStdioAndHTTP(t *testing.T) {
	dir := t.TempDir()
	remote := mcptest.NewHTTP()
	t.Cleanup(remote.Close)
	writeConfig(t, dir, map[string]any{
		"local":  stdioEntry(filepath.Join(dir, "rec"), map[string]any{"trust": "readOnly"}),
		"remote": map[string]any{"url": remote.URL(), "headers": map[string]string{"X-Test": "1"}},
	})
	m := startManager(t, dir, nil)
	set := m.Bind(context.Background(), "", nil)

	for _, server := range []string{"local", "remote"} {
		t.Run(server, func(t *testing.T) {
			echo := toolByName(t, set, "mcp__"+server+"__echo")
			var schema struct {
				Type       string                     `json:"type"`
				Properties map[string]json.RawMessage `json:"properties"`
			}
			if err := json.Unmarshal(echo.Schema(), &schema); err != nil || schema.Type != "object" || schema.Properties["text"] == nil {
				t.Fatalf("echo schema %s", echo.Schema())
			}
			if echo.Description() != "Echo the text back." {
				t.Fatalf("description %q", echo.Description())
			}
			if got, err := call(t, echo, `{"text":"hi there"}`); err != nil || got != "echo: hi there" {
				t.Fatalf("echo: %q %v", got, err)
			}
			if got, err := call(t, toolByName(t, set, "mcp__"+server+"__add"), `{"a":2,"b":3.5}`); err != nil || got != "5.5" {
				t.Fatalf("add: %q %v", got, err)
			}
			if got, err := call(t, toolByName(t, set, "mcp__"+server+"__fail"), `{"message":"boom"}`); err == nil || err.Error() != "boom" || got != "" {
				t.Fatalf("fail: %q %v", got, err)
			}
			got, err := call(t, toolByName(t, set, "mcp__"+server+"__picture"), `{}`)
			if err != nil || got != "here it is\n[image content (image/png, 8 bytes) not shown]" {
				t.Fatalf("picture: %q %v", got, err)
			}
		})
	}

	st := m.Status(context.Background(), "")
	if st.Runner != "r1" || len(st.Servers) != 2 {
		t.Fatalf("status %+v", st)
	}
	for i, want := range []struct{ name, transport string }{{"local", "stdio"}, {"remote", "http"}} {
		s := st.Servers[i]
		if s.Name != want.name || s.Transport != want.transport || s.State != protocol.MCPStateConnected || s.Scope != "global" || s.Error != "" {
			t.Fatalf("server %d: %+v", i, s)
		}
		gated := map[string]bool{}
		for _, tl := range s.Tools {
			gated[tl.Tool] = tl.Gated
			if tl.Name != "mcp__"+want.name+"__"+tl.Tool {
				t.Fatalf("tool %+v", tl)
			}
		}
		// Only local trusts its read-only tools.
		if len(gated) != 8 || gated["echo"] != (want.name == "remote") || !gated["add"] {
			t.Fatalf("%s tools %+v", want.name, s.Tools)
		}
	}
}

// TestCancelReachesServer: cancelling the turn's context ends the call at
// once and the server sees the cancellation (notifications/cancelled).
func TestCancelReachesServer(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec")
	remote := mcptest.NewHTTP()
	t.Cleanup(remote.Close)
	writeConfig(t, dir, map[string]any{"local": stdioEntry(rec, nil), "remote": map[string]any{"url": remote.URL()}})
	m := startManager(t, dir, nil)
	set := m.Bind(context.Background(), "", nil)

	for _, server := range []string{"local", "remote"} {
		t.Run(server, func(t *testing.T) {
			started := func() bool {
				if server == "local" {
					return recorded(rec, "started slow")
				}
				return slices.Contains(remote.Events(), "started slow")
			}
			cancelled := func() bool {
				if server == "local" {
					return recorded(rec, "cancelled slow")
				}
				return slices.Contains(remote.Events(), "cancelled slow")
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := toolByName(t, set, "mcp__"+server+"__slow").Call(ctx, json.RawMessage(`{}`))
				done <- err
			}()
			waitfor.True(t, "slow started", started)
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("cancelled call: %v", err)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("the call did not stop when cancelled")
			}
			waitfor.True(t, "the server saw the cancellation", cancelled)
		})
	}
}

// TestCallTimeout: a server's timeout ends the call with an error (the
// model reads an error result) and cancels it on the server.
func TestCallTimeout(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec")
	writeConfig(t, dir, map[string]any{"local": stdioEntry(rec, map[string]any{"timeout": 0.3})})
	m := startManager(t, dir, nil)
	set := m.Bind(context.Background(), "", nil)
	began := time.Now()
	got, err := call(t, toolByName(t, set, "mcp__local__slow"), `{}`)
	if err == nil || got != "" || !strings.Contains(err.Error(), `MCP server "local" did not answer within 300ms`) {
		t.Fatalf("timed-out call: %q %v", got, err)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Fatalf("timeout took %v", d)
	}
	waitfor.True(t, "the server saw the cancellation", func() bool { return recorded(rec, "cancelled slow") })
}

// TestCrashedServerRestarted: a server that dies during a call fails that
// call (never retried: it may have acted), reports a step, and is
// restarted; the next call reaches the new process.
func TestCrashedServerRestarted(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, map[string]any{"local": stdioEntry(filepath.Join(dir, "rec"), nil)})
	m := startManager(t, dir, nil)
	var mu sync.Mutex
	var steps []string
	set := m.Bind(context.Background(), "", func(s string) { mu.Lock(); steps = append(steps, s); mu.Unlock() })
	pid1, err := call(t, toolByName(t, set, "mcp__local__pid"), `{}`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := call(t, toolByName(t, set, "mcp__local__crash"), `{}`)
	if err == nil || got != "" || !strings.Contains(err.Error(), `MCP server "local" stopped during the call`) {
		t.Fatalf("crash call: %q %v", got, err)
	}
	mu.Lock()
	if !slices.Equal(steps, []string{"MCP server local stopped — restarting it"}) {
		t.Fatalf("steps %q", steps)
	}
	mu.Unlock()
	pid2, err := call(t, toolByName(t, set, "mcp__local__pid"), `{}`)
	if err != nil || pid2 == pid1 || pid2 == "" {
		t.Fatalf("after restart: pid %q (was %q) %v", pid2, pid1, err)
	}
	if st := m.Status(context.Background(), "").Servers[0]; st.Restarts != 1 || st.State != protocol.MCPStateConnected {
		t.Fatalf("status %+v", st)
	}
}

// TestConfigReload: servers come and go with config.json edits, without a
// restart; an unreadable edit keeps what runs and is reported.
func TestConfigReload(t *testing.T) {
	dir := t.TempDir()
	remote := mcptest.NewHTTP()
	t.Cleanup(remote.Close)
	m := startManager(t, dir, nil)
	if n := len(m.Bind(context.Background(), "", nil).Tools()); n != 0 {
		t.Fatalf("%d tools with no config", n)
	}
	writeConfig(t, dir, map[string]any{"remote": map[string]any{"url": remote.URL()}})
	waitfor.True(t, "the new server's tools", func() bool { return len(m.Bind(context.Background(), "", nil).Tools()) == 8 })

	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"mcpServers": {`), 0o644); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, "the bad edit reported", func() bool { return len(m.Status(context.Background(), "").ConfigErrors) == 1 })
	if n := len(m.Bind(context.Background(), "", nil).Tools()); n != 8 {
		t.Fatalf("a bad edit dropped the tools: %d", n)
	}

	bound := m.Bind(context.Background(), "", nil)
	writeConfig(t, dir, map[string]any{"bad name": map[string]any{"url": remote.URL()}, "nothing": map[string]any{}})
	waitfor.True(t, "the server removed", func() bool { return len(m.Bind(context.Background(), "", nil).Tools()) == 0 })
	// A turn that bound the removed server's tools gets an answer at once.
	if _, err := call(t, toolByName(t, bound, "mcp__remote__echo"), `{"text":"x"}`); err == nil || !strings.Contains(err.Error(), "the server was stopped") {
		t.Fatalf("call to a removed server: %v", err)
	}
	st := m.Status(context.Background(), "")
	if len(st.Servers) != 2 || len(st.ConfigErrors) != 0 {
		t.Fatalf("status %+v", st)
	}
	for _, s := range st.Servers {
		if s.State != protocol.MCPStateRefused || s.Error == "" {
			t.Fatalf("invalid entry %+v", s)
		}
	}
}

// TestCallCutByRemovalSaysStopped: a call in flight when a config edit
// removes its server ends at once (the SDK's Close waits for calls in
// flight: before, the edit hung until the call's timeout), with the
// removal as its reason, not as a crash that is "being restarted"
// (nothing restarts it), and no restart step; the server saw the cancel.
func TestCallCutByRemovalSaysStopped(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec")
	writeConfig(t, dir, map[string]any{"local": stdioEntry(rec, nil)})
	m := startManager(t, dir, nil)
	var mu sync.Mutex
	var steps []string
	set := m.Bind(context.Background(), "", func(s string) { mu.Lock(); steps = append(steps, s); mu.Unlock() })
	done := make(chan error, 1)
	go func() {
		_, err := call(t, toolByName(t, set, "mcp__local__slow"), `{}`)
		done <- err
	}()
	waitfor.True(t, "slow started", func() bool { return recorded(rec, "started slow") })
	writeConfig(t, dir, map[string]any{})
	if err := <-done; err == nil || !strings.Contains(err.Error(), "the server was stopped") {
		t.Fatalf("call cut by the removal: %v", err)
	}
	waitfor.True(t, "the server saw the cancellation", func() bool { return recorded(rec, "cancelled slow") })
	mu.Lock()
	defer mu.Unlock()
	if len(steps) != 0 {
		t.Fatalf("steps %q, want none (nothing restarts)", steps)
	}
}

// TestTrustGate: trusted tools skip the approval gate; the rest ask it.
func TestTrustGate(t *testing.T) {
	dir := t.TempDir()
	remote := mcptest.NewHTTP()
	t.Cleanup(remote.Close)
	writeConfig(t, dir, map[string]any{
		"ro":    map[string]any{"url": remote.URL(), "trust": "readOnly"},
		"named": map[string]any{"url": remote.URL(), "trust": []string{"add"}},
		"none":  map[string]any{"url": remote.URL()},
	})
	m := startManager(t, dir, nil)
	inner := &countingGate{}
	gate := m.Bind(context.Background(), "", nil).Gate(inner)
	for _, tc := range []struct {
		tool  string
		asked bool
	}{
		{"mcp__ro__echo", false}, {"mcp__ro__add", true},
		{"mcp__named__add", false}, {"mcp__named__echo", true},
		{"mcp__none__echo", true}, {"write_file", true},
	} {
		before := inner.n
		v, err := gate.Check(context.Background(), agent.ToolCall{Name: tc.tool})
		if err != nil || !v.Allow || (inner.n > before) != tc.asked {
			t.Errorf("%s: verdict %+v err %v asked %v", tc.tool, v, err, inner.n > before)
		}
	}
}

type countingGate struct{ n int }

func (g *countingGate) Check(context.Context, agent.ToolCall) (agent.Verdict, error) {
	g.n++
	return agent.Verdict{Allow: true}, nil
}

// TestStdioRefused: a runner that may not start stdio servers says why.
func TestStdioRefused(t *testing.T) {
	for _, tc := range []struct {
		mode, want string
	}{
		{StdioOff, "turned off"},
		{StdioSandbox, "bubblewrap is not installed"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			dir := t.TempDir()
			writeConfig(t, dir, map[string]any{"local": stdioEntry(filepath.Join(dir, "rec"), nil)})
			m := startManager(t, dir, func(c *Config) { c.Stdio = tc.mode })
			st := m.Status(context.Background(), "").Servers
			if len(st) != 1 || st[0].State != protocol.MCPStateRefused || !strings.Contains(st[0].Error, tc.want) {
				t.Fatalf("status %+v", st)
			}
			if n := len(m.Bind(context.Background(), "", nil).Tools()); n != 0 {
				t.Fatalf("%d tools of a refused server", n)
			}
		})
	}
}

// TestSandboxedStdio: under bubblewrap the server runs, but cannot see the
// hidden data directory.
func TestSandboxedStdio(t *testing.T) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("bwrap not installed")
	}
	if out, err := exec.Command(bwrap, "--ro-bind", "/", "/", "--unshare-all", "true").CombinedOutput(); err != nil {
		t.Skipf("bwrap cannot run here: %v %s", err, out)
	}
	dir := t.TempDir()
	// The sandbox gets a private /tmp, so the server binary must live elsewhere.
	binDir, err := os.MkdirTemp("/var/tmp", "mcptest-")
	if err != nil {
		t.Skip("no /var/tmp")
	}
	t.Cleanup(func() { os.RemoveAll(binDir) })
	bin := filepath.Join(binDir, "server")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(secret, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, dir, map[string]any{"boxed": map[string]any{"command": bin, "env": map[string]string{mcptest.EnvServe: "1"}}})
	m := startManager(t, dir, func(c *Config) { c.Stdio, c.Sandbox, c.SandboxHide = StdioSandbox, bwrap, []string{dir} })
	set := m.Bind(context.Background(), "", nil)
	got, err := call(t, toolByName(t, set, "mcp__boxed__ls"), `{"path":`+jsonString(dir)+`}`)
	if err != nil || got != "" {
		t.Fatalf("the sandboxed server sees the data dir: %q %v", got, err)
	}
	if got, err := call(t, toolByName(t, set, "mcp__boxed__echo"), `{"text":"in a box"}`); err != nil || got != "echo: in a box" {
		t.Fatalf("echo: %q %v", got, err)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestUnavailableServerReported: a server that cannot start is left out
// of the turn's tools with a step saying why, and retried.
func TestUnavailableServerReported(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, map[string]any{"broken": map[string]any{"command": filepath.Join(dir, "no-such-server")}})
	m := startManager(t, dir, nil)
	var steps []string
	set := m.Bind(context.Background(), "", func(s string) { steps = append(steps, s) })
	if len(set.Tools()) != 0 || len(steps) != 1 ||
		!strings.HasPrefix(steps[0], "MCP server broken is unavailable (connect: ") || !strings.Contains(steps[0], "no such file or directory") {
		t.Fatalf("tools %d, steps %q", len(set.Tools()), steps)
	}
	st := m.Status(context.Background(), "").Servers[0]
	if st.State != protocol.MCPStateError && st.State != protocol.MCPStateConnecting {
		t.Fatalf("status %+v", st)
	}
}
