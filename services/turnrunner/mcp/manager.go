// Package mcp connects a turn runner to Model Context Protocol tool
// servers and offers their tools to the agent loop as
// mcp__<server>__<tool>.
//
// Servers are configured in Claude Desktop's format, under "mcpServers" in
// <data-dir>/config.json (every workspace) and in a workspace's config
// (workspace.json, that workspace only; an entry there overrides a global
// one of the same name). Each runner keeps its own connections: a stdio
// server is a process the runner starts (under bubblewrap on team
// servers), a Streamable HTTP server is a URL. A server that exits or
// whose connection breaks is restarted with backoff; a config edit is
// picked up within Config.ConfigCheck without a restart.
//
// Calls go through the turn's approval gate like a connector's (see
// ToolSet.Gate for the per-server trust that skips it), are cancelled on
// the server (notifications/cancelled) when the turn is, and end with an
// error result after the server's call timeout.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

// Stdio modes: how a runner starts stdio servers.
const (
	// StdioDirect runs the command as the runner's user (the desktop).
	StdioDirect = "direct"
	// StdioSandbox runs it under bubblewrap (team servers).
	StdioSandbox = "sandbox"
	// StdioOff refuses stdio servers (only HTTP ones are used).
	StdioOff = "off"
)

// Config configures a Manager. Zero durations take their defaults.
type Config struct {
	// DataDir holds config.json and the workspaces. Required.
	DataDir string
	// RunnerID names the runner in status replies.
	RunnerID string
	// Stdio (--mcp-stdio) is StdioDirect (default), StdioSandbox or
	// StdioOff; the runner resolves StdioAuto before the manager sees it.
	Stdio string
	// Sandbox is the bubblewrap binary for StdioSandbox; without it stdio
	// servers are refused in that mode.
	Sandbox string
	// TeamServer is set on a team server (--auth=required): a workspace's
	// HTTP servers may then reach only public addresses (see
	// AllowPrivateURLs), and their connection errors are shown without
	// detail.
	TeamServer bool
	// AllowPrivateURLs (--mcp-allow-private-urls) lets a team server's
	// workspace HTTP servers be on loopback, link-local, private or metadata
	// addresses (an operator's own MCP servers on the LAN).
	AllowPrivateURLs bool
	// SandboxHide are directories a sandboxed server must not read (the
	// data directory); a workspace server gets its workspace's files
	// directory back, writable.
	SandboxHide []string
	// CallTimeout (--mcp-call-timeout) is a call's limit when the server's
	// entry sets none. Default DefaultCallTimeout.
	CallTimeout time.Duration
	// ConnectTimeout bounds starting a server and its handshake. Default 30s.
	ConnectTimeout time.Duration
	// StartWait is how long a turn waits for servers still making their
	// first connection (just configured, or the runner just started) before
	// it goes on without their tools. Default 10s.
	StartWait time.Duration
	// RestartBackoff is the wait before the first restart, doubled up to
	// MaxRestartBackoff. Defaults 1s and 30s.
	RestartBackoff    time.Duration
	MaxRestartBackoff time.Duration
	// ConfigCheck is how often config.json (and a workspace's config, when
	// one of its turns runs) is looked at for changes. Default 2s.
	ConfigCheck time.Duration
	// WorkspaceIdle stops a workspace's servers when none of its turns used
	// them for this long. Default 10m.
	WorkspaceIdle time.Duration
	// OutputLimit caps the text of one result, in bytes. Default 64 KiB.
	OutputLimit int
	// RequestTimeout bounds a session-store request. Default 10s.
	RequestTimeout time.Duration
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.CallTimeout, DefaultCallTimeout)
	def(&c.ConnectTimeout, 30*time.Second)
	def(&c.StartWait, 10*time.Second)
	def(&c.RestartBackoff, time.Second)
	def(&c.MaxRestartBackoff, 30*time.Second)
	def(&c.ConfigCheck, 2*time.Second)
	def(&c.WorkspaceIdle, 10*time.Minute)
	def(&c.RequestTimeout, 10*time.Second)
	if c.OutputLimit <= 0 {
		c.OutputLimit = 64 << 10
	}
	if c.Stdio == "" {
		c.Stdio = StdioDirect
	}
	c.MaxRestartBackoff = max(c.MaxRestartBackoff, c.RestartBackoff)
	return c
}

// Validate reports a config that cannot work.
func (c Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("mcp: DataDir is required")
	}
	switch c.Stdio {
	case "", StdioDirect, StdioSandbox, StdioOff:
	default:
		return fmt.Errorf("mcp: stdio mode %q: want direct, sandbox or off", c.Stdio)
	}
	return nil
}

// Manager owns one runner's MCP connections.
type Manager struct {
	cfg Config
	nc  *nats.Conn
	log *slog.Logger

	svc      *bus.Service
	sub      *nats.Subscription
	stopLoop context.CancelFunc
	loop     sync.WaitGroup

	// changes are the workspaces whose MCP config changed (by id; Deleted
	// sticks), applied by the loop; changed wakes it.
	changesMu sync.Mutex
	changes   map[string]protocol.MCPConfigChanged
	changed   chan struct{}

	mu      sync.Mutex
	stopped bool
	global  map[string]*server
	// file is what config.json looked like when last read.
	file       fileStamp
	configErr  string
	workspaces map[string]*workspaceServers
}

// workspaceServers are one workspace's own servers.
type workspaceServers struct {
	// load serialises reading the workspace's config.
	load sync.Mutex
	// servers, raw, checked and lastUsed are guarded by load; replacing
	// servers also by Manager.mu (Status and reapIdle read them).
	servers  map[string]*server
	raw      string // the mcpServers JSON they were built from
	checked  time.Time
	lastUsed time.Time
}

type fileStamp struct {
	exists bool
	mod    time.Time
	size   int64
}

// New returns an unstarted manager.
func New(cfg Config, nc *nats.Conn, log *slog.Logger) *Manager {
	if log == nil {
		log = slog.Default()
	}
	return &Manager{cfg: cfg.withDefaults(), nc: nc, log: log, global: map[string]*server{}, workspaces: map[string]*workspaceServers{},
		changes: map[string]protocol.MCPConfigChanged{}, changed: make(chan struct{}, 1)}
}

// Start reads config.json, starts its servers (without waiting for them),
// watches the file, follows protocol.MCPConfigChanges and answers
// protocol.ListMCPServers.Subject.
func (m *Manager) Start(ctx context.Context) error {
	if err := m.cfg.Validate(); err != nil {
		return err
	}
	m.reloadGlobal()
	loopCtx, stop := context.WithCancel(context.Background())
	m.stopLoop = stop
	m.loop.Go(func() { m.watch(loopCtx) })
	if m.nc == nil {
		return nil
	}
	svc, err := bus.NewService(m.nc, bus.ServiceConfig{Name: protocol.ServiceMCP, Logger: m.log})
	if err != nil {
		m.Stop(ctx)
		return fmt.Errorf("mcp: %w", err)
	}
	m.svc = svc
	if err := bus.Handle(svc, protocol.ListMCPServers, m.servers); err != nil {
		m.Stop(ctx)
		return fmt.Errorf("mcp: %w", err)
	}
	if m.sub, err = bus.Subscribe(m.nc, protocol.MCPConfigChanges, m.noteChange); err != nil {
		m.Stop(ctx)
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}

// noteChange queues a workspace's config change for the loop (the
// subscription's goroutine must not wait for processes to end).
func (m *Manager) noteChange(ev protocol.MCPConfigChanged) {
	if !protocol.ValidID(ev.Workspace) {
		return
	}
	m.changesMu.Lock()
	prev, ok := m.changes[ev.Workspace]
	ev.Deleted = ev.Deleted || (ok && prev.Deleted)
	m.changes[ev.Workspace] = ev
	m.changesMu.Unlock()
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// applyChanges stops the servers of deleted workspaces and re-reads the
// config of changed ones this runner runs (a workspace it does not run
// reads its config at its next turn anyway).
func (m *Manager) applyChanges(ctx context.Context) {
	m.changesMu.Lock()
	changes := m.changes
	m.changes = map[string]protocol.MCPConfigChanged{}
	m.changesMu.Unlock()
	for id, ev := range changes {
		m.mu.Lock()
		ws := m.workspaces[id]
		m.mu.Unlock()
		if ws == nil {
			continue
		}
		// The loader holds load while it swaps servers; taking it first
		// means no server is half started when it is stopped here.
		ws.load.Lock()
		if ev.Deleted {
			var gone []*server
			m.mu.Lock()
			if m.workspaces[id] == ws {
				for _, s := range ws.servers {
					gone = append(gone, s)
				}
				delete(m.workspaces, id)
			}
			m.mu.Unlock()
			ws.load.Unlock()
			stopAll(gone)
			m.log.Info("mcp: workspace deleted; its servers stopped", "workspace", id, "servers", len(gone))
			continue
		}
		m.reloadLocked(ctx, id, ws)
		ws.load.Unlock()
	}
}

// Stop stops answering, the watcher and every server (their processes
// are ended).
func (m *Manager) Stop(ctx context.Context) error {
	var err error
	if m.sub != nil {
		_ = m.sub.Unsubscribe()
	}
	if m.svc != nil {
		err = m.svc.Stop(ctx)
	}
	if m.stopLoop != nil {
		m.stopLoop()
		m.loop.Wait()
	}
	m.mu.Lock()
	m.stopped = true
	var all []*server
	for _, s := range m.global {
		all = append(all, s)
	}
	for _, ws := range m.workspaces {
		for _, s := range ws.servers {
			all = append(all, s)
		}
	}
	m.global, m.workspaces = map[string]*server{}, map[string]*workspaceServers{}
	m.mu.Unlock()
	stopAll(all)
	return err
}

// stopAll stops servers concurrently (each may wait for its process).
func stopAll(servers []*server) {
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(s.stop)
	}
	wg.Wait()
}

// watch re-reads config.json when it changes and stops idle workspaces'
// servers.
func (m *Manager) watch(ctx context.Context) {
	t := time.NewTicker(m.cfg.ConfigCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.reloadGlobal()
			m.reapIdle(time.Now())
		case <-m.changed:
			m.applyChanges(ctx)
		}
	}
}

// reloadGlobal re-reads config.json if its size or time changed. A file
// that cannot be parsed keeps the running servers (a half-saved edit must
// not stop them) and is reported.
func (m *Manager) reloadGlobal() {
	path := filepath.Join(m.cfg.DataDir, "config.json")
	var stamp fileStamp
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		m.log.Warn("mcp: config unreadable; keeping the servers", "path", path, "err", err)
		return
	default:
		stamp = fileStamp{exists: true, mod: fi.ModTime(), size: fi.Size()}
	}
	m.mu.Lock()
	same := stamp == m.file
	m.mu.Unlock()
	if same {
		return
	}
	var entries []entry
	if stamp.exists {
		b, err := os.ReadFile(path)
		if err == nil {
			entries, err = parseServers(b)
		}
		if err != nil {
			m.log.Warn("mcp: config invalid; keeping the servers", "path", path, "err", err)
			m.mu.Lock()
			m.file, m.configErr = stamp, "config.json could not be read: "+err.Error()
			m.mu.Unlock()
			return
		}
	}
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return
	}
	m.file, m.configErr = stamp, ""
	next, gone, fresh := m.reconcile(m.global, entries, "")
	m.global = next
	m.mu.Unlock()
	m.swap(gone, fresh)
}

// swap stops replaced servers, then starts their successors.
func (m *Manager) swap(gone, fresh []*server) {
	stopAll(gone)
	for _, s := range fresh {
		s.start()
	}
}

// reconcile builds the server set for entries: an unchanged entry keeps
// its running server; a new or changed one gets a new (unstarted) server;
// the rest are returned to be stopped.
func (m *Manager) reconcile(cur map[string]*server, entries []entry, workspace string) (next map[string]*server, gone, fresh []*server) {
	next = map[string]*server{}
	for _, e := range entries {
		if e.err == nil && e.cfg.Disabled {
			continue
		}
		refused := e.err
		if refused == nil {
			refused = m.refusal(e.cfg)
		}
		if s, ok := cur[e.name]; ok && s.cfg.equal(e.cfg) && (s.refused == nil) == (refused == nil) {
			next[e.name] = s
			continue
		}
		s := newServer(m, serverKey{workspace: workspace, name: e.name}, e.cfg, refused)
		next[e.name] = s
		fresh = append(fresh, s)
	}
	for name, s := range cur {
		if next[name] != s {
			gone = append(gone, s)
		}
	}
	return next, gone, fresh
}

// refusal says why this runner will not start a valid entry (nil: it will).
func (m *Manager) refusal(c ServerConfig) error {
	if c.transport() != transportStdio {
		return nil
	}
	switch {
	case m.cfg.Stdio == StdioOff:
		return errors.New("stdio MCP servers are turned off on this server (--mcp-stdio=off)")
	case m.cfg.Stdio == StdioSandbox && m.cfg.Sandbox == "":
		return errors.New("stdio MCP servers must run sandboxed here and bubblewrap is not installed; an admin can allow them unsandboxed with --mcp-stdio=direct")
	}
	return nil
}

// command is the process of a stdio server: its command directly, or
// under bubblewrap with the host read-only, the data directory hidden and
// (for a workspace's server) that workspace's files the only writable
// place.
func (m *Manager) command(key serverKey, c ServerConfig) (*exec.Cmd, error) {
	if err := m.refusal(c); err != nil {
		return nil, err
	}
	var cmd *exec.Cmd
	if m.cfg.Stdio == StdioSandbox {
		dir := ""
		if key.workspace != "" {
			dir = filepath.Join(m.cfg.DataDir, "workspaces", key.workspace, "files")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("workspace files: %w", err)
			}
		}
		cmd = exec.Command(m.cfg.Sandbox, sandboxArgs(dir, m.cfg.SandboxHide, c.Command, c.Args)...)
	} else {
		cmd = exec.Command(c.Command, c.Args...)
		if key.workspace != "" {
			dir := filepath.Join(m.cfg.DataDir, "workspaces", key.workspace, "files")
			if os.MkdirAll(dir, 0o700) == nil {
				cmd.Dir = dir
			}
		}
	}
	cmd.Env = childEnv(c.Env)
	// A grandchild holding stderr open must not hang the wait for exit.
	cmd.WaitDelay = 2 * time.Second
	return cmd, nil
}

// sandboxArgs are bubblewrap's arguments, as for bash: the host read-only,
// a private /tmp, home directories and hide covered by empty tmpfs, dir
// (if any) bound back writable, every namespace unshared — except the
// network, which most MCP servers exist to reach.
func sandboxArgs(dir string, hide []string, command string, args []string) []string {
	out := []string{"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"}
	for _, h := range append([]string{"/root", "/home"}, hide...) {
		if st, err := os.Stat(h); err == nil && st.IsDir() {
			out = append(out, "--tmpfs", h)
		}
	}
	chdir := "/tmp"
	if dir != "" {
		out = append(out, "--bind", dir, dir)
		chdir = dir
	}
	out = append(out, "--chdir", chdir, "--unshare-all", "--share-net", "--die-with-parent", "--new-session", "--", command)
	return append(out, args...)
}

// reapIdle stops the servers of workspaces no turn used for WorkspaceIdle.
func (m *Manager) reapIdle(now time.Time) {
	var gone []*server
	m.mu.Lock()
	for id, ws := range m.workspaces {
		if !ws.load.TryLock() {
			continue // a turn is loading it right now
		}
		if now.Sub(ws.lastUsed) > m.cfg.WorkspaceIdle {
			for _, s := range ws.servers {
				gone = append(gone, s)
			}
			delete(m.workspaces, id)
		}
		ws.load.Unlock()
	}
	m.mu.Unlock()
	stopAll(gone)
}

// workspace returns the workspace's own servers, re-reading its config
// from the session store when the last look is older than ConfigCheck.
func (m *Manager) workspace(ctx context.Context, id string) map[string]*server {
	if id == "" || !protocol.ValidID(id) {
		return nil
	}
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return nil
	}
	ws := m.workspaces[id]
	if ws == nil {
		ws = &workspaceServers{servers: map[string]*server{}}
		m.workspaces[id] = ws
	}
	m.mu.Unlock()

	ws.load.Lock()
	defer ws.load.Unlock()
	now := time.Now()
	ws.lastUsed = now
	if !ws.checked.IsZero() && now.Sub(ws.checked) < m.cfg.ConfigCheck {
		return ws.servers
	}
	return m.reloadLocked(ctx, id, ws)
}

// reloadLocked reads the workspace's config from the session store and
// reconciles its servers with it; the caller holds ws.load.
func (m *Manager) reloadLocked(ctx context.Context, id string, ws *workspaceServers) map[string]*server {
	now := time.Now()
	raw, err := m.workspaceConfig(ctx, id)
	if err != nil {
		// Keep what runs: the store restarting must not stop the servers.
		m.log.Warn("mcp: workspace config unavailable", "workspace", id, "err", err)
		return ws.servers
	}
	ws.checked = now
	if raw == ws.raw {
		return ws.servers
	}
	// Not an object: no servers (Status reports the config error).
	var members map[string]json.RawMessage
	if raw != "" {
		_ = json.Unmarshal([]byte(raw), &members)
	}
	m.mu.Lock()
	if m.stopped || m.workspaces[id] != ws {
		m.mu.Unlock()
		return nil
	}
	next, gone, fresh := m.reconcile(ws.servers, parseServerMap(members), id)
	ws.servers, ws.raw = next, raw
	m.mu.Unlock()
	m.swap(gone, fresh)
	return ws.servers
}

// workspaceConfig is the workspace's "mcpServers" JSON ("" for none).
func (m *Manager) workspaceConfig(ctx context.Context, id string) (string, error) {
	if m.nc == nil {
		return "", nil
	}
	rctx, cancel := context.WithTimeout(ctx, m.cfg.RequestTimeout)
	defer cancel()
	rep, err := bus.Call(rctx, m.nc, protocol.GetWorkspaceDoc, protocol.WorkspaceRequest{Workspace: id})
	if protocol.KindOf(err) == protocol.NotFound {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var doc struct {
		MCPServers json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal(rep.Workspace, &doc); err != nil {
		return "", fmt.Errorf("mcp: workspace %s: %w", id, err)
	}
	if s := string(doc.MCPServers); s != "null" {
		return s, nil
	}
	return "", nil
}

// active is the servers a workspace's turn uses, by name (the workspace's
// own override global ones), after reading the workspace's config.
func (m *Manager) active(ctx context.Context, workspace string) []*server {
	own := m.workspace(ctx, workspace)
	m.mu.Lock()
	byName := map[string]*server{}
	for name, s := range m.global {
		byName[name] = s
	}
	m.mu.Unlock()
	for name, s := range own {
		byName[name] = s
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]*server, 0, len(names))
	for _, name := range names {
		out = append(out, byName[name])
	}
	return out
}

// servers answers protocol.ListMCPServers.Subject.
func (m *Manager) servers(ctx context.Context, req protocol.MCPServersRequest) (protocol.MCPServersReply, error) {
	if req.Workspace != "" && !protocol.ValidID(req.Workspace) {
		return protocol.MCPServersReply{}, protocol.Errorf(protocol.Invalid, "invalid workspace id")
	}
	return m.Status(ctx, req.Workspace), nil
}

// Status lists the servers a workspace's turns use ("" for the global
// ones), with their state and tools. It starts nothing: a workspace server
// that is configured but not running on this runner is reported idle (it
// starts with the workspace's next turn), so a listing is safe to ask for
// at any time, by anyone who may read the workspace.
func (m *Manager) Status(ctx context.Context, workspace string) protocol.MCPServersReply {
	rep := protocol.MCPServersReply{Runner: m.cfg.RunnerID, Servers: []protocol.MCPServerStatus{}}
	byName := map[string]protocol.MCPServerStatus{}
	m.mu.Lock()
	for name, s := range m.global {
		byName[name] = statusOf(s)
	}
	if m.configErr != "" {
		rep.ConfigErrors = append(rep.ConfigErrors, m.configErr)
	}
	running := map[string]*server{}
	if ws := m.workspaces[workspace]; workspace != "" && ws != nil {
		maps.Copy(running, ws.servers)
	}
	m.mu.Unlock()
	if workspace != "" && protocol.ValidID(workspace) {
		own, errText := m.configured(ctx, workspace, running)
		if errText != "" {
			rep.ConfigErrors = append(rep.ConfigErrors, errText)
		}
		maps.Copy(byName, own)
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		rep.Servers = append(rep.Servers, byName[name])
	}
	return rep
}

// configured is the workspace's own servers as its config names them: the
// state of those running here, idle (or refused) for the others. When the
// config cannot be read, the running ones are reported.
func (m *Manager) configured(ctx context.Context, workspace string, running map[string]*server) (map[string]protocol.MCPServerStatus, string) {
	out := map[string]protocol.MCPServerStatus{}
	raw, err := m.workspaceConfig(ctx, workspace)
	if err != nil {
		m.log.Warn("mcp: workspace config unavailable", "workspace", workspace, "err", err)
		for name, s := range running {
			out[name] = statusOf(s)
		}
		return out, "the workspace's configuration could not be read"
	}
	var members map[string]json.RawMessage
	if raw != "" && json.Unmarshal([]byte(raw), &members) != nil {
		return out, "workspace mcpServers must be an object"
	}
	for _, e := range parseServerMap(members) {
		if e.err == nil && e.cfg.Disabled {
			continue
		}
		refused := e.err
		if refused == nil {
			refused = m.refusal(e.cfg)
		}
		if s, ok := running[e.name]; ok && s.cfg.equal(e.cfg) {
			out[e.name] = statusOf(s)
			continue
		}
		st := protocol.MCPServerStatus{Name: e.name, Scope: scopeWorkspace, Transport: e.cfg.transport(),
			State: protocol.MCPStateIdle, Tools: []protocol.MCPToolInfo{}}
		if st.Transport == "" {
			st.Transport = "unknown"
		}
		if refused != nil {
			st.State, st.Error = protocol.MCPStateRefused, refused.Error()
		}
		out[e.name] = st
	}
	return out, ""
}

// statusOf is a server's status now.
func statusOf(s *server) protocol.MCPServerStatus {
	snap := s.snapshot()
	st := protocol.MCPServerStatus{
		Name: s.key.name, Scope: scopeGlobal, Transport: s.cfg.transport(),
		State: snap.state, Error: snap.err, Restarts: snap.restarts, Tools: []protocol.MCPToolInfo{},
	}
	if st.Transport == "" {
		st.Transport = "unknown"
	}
	if s.key.workspace != "" {
		st.Scope = scopeWorkspace
	}
	for _, d := range snap.tools {
		st.Tools = append(st.Tools, protocol.MCPToolInfo{
			Name: d.name, Tool: d.tool, Description: d.description, Gated: !s.cfg.Trust.trusts(d.tool, d.readOnly),
		})
	}
	return st
}
