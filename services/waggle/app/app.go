// Package app assembles a waggle process: it turns a Config into lifecycle
// modules (the bus, then each service) and runs the targets asked for. It
// is the only place that wires services together; they talk over NATS.
package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/embednats"
	"github.com/waggle-os/core/libs/lifecycle"
	"github.com/waggle-os/core/libs/llmprobe"
	"github.com/waggle-os/core/libs/private"
	"github.com/waggle-os/core/libs/telemetry"
	"github.com/waggle-os/core/services/approval"
	"github.com/waggle-os/core/services/command"
	"github.com/waggle-os/core/services/gateway"
	"github.com/waggle-os/core/services/sessionstore"
	"github.com/waggle-os/core/services/turnrunner"
)

// Target names (DESIGN §7).
const (
	TargetGateway      = "gateway"
	TargetTurnRunner   = "turn-runner"
	TargetApproval     = "approval"
	TargetSessionStore = "session-store"
	TargetCommand      = "command"
	moduleBus          = "bus"
)

// App is one waggle process.
type App struct {
	cfg Config
	log *slog.Logger
	mgr *lifecycle.Manager

	dial    bus.Dialer
	embed   *embednats.Server
	gateway *gateway.Service
	ops     *http.Server
	opsAddr string

	stopTracing func(context.Context) error
}

// New returns an unstarted process for cfg.
func New(cfg Config, log *slog.Logger) *App {
	a := &App{cfg: cfg, log: log, mgr: lifecycle.New(log)}
	// dial is resolved at call time: services dial in Start, after the bus
	// module has started and chosen the connection kind.
	dial := bus.Dialer(func(name string) (*nats.Conn, error) { return a.dial(name) })
	a.mgr.Register(lifecycle.Module{Name: moduleBus, Init: func() (lifecycle.Service, error) { return &busModule{app: a}, nil }})
	a.mgr.Register(lifecycle.Module{Name: TargetSessionStore, Target: true, Deps: []string{moduleBus}, Init: func() (lifecycle.Service, error) {
		sc := cfg.SessionStore
		sc.DataDir, sc.Replicas = cfg.DataDir, cfg.NATSReplicas
		sc.LLMURL, sc.LLMAPIKey = cfg.TurnRunner.LLMURL, cfg.TurnRunner.LLMAPIKey
		return sessionstore.New(sc, dial, log), nil
	}})
	a.mgr.Register(lifecycle.Module{Name: TargetApproval, Target: true, Deps: []string{moduleBus}, Init: func() (lifecycle.Service, error) {
		ac := cfg.Approval
		ac.DataDir, ac.PostgresURL, ac.Bucket.Replicas = cfg.DataDir, cfg.SessionStore.PostgresURL, cfg.NATSReplicas
		return approval.New(ac, dial, log), nil
	}})
	a.mgr.Register(lifecycle.Module{Name: TargetCommand, Target: true, Deps: []string{moduleBus}, Init: func() (lifecycle.Service, error) {
		cc := cfg.Command
		cc.DataDir, cc.Replicas = cfg.DataDir, cfg.NATSReplicas
		return command.New(cc, dial, log), nil
	}})
	a.mgr.Register(lifecycle.Module{Name: TargetTurnRunner, Target: true, Deps: []string{moduleBus}, Init: func() (lifecycle.Service, error) {
		tc := cfg.TurnRunner
		tc.DataDir, tc.Stream = cfg.DataDir, streamConfig(cfg)
		// The one rule tying the runner to the gateway's mode: a process
		// whose gateway requires user tokens is a team server.
		tc.TeamServer = cfg.Gateway.Auth == gateway.AuthRequired
		// NATS in this process and nobody else's: its crash is the
		// runner's, and the runner's start recovers what it lost from the
		// session store, so the coordination state needs no fsync.
		tc.AsyncCoordination = cfg.NATSURL == "" && cfg.NATSListen == ""
		tc.Approval.Timeout = cfg.Approval.Timeout
		return turnrunner.New(tc, dial, log), nil
	}})
	a.mgr.Register(lifecycle.Module{Name: TargetGateway, Target: true, Deps: []string{moduleBus}, Init: func() (lifecycle.Service, error) {
		gc := cfg.Gateway
		gc.DataDir, gc.Replicas, gc.Stream = cfg.DataDir, cfg.NATSReplicas, streamConfig(cfg)
		gc.Probe = llmprobe.Config{URL: cfg.TurnRunner.LLMURL, APIKey: cfg.TurnRunner.LLMAPIKey}
		gc.DefaultModel = cfg.TurnRunner.Model
		gc.ShutdownGrace = cfg.ShutdownTimeout / 3
		a.gateway = gateway.New(gc, dial, a.mgr.Ready, log)
		return a.gateway, nil
	}})
	return a
}

// Start runs the configured targets; on failure everything started is
// stopped again.
func (a *App) Start(ctx context.Context) error {
	if err := checkDataDir(a.cfg.DataDir, a.log); err != nil {
		return err
	}
	targets := a.cfg.Targets
	if len(targets) == 0 {
		targets = []string{lifecycle.All}
	}
	if a.cfg.OTLPEndpoint != "" {
		stop, err := startTracing(ctx, a.cfg.OTLPEndpoint, targets)
		if err != nil {
			return err
		}
		a.stopTracing = stop
	}
	// The ops listener comes first: its port is held from the process's
	// start, and /health says "starting" (503) while the modules start —
	// which can take seconds (a single writer waits for its crashed
	// predecessor's lease to expire). Listening only afterwards left the
	// port unbound all that time, free for another process to take and
	// answer /health in its place.
	if a.cfg.MetricsAddr != "" {
		if err := a.startOps(); err != nil {
			return err
		}
	}
	if err := a.mgr.Start(ctx, targets); err != nil {
		if a.ops != nil {
			a.ops.Close()
			a.ops = nil
		}
		return portInUse(err, a.cfg.Gateway.Addr)
	}
	return nil
}

// PortInUseError is a gateway that could not bind its port because
// something else holds it. Its text is the original server's, which the
// Waggle desktop app shows its users.
type PortInUseError struct {
	Port string
	Err  error
}

func (e *PortInUseError) Error() string {
	return "Port " + e.Port + " is already in use. Another Waggle instance may be running.\n" +
		"To fix: close the other instance, or set WAGGLE_PORT=<port> to use a different port.\n" +
		"(--addr or WAGGLE_ADDR=host:port wins over WAGGLE_PORT when set: change that one instead.)\n(" + e.Err.Error() + ")"
}

func (e *PortInUseError) Unwrap() error { return e.Err }

// portInUse turns a failure to listen on the gateway's port into a
// PortInUseError; other errors (another listener's port included) pass.
func portInUse(err error, addr string) error {
	var op *net.OpError
	if !errors.Is(err, syscall.EADDRINUSE) || !errors.As(err, &op) || op.Op != "listen" || op.Addr == nil {
		return err
	}
	_, want, _ := net.SplitHostPort(addr)
	_, got, _ := net.SplitHostPort(op.Addr.String())
	if want == "" || want == "0" || want != got {
		return err
	}
	return &PortInUseError{Port: want, Err: err}
}

// Stop stops every running service in reverse start order (the bus last).
func (a *App) Stop(ctx context.Context) error {
	var opsErr, traceErr error
	if a.ops != nil {
		opsErr = a.ops.Shutdown(ctx)
	}
	err := a.mgr.Stop(ctx)
	if a.stopTracing != nil {
		traceErr = a.stopTracing(ctx) // flush the last spans
	}
	return errors.Join(err, opsErr, traceErr)
}

// startOps serves /metrics and /health on MetricsAddr: every process can
// be scraped and probed, with or without a gateway.
func (a *App) startOps() error {
	ln, err := net.Listen("tcp", a.cfg.MetricsAddr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s for metrics: %w", a.cfg.MetricsAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", telemetry.Handler())
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if !a.mgr.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			json.NewEncoder(w).Encode(map[string]any{"status": "starting"})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"status": "ok", "modules": a.mgr.Running()})
	})
	a.ops = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	a.opsAddr = ln.Addr().String()
	go a.ops.Serve(ln)
	return nil
}

// MetricsAddr is the address of the /metrics and /health listener, if any.
func (a *App) MetricsAddr() string { return a.opsAddr }

// Addr is the gateway's listen address, or "" when this process runs none.
func (a *App) Addr() string {
	if a.gateway == nil {
		return ""
	}
	return a.gateway.Addr()
}

// Token is the gateway's bearer token for non-loopback clients.
func (a *App) Token() string {
	if a.gateway == nil {
		return ""
	}
	return a.gateway.Token()
}

// NATSURL is the embedded server's client URL when it listens on TCP.
func (a *App) NATSURL() string {
	if a.embed == nil {
		return a.cfg.NATSURL
	}
	return a.embed.ClientURL()
}

// NATSCredentials is the credentials file of the embedded NATS server on
// dataDir: an nkey seed, 0600, made at its first start. TCP clients of
// --nats-listen authenticate with it (`nats --nkey`, --nats-nkey, and
// `waggle team` / `waggle token` with --data-dir).
func NATSCredentials(dataDir string) string {
	return filepath.Join(dataDir, embednats.CredentialsFileName)
}

// streamConfig is the turn stream's shape, which gateways and runners
// must agree on.
func streamConfig(c Config) bus.TurnStreamConfig {
	s := c.TurnStream
	s.Replicas = c.NATSReplicas
	return s
}

// Running lists the started modules.
func (a *App) Running() []string { return a.mgr.Running() }

// checkDataDir creates the data dir private (0700) and makes an existing
// one private: the dir itself, and every file and dir in it loses group
// and other access (an older version left 0755 and 0644; chats, memories
// and API keys are in there). A failure to tighten is logged, not fatal:
// the dir is still the operator's to fix. Then it checks the dir is
// writable.
func checkDataDir(dir string, log *slog.Logger) error {
	if err := private.MkdirAll(dir); err != nil {
		return fmt.Errorf("data directory %s cannot be created: %w", dir, err)
	}
	if n, err := private.Tighten(dir); err != nil {
		log.Warn("could not make every file in the data directory private to its owner", "dir", dir, "err", err)
	} else if n > 0 {
		log.Info("made the data directory private to its owner", "dir", dir, "changed", n)
	}
	f, err := os.CreateTemp(dir, ".waggle-write-check-*")
	if err != nil {
		return fmt.Errorf("data directory %s is not writable: %w", dir, errors.Unwrap(err))
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// natsConnectWait is how long a process keeps trying to reach an external
// NATS that refuses connections — the nodes of a cluster started at the
// same moment as this process are not listening yet — before it gives up.
const natsConnectWait = 30 * time.Second

// reachNATS connects once to url and lets go, trying again (with backoff,
// for natsConnectWait, saying so in the log) while no server listens. Any
// other failure (credentials, TLS) is reported at once.
func reachNATS(ctx context.Context, dial bus.Dialer, url string, log *slog.Logger) error {
	giveUp := time.Now().Add(natsConnectWait)
	wait := 100 * time.Millisecond
	for {
		nc, err := dial("waggle-probe")
		if err == nil {
			nc.Close()
			return nil
		}
		if !errors.Is(err, nats.ErrNoServers) || time.Now().Add(wait).After(giveUp) {
			return fmt.Errorf("cannot reach NATS at %s: %w", url, err)
		}
		log.Info("waiting for NATS to listen", "url", url, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("cannot reach NATS at %s: %w", url, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// busModule provides the NATS connection kind: an embedded server (with
// JetStream under <data-dir>/nats) or an external URL.
type busModule struct {
	app *App

	// storage reports the embedded JetStream store's space faults on the
	// bus (source "nats"), over its own connection.
	storage   atomic.Pointer[bus.StorageGuard]
	storageNC *nats.Conn
	// lock is held on the data dir while the embedded server runs.
	lock *dataDirLock
}

// onStorage is the embedded server's storage callback.
func (b *busModule) onStorage(full bool, reason string) {
	g := b.storage.Load()
	if full {
		g.SetFull(reason)
	} else {
		g.Clear()
	}
}

func (b *busModule) Start(ctx context.Context) error {
	a := b.app
	if a.cfg.NATSURL != "" {
		var opts []nats.Option
		if a.cfg.NATSNkey != "" {
			opt, err := embednats.ClientOption(a.cfg.NATSNkey)
			if err != nil {
				return fmt.Errorf("--nats-nkey: %w", err)
			}
			opts = append(opts, opt)
		}
		a.dial = bus.URLDialer(a.cfg.NATSURL, opts...)
		// A clear error instead of every service timing out.
		return reachNATS(ctx, a.dial, a.cfg.NATSURL, a.log)
	}
	lock, err := lockDataDir(a.cfg.DataDir)
	if err != nil {
		return err
	}
	b.lock = lock
	// Authentication is always on, listener or not: a listener added
	// later finds the credentials made, and in-process connections take
	// the same path as TCP ones.
	a.embed = embednats.New(embednats.Config{StoreDir: filepath.Join(a.cfg.DataDir, "nats"), Listen: a.cfg.NATSListen,
		CredentialsFile: NATSCredentials(a.cfg.DataDir), Logger: a.log.With("service", "nats"), OnStorage: b.onStorage})
	if err := a.embed.Start(ctx); err != nil {
		b.lock.release()
		return err
	}
	a.dial = bus.OptionDialer(a.embed.ConnectOption())
	nc, err := a.dial("waggle-nats-storage")
	if err != nil {
		a.embed.Stop(ctx)
		b.lock.release()
		return err
	}
	g := bus.NewStorageGuard(nc, bus.StorageGuardConfig{Source: "nats", Logger: a.log.With("service", "nats")})
	b.storageNC = nc
	b.storage.Store(g)
	g.Start()
	if full, reason := a.embed.StorageFull(); full {
		g.SetFull(reason)
	}
	if url := a.embed.ClientURL(); url != "" {
		a.log.Info("embedded NATS listening", "url", url, "credentials", NATSCredentials(a.cfg.DataDir))
	}
	return nil
}

func (b *busModule) Stop(ctx context.Context) error {
	b.storage.Load().Stop()
	if b.storageNC != nil {
		b.storageNC.Close()
	}
	if b.app.embed != nil {
		// The lock goes once the store is closed, not before.
		defer b.lock.release()
		return b.app.embed.Stop(ctx)
	}
	return nil
}
