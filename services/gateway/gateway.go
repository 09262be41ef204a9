// Package gateway is the HTTP edge of Waggle core: it validates requests,
// answers JSON routes by asking services over NATS, and relays chat turns
// from JetStream to clients as Server-Sent Events. It is the only package
// that imports chi.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
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
	"github.com/waggle-os/core/services/gateway/internal/contextapi"
	"github.com/waggle-os/core/services/gateway/internal/filesapi"
	"github.com/waggle-os/core/services/gateway/internal/jobsapi"
	"github.com/waggle-os/core/services/gateway/internal/mcpapi"
	"github.com/waggle-os/core/services/gateway/internal/memoryapi"
	"github.com/waggle-os/core/services/gateway/internal/notifyapi"
	"github.com/waggle-os/core/services/gateway/internal/openapi"
	"github.com/waggle-os/core/services/gateway/internal/ratelimit"
	"github.com/waggle-os/core/services/gateway/internal/respond"
	"github.com/waggle-os/core/services/gateway/internal/sessionsapi"
	"github.com/waggle-os/core/services/gateway/internal/settingsapi"
	"github.com/waggle-os/core/services/gateway/internal/teamauth"
	"github.com/waggle-os/core/services/gateway/internal/teamsapi"
	"github.com/waggle-os/core/services/gateway/internal/vaultapi"
)

// Service is the HTTP gateway.
type Service struct {
	cfg   Config
	dial  bus.Dialer
	log   *slog.Logger
	ready func() bool

	nc     *nats.Conn
	js     jetstream.JetStream
	probe  *modelServer
	srv    *http.Server
	ln     net.Listener
	served chan error

	hub     *hub
	storage storageState
	hosts   *hostPolicy
	// origins are the browser origins allowed besides the server's own
	// (Config.origins).
	origins []string
	// beyondLoopback is set when the listener accepts non-loopback
	// clients: local mode then wants the token from every client.
	beyondLoopback bool

	// streams is cancelled when the shutdown grace runs out, cutting event
	// streams that are still open.
	streams    context.Context
	stopStream context.CancelFunc
	streamWG   sync.WaitGroup

	// release returns a burst's memory to the OS when its streams end
	// (release.go); its loop runs from Start to Stop.
	release     *releaser
	stopRelease context.CancelFunc
	releaseDone chan struct{}
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
	if err := s.cfg.prepare(); err != nil {
		return err
	}
	nc, err := s.dial("waggle-gateway")
	if err != nil {
		return err
	}
	s.nc = nc
	s.probe = &modelServer{probe: llmprobe.New(s.cfg.Probe), nc: nc, ownKey: s.cfg.Probe.APIKey != "", timeout: s.cfg.RequestTimeout}
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
	s.origins = s.cfg.origins()
	s.beyondLoopback = !loopbackListener(hostOnly(s.cfg.Addr))
	if s.beyondLoopback && s.cfg.Auth == AuthLocal {
		// The token itself is not logged: /health gives it to this
		// machine's own clients.
		s.log.Info("listening beyond loopback in local mode: every client needs the bearer token (the wsToken of /health, read on this machine)",
			"addr", s.cfg.Addr)
	}
	if s.beyondLoopback && len(s.cfg.AllowedHosts) == 0 {
		s.log.Warn("listening beyond loopback with no --allowed-hosts: requests that name this server by anything but an IP address, localhost or the machine name are refused",
			"addr", s.cfg.Addr)
	}
	s.streams, s.stopStream = context.WithCancel(context.Background())
	s.release = newReleaser()
	var releaseCtx context.Context
	releaseCtx, s.stopRelease = context.WithCancel(context.Background())
	s.releaseDone = make(chan struct{})
	go func() {
		defer close(s.releaseDone)
		s.release.run(releaseCtx)
	}()
	s.srv = &http.Server{
		Handler:           s.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		// No ReadTimeout (bodyDeadline bounds the body alone) and no
		// WriteTimeout: they would cut event streams; idle streams get
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
	s.stopRelease()
	<-s.releaseDone
	s.hub.stop()
	drainErr := bus.Drain(ctx, s.nc)
	return errors.Join(err, drainErr)
}

// notifications is the hub of the desktop notifications: subscribed to the
// runners' protocol.Notifications, its streams end with the gateway's.
func (s *Service) notifications() *notifyapi.Hub {
	var done <-chan struct{}
	if s.streams != nil {
		done = s.streams.Done()
	}
	h := notifyapi.New(s.log, done)
	if s.nc == nil {
		return h // a router built for a test, without a bus
	}
	if _, err := h.Subscribe(s.nc); err != nil {
		// The routes still answer (an empty history); the bus reconnects.
		s.log.Error("subscribe to notifications", "err", err)
	}
	return h
}

func (s *Service) routes() http.Handler {
	r := chi.NewRouter()
	deps := s.deps()
	// The body deadline starts with the request. The Host check comes
	// before the origin and media-type rules (trust.go), CORS, auth and
	// every route (/health too: it reports the token).
	r.Use(s.bodyDeadline, metrics, s.recoverer, securityHeaders, s.hostCheck, s.originCheck, s.jsonBody, s.cors)
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
		// The same resolution of the request's workspace as on a team
		// server, so handlers read it from one place in both modes.
		r.Use(teamauth.Resolve(deps))
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
		r.Get("/openapi.json", openapi.Handler)
		sessionsapi.Mount(r, deps)
		approvalapi.Mount(r, deps)
		commandapi.Mount(r, deps)
		agentapi.Mount(r, deps)
		teamsapi.Mount(r, deps)
		mcpapi.Mount(r, deps)
		memoryapi.Mount(r, deps)
		contextapi.Mount(r, deps)
		vaultapi.Mount(r, deps)
		filesapi.Mount(r, deps)
		jobsapi.Mount(r, deps)
		notifyapi.Mount(r, deps, s.notifications(), s.streamOrigin)
		settingsapi.Mount(r, deps, settingsapi.Config{Probe: s.probe, LLMURL: s.cfg.Probe.URL})
	})
	return r
}
