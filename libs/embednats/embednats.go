// Package embednats runs a nats-server with JetStream inside the waggle
// process, so the desktop build is one process with nothing else to
// install. It is the only package that imports nats-server.
package embednats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/private"
)

// Config configures the embedded server.
type Config struct {
	// StoreDir is JetStream's storage directory, usually <data-dir>/nats.
	// Required.
	StoreDir string
	// Listen is an optional host:port for a TCP client listener (handy for
	// the nats CLI, or for other waggle processes). Empty means no TCP
	// listener at all: only in-process connections.
	Listen string
	// ServerName names the server in logs and JetStream metadata.
	// Default "waggle".
	ServerName string
	// ReadyTimeout bounds how long Start waits for the server. Default 10s.
	ReadyTimeout time.Duration
	// Logger receives the server's notices and errors. Nil means silent.
	Logger *slog.Logger
	// ConfigFile is a nats-server configuration file (cluster routes,
	// accounts, users). When set, it supplies every option; StoreDir and
	// Listen still override the file's store_dir and listen when given.
	ConfigFile string
	// OnStorage, when set, is told each time the JetStream store fills up
	// (full, with the reason) and each time it is writable again. It runs
	// on the server's storage monitor goroutine.
	OnStorage func(full bool, reason string)
	// MinFree is the free space the store needs before a JetStream that
	// failed for lack of space is restarted. Default 1 MiB.
	MinFree int64
	// CredentialsFile, when set, turns authentication on: TCP clients must
	// prove the nkey whose seed this file holds (Start creates it, mode
	// 0600, with a random key when it does not exist, and reuses it
	// otherwise), and in-process connections (ConnectOption) use a key
	// made for this start that exists only in memory. Empty: clients are
	// not authenticated, which only tests and a server without a
	// listener should use. Not with ConfigFile, whose accounts and users
	// apply.
	CredentialsFile string
}

// Validate checks c and fills defaults.
func (c *Config) Validate() error {
	if c.StoreDir == "" && c.ConfigFile == "" {
		return errors.New("embednats: StoreDir is required")
	}
	if c.ServerName == "" {
		c.ServerName = "waggle"
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = 10 * time.Second
	}
	if c.MinFree <= 0 {
		c.MinFree = 1 << 20
	}
	if c.CredentialsFile != "" && c.ConfigFile != "" {
		return errors.New("embednats: CredentialsFile does not apply with ConfigFile (its users apply)")
	}
	if c.Listen != "" {
		if _, _, err := splitHostPort(c.Listen); err != nil {
			return fmt.Errorf("embednats: listen address %q: %w", c.Listen, err)
		}
	}
	return nil
}

// Server is an embedded nats-server. The zero value is not usable; call New.
type Server struct {
	cfg  Config
	ns   *server.Server
	opts *server.Options
	// inProcess dials ns in process, authenticated when the server
	// requires it.
	inProcess nats.Option

	storage storageMonitor
}

// New returns an unstarted server.
func New(cfg Config) *Server {
	return &Server{cfg: cfg, storage: storageMonitor{wake: make(chan struct{}, 1)}}
}

// Start starts the server and waits until it accepts connections.
func (s *Server) Start(ctx context.Context) error {
	if err := s.cfg.Validate(); err != nil {
		return err
	}
	opts, err := s.options()
	if err != nil {
		return err
	}
	// The store holds every stream and KV bucket (pending approvals,
	// turn events): private to the owner, also when an older version
	// left it open (nats-server itself creates 0750/0640).
	if err := private.MkdirAll(opts.StoreDir); err != nil {
		return fmt.Errorf("embednats: create store dir: %w", err)
	}
	if _, err := private.Tighten(opts.StoreDir); err != nil && s.cfg.Logger != nil {
		s.cfg.Logger.Warn("embednats: could not make the store dir private to its owner", "err", err)
	}
	var auth nats.Option
	if s.cfg.CredentialsFile != "" {
		if auth, err = s.authOptions(opts); err != nil {
			return err
		}
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("embednats: new server: %w", err)
	}
	// The logger is always set: the server says "no space left on device"
	// only in its log (a store that fails a write drops the publish
	// without a reply), so the storage monitor listens there.
	ns.SetLoggerV2(slogAdapter{l: s.cfg.Logger, storage: &s.storage}, false, false, false)
	ns.Start()
	if !ns.ReadyForConnections(s.cfg.ReadyTimeout) {
		ns.Shutdown()
		if s.cfg.Listen != "" {
			return fmt.Errorf("embednats: server not ready within %s (is %s already in use?)", s.cfg.ReadyTimeout, s.cfg.Listen)
		}
		return fmt.Errorf("embednats: server not ready within %s", s.cfg.ReadyTimeout)
	}
	s.ns, s.opts = ns, opts
	s.inProcess = nats.InProcessServer(ns)
	if auth != nil {
		inProcess := s.inProcess
		s.inProcess = func(o *nats.Options) error {
			if err := inProcess(o); err != nil {
				return err
			}
			return auth(o)
		}
	}
	s.storage.start(s)
	return nil
}

func (s *Server) options() (*server.Options, error) {
	if s.cfg.ConfigFile != "" {
		opts, err := server.ProcessConfigFile(s.cfg.ConfigFile)
		if err != nil {
			return nil, fmt.Errorf("embednats: config %s: %w", s.cfg.ConfigFile, err)
		}
		opts.NoSigs = true
		opts.NoLog = s.cfg.Logger == nil
		opts.JetStream = true
		if s.cfg.StoreDir != "" {
			opts.StoreDir = filepath.Clean(s.cfg.StoreDir)
		}
		if opts.StoreDir == "" {
			return nil, fmt.Errorf("embednats: config %s sets no store_dir", s.cfg.ConfigFile)
		}
		if s.cfg.Listen != "" {
			host, port, _ := splitHostPort(s.cfg.Listen)
			opts.Host, opts.Port = host, port
		}
		if opts.JetStreamLimits.DefaultMaxConsumers == 0 {
			opts.JetStreamLimits.DefaultMaxConsumers = -1
		}
		if !opts.SyncAlways && s.cfg.Logger != nil {
			s.cfg.Logger.Warn("JetStream is not set to fsync every write (sync_interval: always): acknowledged state may be lost in a crash",
				"config", s.cfg.ConfigFile)
		}
		return opts, nil
	}
	opts := &server.Options{
		ServerName: s.cfg.ServerName,
		JetStream:  true,
		StoreDir:   filepath.Clean(s.cfg.StoreDir),
		// The binary owns signals; a server that installed its own handlers
		// would race our graceful shutdown.
		NoSigs: true,
		NoLog:  s.cfg.Logger == nil,
		// Pending approvals, leases, locks, group-run jobs and singleton
		// leases live only here: fsync every write before it is
		// acknowledged. The default (every 2 minutes) loses acknowledged
		// writes on a power cut (Jepsen, NATS 2.12.1, Dec 2025).
		SyncAlways: true,
		DontListen: s.cfg.Listen == "",
		// Turn events can be large (a whole tool result); the default 1 MiB
		// is the same as our HTTP body limit, so keep headroom.
		MaxPayload: 8 << 20,
	}
	// Every open event stream is one ephemeral consumer; the server's
	// default cap of 1,000 consumers per stream would turn the 1,001st
	// concurrent chat into an error.
	opts.JetStreamLimits.DefaultMaxConsumers = -1
	if s.cfg.Listen != "" {
		host, port, _ := splitHostPort(s.cfg.Listen)
		opts.Host, opts.Port = host, port
	}
	return opts, nil
}

// ConnectOption returns the nats.Option that dials this server in process
// (with the in-process key when Config.CredentialsFile is set).
func (s *Server) ConnectOption() nats.Option { return s.inProcess }

// ClientURL is the TCP URL clients can use, or "" without a listener.
func (s *Server) ClientURL() string {
	if s.ns == nil || (s.cfg.Listen == "" && s.cfg.ConfigFile == "") {
		return ""
	}
	return s.ns.ClientURL()
}

// Stop shuts the server down and waits for it, bounded by ctx.
func (s *Server) Stop(ctx context.Context) error {
	if s.ns == nil {
		return nil
	}
	s.storage.stop()
	done := make(chan struct{})
	go func() {
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("embednats: shutdown: %w", ctx.Err())
	}
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	if port == 0 {
		// nats-server reads 0 as "the default port 4222"; ":0" means any
		// free port everywhere else.
		port = server.RANDOM_PORT
	}
	return host, port, nil
}

// slogAdapter passes the server's log to slog (nil: dropped) and shows
// the storage monitor every warning and error.
type slogAdapter struct {
	l       *slog.Logger
	storage *storageMonitor
}

func (a slogAdapter) log(level slog.Level, format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	if level >= slog.LevelWarn {
		a.storage.noteLog(msg)
	}
	if a.l != nil {
		a.l.Log(context.Background(), level, msg)
	}
}

// Noticef logs the server's notices at debug level, except that it closed
// (or nearly closed) a client too slow to read what it was sent: that
// client — a service of this process, or a runner or store of a cluster —
// loses its connection and the requests in flight on it, which an
// operator must be able to see.
func (a slogAdapter) Noticef(format string, v ...any) {
	level := slog.LevelDebug
	if strings.Contains(format, "Slow Consumer") { // after the client's name
		level = slog.LevelWarn
	}
	a.log(level, format, v...)
}
func (a slogAdapter) Warnf(format string, v ...any)  { a.log(slog.LevelWarn, format, v...) }
func (a slogAdapter) Fatalf(format string, v ...any) { a.log(slog.LevelError, format, v...) }
func (a slogAdapter) Errorf(format string, v ...any) { a.log(slog.LevelError, format, v...) }
func (a slogAdapter) Debugf(format string, v ...any) { a.log(slog.LevelDebug, format, v...) }
func (a slogAdapter) Tracef(format string, v ...any) {}
