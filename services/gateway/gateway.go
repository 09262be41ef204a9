// Package gateway is the HTTP edge of Waggle core: it validates requests,
// answers JSON routes by asking services over NATS, and relays chat turns
// from JetStream to clients as Server-Sent Events. It is the only package
// that imports chi.
package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/llmprobe"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/telemetry"
	"github.com/waggle-os/core/services/gateway/internal/agentapi"
	"github.com/waggle-os/core/services/gateway/internal/approvalapi"
	"github.com/waggle-os/core/services/gateway/internal/commandapi"
	"github.com/waggle-os/core/services/gateway/internal/mcpapi"
	"github.com/waggle-os/core/services/gateway/internal/memoryapi"
	"github.com/waggle-os/core/services/gateway/internal/openapi"
	"github.com/waggle-os/core/services/gateway/internal/ratelimit"
	"github.com/waggle-os/core/services/gateway/internal/respond"
	"github.com/waggle-os/core/services/gateway/internal/sessionsapi"
	"github.com/waggle-os/core/services/gateway/internal/teamauth"
	"github.com/waggle-os/core/services/gateway/internal/teamsapi"
	"github.com/waggle-os/core/services/gateway/spa"
)

// DefaultAllowedOrigins are the browser origins of the Waggle desktop and
// web clients (reference §0.3), in the original's order: the first is the
// fallback Access-Control-Allow-Origin of event streams.
var DefaultAllowedOrigins = []string{
	"http://localhost:1420", "http://127.0.0.1:1420", "tauri://localhost", "https://tauri.localhost",
	"http://localhost:3333", "http://127.0.0.1:3333", "http://localhost:8080", "http://127.0.0.1:8080",
	"http://localhost:8081", "http://localhost:8082", "http://localhost:5173", "http://127.0.0.1:5173",
}

// Config configures the gateway.
type Config struct {
	// Addr is the listen address. Default 127.0.0.1:3333.
	Addr string
	// DataDir is the data directory; an explicit workspacePath must resolve
	// inside it. Required.
	DataDir string
	// MaxMessageLength is the longest chat message in UTF-16 code units.
	// Default 50000; negative means no limit.
	MaxMessageLength int
	// BodyLimit is the largest request body in bytes. Default 1 MiB.
	BodyLimit int64
	// AllowedOrigins are the CORS origins (exact match). Default
	// DefaultAllowedOrigins.
	AllowedOrigins []string
	// KeepAlive is the idle interval after which an event stream gets a
	// comment line. Default 15s.
	KeepAlive time.Duration
	// Token is the bearer token non-loopback clients must send (reported as
	// wsToken by /health). Default: random per start.
	Token string
	// Probe checks the model server for /health.
	Probe llmprobe.Config
	// DefaultModel is reported by /health. Default claude-sonnet-4-6.
	DefaultModel string
	// Mode is reported by /health: "local" (default) or "team".
	Mode string
	// ShutdownGrace is how long Stop lets open streams finish before
	// cutting them. Default 5s.
	ShutdownGrace time.Duration
	// RequestTimeout bounds one bus request made for a JSON route.
	// Default 10s.
	RequestTimeout time.Duration
	// StartTimeout bounds the wait for a runner to accept a turn; past it
	// the chat is refused with 503 RUNNER_BUSY. Default 30s: under a burst
	// a start waits its turn rather than failing.
	StartTimeout time.Duration
	// Auth is "local" (default: desktop trust — loopback clients pass,
	// others need Token) or "required" (team server: every request carries
	// a user's bearer token; workspaces are scoped to the user's teams).
	Auth string
	// RateLimit is requests per route per client per RateWindow. 0 means
	// the mode's default: off in local mode (a desktop user only gets in
	// their own way), 100 with Auth "required". Negative turns it off.
	RateLimit int
	// RateLimitChat overrides RateLimit for POST /api/chat. Default 120
	// whenever rate limiting is on.
	RateLimitChat int
	// RateWindow is the sliding window of the rate limit. Default 60s.
	RateWindow time.Duration
	// Replicas is the replica count of the gateway's KV buckets (shared
	// rate-limit counters). Default 1.
	Replicas int
	// FrontendDir, when set, is a built single-page app (the Waggle desktop
	// app's dist) served at "/" with an index.html fallback; the web chat
	// then lives at /chat/. Empty: the web chat is at "/".
	FrontendDir string
	// AllowedHosts are the names, besides localhost, the listen address and
	// any IP literal, that a request's Host may carry (DNS rebinding
	// protection): a team server's public names. ".example.com" allows a
	// domain and its subdomains; "*" turns the check off.
	AllowedHosts []string
	// Stream shapes the turn-event stream; gateways and runners must agree
	// (the composition root passes both the same).
	Stream bus.TurnStreamConfig
}

// Auth modes.
const (
	AuthLocal    = "local"
	AuthRequired = "required"
)

// limits is the rate-limit configuration for the mode, or ok=false when
// rate limiting is off.
func (c *Config) limits() (ratelimit.Config, bool) {
	limit := c.RateLimit
	if limit == 0 && c.Auth == AuthRequired {
		limit = 100
	}
	if limit <= 0 {
		return ratelimit.Config{Limit: -1}, false
	}
	chat := c.RateLimitChat
	if chat <= 0 {
		chat = ratelimit.DefaultRouteLimits["/api/chat"]
	}
	return ratelimit.Config{Limit: limit, RouteLimits: map[string]int{"/api/chat": chat}, Window: c.RateWindow, Replicas: c.Replicas}, true
}

// Validate checks c and fills defaults.
func (c *Config) Validate() error {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:3333"
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("gateway: listen address %q: %w", c.Addr, err)
	}
	if c.DataDir == "" {
		return errors.New("gateway: DataDir is required")
	}
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return fmt.Errorf("gateway: data dir: %w", err)
	}
	c.DataDir = abs
	if c.MaxMessageLength == 0 {
		c.MaxMessageLength = 50000
	}
	if c.BodyLimit <= 0 {
		c.BodyLimit = 1 << 20
	}
	if c.AllowedOrigins == nil {
		c.AllowedOrigins = DefaultAllowedOrigins
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = 15 * time.Second
	}
	if c.Token == "" {
		var b [24]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fmt.Errorf("gateway: token: %w", err)
		}
		c.Token = hex.EncodeToString(b[:])
	}
	if err := c.Probe.Validate(); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	if c.DefaultModel == "" {
		c.DefaultModel = "claude-sonnet-4-6"
	}
	switch c.Auth {
	case "":
		c.Auth = AuthLocal
	case AuthLocal, AuthRequired:
	default:
		return fmt.Errorf("gateway: auth mode %q: want local or required", c.Auth)
	}
	if c.Mode == "" {
		c.Mode = "local"
		if c.Auth == AuthRequired {
			c.Mode = "team"
		}
	}
	if l, on := c.limits(); on {
		if err := l.Validate(); err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
	}
	if c.FrontendDir != "" {
		if err := spa.Check(c.FrontendDir); err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 5 * time.Second
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 10 * time.Second
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = 30 * time.Second
	}
	return nil
}

// Service is the HTTP gateway.
type Service struct {
	cfg   Config
	dial  bus.Dialer
	log   *slog.Logger
	ready func() bool

	nc     *nats.Conn
	js     jetstream.JetStream
	probe  *llmprobe.Prober
	srv    *http.Server
	ln     net.Listener
	served chan error

	hub     *hub
	storage storageState
	hosts   *hostPolicy

	// streams is cancelled when the shutdown grace runs out, cutting event
	// streams that are still open.
	streams    context.Context
	stopStream context.CancelFunc
	streamWG   sync.WaitGroup
}

// New returns an unstarted gateway. ready reports whether every service of
// this process has started (for /health); nil means always.
func New(cfg Config, dial bus.Dialer, ready func() bool, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	if ready == nil {
		ready = func() bool { return true }
	}
	return &Service{cfg: cfg, dial: dial, ready: ready, log: log.With("service", "gateway")}
}

// Addr is the address the gateway listens on (after Start).
func (s *Service) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Token is the bearer token non-loopback clients must present.
func (s *Service) Token() string { return s.cfg.Token }

// Start connects to the bus, binds the listen address and serves.
func (s *Service) Start(ctx context.Context) error {
	if err := s.cfg.Validate(); err != nil {
		return err
	}
	s.probe = llmprobe.New(s.cfg.Probe)
	nc, err := s.dial("waggle-gateway")
	if err != nil {
		return err
	}
	s.nc = nc
	if s.js, err = jetstream.New(nc); err != nil {
		nc.Close()
		return fmt.Errorf("gateway: jetstream: %w", err)
	}
	if _, err := bus.EnsureTurnStream(ctx, s.js, s.cfg.Stream); err != nil {
		nc.Close()
		return err
	}
	s.hub = newHub()
	if err := s.hub.start(ctx, s.js); err != nil {
		nc.Close()
		return err
	}
	if err := s.watchStorage(); err != nil {
		nc.Close()
		return err
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		nc.Close()
		return fmt.Errorf("gateway: cannot listen on %s (is another waggle already running?): %w", s.cfg.Addr, err)
	}
	s.ln = ln
	s.hosts = newHostPolicy(s.cfg.Addr, machineHostname(), s.cfg.AllowedHosts)
	if !loopbackListener(hostOnly(s.cfg.Addr)) && len(s.cfg.AllowedHosts) == 0 {
		s.log.Warn("listening beyond loopback with no --allowed-hosts: requests that name this server by anything but an IP address, localhost or the machine name are refused",
			"addr", s.cfg.Addr)
	}
	s.streams, s.stopStream = context.WithCancel(context.Background())
	s.srv = &http.Server{
		Handler:           s.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		// No WriteTimeout: it would cut event streams; idle streams get
		// keep-alives instead.
		IdleTimeout: 120 * time.Second,
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.served = make(chan error, 1)
	go func() { s.served <- s.srv.Serve(ln) }()
	s.log.Info("listening", "addr", ln.Addr().String())
	return nil
}

// Stop stops accepting connections, lets open streams finish for
// ShutdownGrace (bounded by ctx), then cuts them and closes the bus
// connection.
func (s *Service) Stop(ctx context.Context) error {
	if s.srv == nil {
		if s.nc != nil {
			s.nc.Close()
		}
		return nil
	}
	graceCtx, cancel := context.WithTimeout(ctx, s.cfg.ShutdownGrace)
	defer cancel()
	err := s.srv.Shutdown(graceCtx)
	if err != nil {
		// Streams still open: cut them (their turns keep running on the
		// runner and stay resumable). Closing the connections is what ends
		// a relay blocked writing to a client that stopped reading.
		s.stopStream()
		err = s.srv.Close()
		s.streamWG.Wait()
	}
	s.stopStream()
	<-s.served
	s.hub.stop()
	drainErr := bus.Drain(ctx, s.nc)
	return errors.Join(err, drainErr)
}

func (s *Service) routes() http.Handler {
	r := chi.NewRouter()
	deps := s.deps()
	// The Host check comes before CORS, auth and every route (/health
	// too: it reports the token).
	r.Use(metrics, s.recoverer, securityHeaders, s.hostCheck, s.cors)
	r.Use(s.pages) // the browser clients are public files, served before auth
	// While the bus is away, every route that needs it answers 503 at once
	// (the static pages above still load).
	r.Use(s.busCheck)
	limits, limited := s.cfg.limits()
	if s.cfg.Auth == AuthRequired {
		// Team server: users, team-scoped workspaces, viewer rules and the
		// shared rate limit, all before any handler runs.
		r.Use(teamauth.Middleware(deps, teamauth.Config{Limits: limits}))
	} else {
		r.Use(s.auth)
		if limited {
			r.Use(ratelimit.Middleware(deps, limits))
		}
	}
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		respond.Fail(w, protocol.NotFound, "", "Not found")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		respond.Fail(w, protocol.MethodNotAllowed, "", "Method not allowed")
	})
	r.Get("/health", s.health)
	r.Method(http.MethodGet, "/metrics", telemetry.Handler())
	r.Route("/api", func(r chi.Router) {
		r.Post("/chat", s.chat)
		r.Delete("/chat/history", s.clearHistory)
		r.Get("/history", s.history)
		r.Get("/chat/turns/{turnId}/events", s.turnEvents)
		r.Post("/chat/turns/{turnId}/cancel", s.cancelTurnRoute)
		r.Post("/agent/abort", s.abort)
		r.Post("/agent/run", s.agentRun)
		r.Get("/personas", s.listPersonas)
		r.Get("/openapi.json", openapi.Handler)
		sessionsapi.Mount(r, deps)
		approvalapi.Mount(r, deps)
		commandapi.Mount(r, deps)
		agentapi.Mount(r, deps)
		teamsapi.Mount(r, deps)
		mcpapi.Mount(r, deps)
		memoryapi.Mount(r, deps)
	})
	return r
}
