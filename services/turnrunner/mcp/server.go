package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/waggle-os/core/libs/protocol"
)

// Scopes of a server.
const (
	scopeGlobal    = "global"
	scopeWorkspace = "workspace"
)

// serverKey names a server: a global one has no workspace.
type serverKey struct {
	workspace string
	name      string
}

// toolDef is one tool of a connected server, as offered to the model.
type toolDef struct {
	name        string // mcp__<server>__<exposed>
	tool        string // the server's own name
	description string
	schema      json.RawMessage
	readOnly    bool
}

// server owns one MCP connection: it connects, lists the tools, restarts
// the server with backoff when it exits or the connection breaks, and
// serves calls meanwhile. Its goroutine runs from start until stop.
type server struct {
	key     serverKey
	cfg     ServerConfig
	m       *Manager
	refused error // set: never started (reported as refused)

	// life ends when stop is called; calls in flight end with it, since
	// the SDK's Close waits for them.
	life   context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// refresh asks the loop to list the tools again (list_changed).
	refresh chan struct{}

	mu       sync.Mutex
	state    string
	err      string
	restarts int
	session  *sdk.ClientSession
	tools    []toolDef
	// changed is closed and replaced whenever state changes, so callers
	// can wait for a connection without polling.
	changed chan struct{}
	// attempted is set once the first connection attempt has ended.
	attempted bool
	lastUsed  time.Time
}

func newServer(m *Manager, key serverKey, cfg ServerConfig, refused error) *server {
	s := &server{key: key, cfg: cfg, m: m, refused: refused, state: protocol.MCPStateConnecting,
		changed: make(chan struct{}), refresh: make(chan struct{}, 1), done: make(chan struct{}), lastUsed: time.Now()}
	s.life, s.cancel = context.WithCancel(context.Background())
	if refused != nil {
		s.state, s.err, s.attempted = protocol.MCPStateRefused, refused.Error(), true
		close(s.done)
	}
	return s
}

// start runs the connection loop until stop.
func (s *server) start() {
	if s.refused != nil {
		return
	}
	go func() {
		defer close(s.done)
		s.loop(s.life)
	}()
}

// stop ends the loop and closes the connection (the stdio process is
// ended), waiting for both.
func (s *server) stop() {
	s.cancel()
	<-s.done
	// A turn that bound this server's tools before it was replaced gets an
	// answer at once instead of waiting for a connection that never comes.
	s.mu.Lock()
	s.session, s.tools, s.state, s.err, s.attempted = nil, nil, protocol.MCPStateRefused, stoppedReason, true
	s.signalLocked()
	s.mu.Unlock()
}

func (s *server) log() []any {
	return []any{"mcp_server", s.key.name, "workspace", s.key.workspace}
}

// loop connects and reconnects until ctx ends.
func (s *server) loop(ctx context.Context) {
	cfg := s.m.cfg
	backoff := cfg.RestartBackoff
	for {
		began := time.Now()
		cs, stderr, err := s.connect(ctx)
		if ctx.Err() != nil {
			if cs != nil {
				_ = cs.Close()
			}
			return
		}
		if err == nil {
			var tools []toolDef
			if tools, err = s.listTools(ctx, cs); err != nil {
				_ = cs.Close()
			} else {
				s.setConnected(cs, tools)
				s.m.log.Info("mcp server connected", append(s.log(), "tools", len(tools))...)
				err = s.serve(ctx, cs)
				if ctx.Err() != nil {
					return
				}
				s.mu.Lock()
				s.restarts++
				s.mu.Unlock()
				if time.Since(began) > time.Minute {
					backoff = cfg.RestartBackoff // it ran fine for a while
				}
			}
		}
		reason := describeFailure(err, stderr)
		s.m.log.Warn("mcp server unavailable; retrying", append(s.log(), "err", reason, "retry_in", backoff)...)
		if s.cfg.transport() == transportHTTP && s.guarded() {
			// The detail (a refused address, a status, a body) stays in
			// the log: shown to users it would map the runner's network.
			reason = errUnreachable.Error()
		}
		s.setError(reason)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, cfg.MaxRestartBackoff)
		s.setState(protocol.MCPStateConnecting, "")
	}
}

// serve waits until the session ends (the server exited, the connection
// broke, a call found it broken) or ctx is cancelled, re-listing the tools
// when the server says they changed.
func (s *server) serve(ctx context.Context, cs *sdk.ClientSession) error {
	ended := make(chan error, 1)
	go func() { ended <- cs.Wait() }()
	for {
		select {
		case <-ctx.Done():
			_ = cs.Close()
			<-ended
			return ctx.Err()
		case err := <-ended:
			_ = cs.Close()
			if err == nil {
				err = errors.New("the server closed the connection")
			}
			return err
		case <-s.refresh:
			lctx, cancel := context.WithTimeout(ctx, s.m.cfg.ConnectTimeout)
			tools, err := s.listTools(lctx, cs)
			cancel()
			if err == nil {
				s.mu.Lock()
				s.tools = tools
				s.mu.Unlock()
			}
		}
	}
}

// connect starts (or dials) the server and completes the MCP handshake.
func (s *server) connect(ctx context.Context) (*sdk.ClientSession, *tailBuffer, error) {
	ctx, cancel := context.WithTimeout(ctx, s.m.cfg.ConnectTimeout)
	defer cancel()
	client := sdk.NewClient(&sdk.Implementation{Name: "waggle", Version: "1.0.0"}, &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case s.refresh <- struct{}{}:
			default:
			}
		},
	})
	var (
		transport sdk.Transport
		stderr    *tailBuffer
	)
	switch s.cfg.transport() {
	case transportStdio:
		cmd, err := s.m.command(s.key, s.cfg)
		if err != nil {
			return nil, nil, err
		}
		stderr = newTailBuffer(4 << 10)
		cmd.Stderr = stderr
		transport = &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	default:
		headers := http.Header{}
		for k, v := range s.cfg.Headers {
			headers.Set(k, v)
		}
		if s.cfg.Bearer != "" {
			headers.Set("Authorization", "Bearer "+s.cfg.Bearer)
		}
		transport = &sdk.StreamableClientTransport{
			Endpoint:   s.cfg.URL,
			HTTPClient: httpClient(headers, s.guarded()),
			MaxRetries: 2,
		}
	}
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, stderr, fmt.Errorf("connect: %w", err)
	}
	return cs, stderr, nil
}

// listTools reads every page of the server's tools and names them for
// the model.
func (s *server) listTools(ctx context.Context, cs *sdk.ClientSession) ([]toolDef, error) {
	var out []toolDef
	seen := map[string]bool{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		name := protocol.MCPToolName(s.key.name, exposedName(t.Name, s.key.name))
		if seen[name] {
			s.m.log.Warn("mcp tool name clash; keeping the first", append(s.log(), "tool", t.Name)...)
			continue
		}
		seen[name] = true
		schema, err := json.Marshal(t.InputSchema)
		if err != nil || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		def := toolDef{name: name, tool: t.Name, description: t.Description, schema: schema}
		if t.Annotations != nil {
			def.readOnly = t.Annotations.ReadOnlyHint
			if def.description == "" {
				def.description = t.Annotations.Title
			}
		}
		if def.description == "" {
			def.description = t.Title
		}
		out = append(out, def)
	}
	return out, nil
}

// maxToolName is the longest function name OpenAI-compatible APIs accept.
const maxToolName = 64

// exposedName makes a server's tool name fit a model's function names
// (letters, digits, '_' and '-', at most 64 with the mcp__<server>__
// prefix): other characters become '_', and a name too long is cut and
// given a short hash so two long names stay apart.
func exposedName(tool, server string) string {
	var b strings.Builder
	for _, r := range tool {
		if r < 128 && (r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	name := b.String()
	if name == "" {
		name = "_"
	}
	room := maxToolName - len(protocol.MCPToolName(server, ""))
	if len(name) > room {
		sum := sha256.Sum256([]byte(tool))
		suffix := "_" + hex.EncodeToString(sum[:])[:8]
		name = name[:max(room-len(suffix), 1)] + suffix
	}
	return name
}

func (s *server) setConnected(cs *sdk.ClientSession, tools []toolDef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.session, s.tools, s.state, s.err, s.attempted = cs, tools, protocol.MCPStateConnected, "", true
	s.signalLocked()
}

func (s *server) setError(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.session, s.tools, s.state, s.err, s.attempted = nil, nil, protocol.MCPStateError, reason, true
	s.signalLocked()
}

func (s *server) setState(state, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state, s.err = state, reason
	s.signalLocked()
}

func (s *server) signalLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// snapshot is the server's state at one moment.
type snapshot struct {
	state     string
	err       string
	restarts  int
	tools     []toolDef
	attempted bool
	changed   <-chan struct{}
}

func (s *server) snapshot() snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return snapshot{state: s.state, err: s.err, restarts: s.restarts, tools: s.tools, attempted: s.attempted, changed: s.changed}
}

func (s *server) touch() {
	s.mu.Lock()
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

// awaitFirst waits until the first connection attempt has ended (a server
// just configured) or ctx ends.
func (s *server) awaitFirst(ctx context.Context) {
	for {
		snap := s.snapshot()
		if snap.attempted {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-snap.changed:
		}
	}
}

// errRestarting marks a call that found its server gone.
var errRestarting = errors.New("restarting")

// stoppedReason is the state's reason, and a call's answer, once a config
// edit removed or replaced the server.
const stoppedReason = "the server was stopped (its configuration changed)"

// await returns the live session, waiting while the server (re)connects.
func (s *server) await(ctx context.Context) (*sdk.ClientSession, error) {
	for {
		s.mu.Lock()
		cs, state, reason, changed := s.session, s.state, s.err, s.changed
		s.mu.Unlock()
		if cs != nil && state == protocol.MCPStateConnected {
			return cs, nil
		}
		if state == protocol.MCPStateRefused {
			return nil, errors.New(reason)
		}
		select {
		case <-ctx.Done():
			if reason != "" {
				return nil, fmt.Errorf("%w (%s)", ctx.Err(), reason)
			}
			return nil, ctx.Err()
		case <-changed:
		}
	}
}

// broken closes a session a call found dead, so the loop restarts the
// server at once instead of waiting to notice.
func (s *server) broken(cs *sdk.ClientSession) {
	s.mu.Lock()
	current := s.session == cs
	if current {
		s.session = nil
	}
	s.mu.Unlock()
	if current {
		_ = cs.Close()
	}
}

// describeFailure is the reason shown for a failed or ended connection:
// the error and the last line the server wrote to stderr.
func describeFailure(err error, stderr *tailBuffer) string {
	msg := "stopped"
	if err != nil {
		msg = err.Error()
	}
	if stderr != nil {
		if last := stderr.lastLine(); last != "" {
			msg += ": " + last
		}
	}
	return msg
}

// headerTransport adds fixed headers to every request.
type headerTransport struct {
	headers http.Header
	base    http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.headers {
			r.Header[k] = v
		}
	}
	return t.base.RoundTrip(r)
}

// tailBuffer keeps the last bytes a process wrote to stderr.
type tailBuffer struct {
	mu    sync.Mutex
	limit int
	buf   []byte
}

func newTailBuffer(limit int) *tailBuffer { return &tailBuffer{limit: limit} }

// Write implements io.Writer; it never fails.
func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.limit {
		b.buf = append(b.buf[:0:0], b.buf[len(b.buf)-b.limit:]...)
	}
	return len(p), nil
}

// lastLine is the last non-empty line written, at most 300 bytes.
func (b *tailBuffer) lastLine() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(strings.ToValidUTF8(string(b.buf), "\uFFFD")), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if len(last) > 300 {
		last = last[:300] + "…"
	}
	return last
}

// childEnv is the runner's environment without Waggle's own settings
// (which hold the model API key), plus the entry's env.
func childEnv(extra map[string]string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WAGGLE_") {
			out = append(out, kv)
		}
	}
	for k, v := range extra {
		out = append(out, k+"="+v)
	}
	return out
}
