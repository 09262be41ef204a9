package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/flagext"
	"github.com/waggle-os/core/libs/lifecycle"
	"github.com/waggle-os/core/services/approval"
	"github.com/waggle-os/core/services/command"
	"github.com/waggle-os/core/services/gateway"
	"github.com/waggle-os/core/services/sessionstore"
	"github.com/waggle-os/core/services/turnrunner/runnerconfig"
)

// Config is the whole configuration of a waggle process: the process's
// own settings and each service's Config, whose flags the service
// registers itself. Every flag has an environment variable (EnvName);
// flags win over the environment, the environment over the defaults.
//
// A setting several services need is registered by one of them and
// handed to the others by New: the runner's LLM URL and key go to the
// session store (embeddings) and the gateway's probe, the session store's
// PostgreSQL URL to the approval service, the approval timeout to the
// runner's gate; DataDir, NATSReplicas and TurnStream go to every service
// that keeps data or uses the turn stream. TurnRunner.TeamServer is not a
// setting of its own: New sets it when Gateway.Auth is "required", which
// is what the runner's auto settings (bash, its sandbox, stdio MCP
// servers) follow.
type Config struct {
	// DataDir (--data-dir) holds sessions, grants, config.json and the
	// embedded NATS store. Default ~/.waggle.
	DataDir string
	// NATSURL (--nats-url) are external NATS URLs, comma-separated; empty
	// (default) runs an embedded NATS server.
	NATSURL string
	// NATSListen (--nats-listen) is where the embedded NATS server accepts
	// TCP clients; empty (default): in-process only. Clients authenticate
	// with the nkey in <data-dir>/nats.nk (NATSCredentials).
	NATSListen string
	// NATSNkey (--nats-nkey) is an nkey seed file this process presents to
	// NATSURL, such as another process's <data-dir>/nats.nk when
	// NATSURL is that process's --nats-listen. Empty (default): the URL's
	// own credentials, if any.
	NATSNkey string
	// Targets (--targets) are the services to run. Default (also nil):
	// all.
	Targets []string
	// MetricsAddr (--metrics-addr) is an extra listener for /metrics and
	// /health; empty (default): only the gateway serves them.
	MetricsAddr string
	// OTLPEndpoint (--otlp-endpoint) receives traces over OTLP/HTTP; empty
	// (default): no export.
	OTLPEndpoint string
	// ShutdownTimeout (--shutdown-timeout) is how long a graceful shutdown
	// may take; the gateway lets streams finish for a third of it.
	// Default DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// LogLevel (--log-level) is the lowest level logged. Default info.
	LogLevel slog.Level
	// LogFormat (--log-format) is json, text or auto (default: text on a
	// terminal, JSON otherwise).
	LogFormat string
	// NATSReplicas (--nats-replicas) is the replica count of Waggle's
	// JetStream streams and buckets. Default 1.
	NATSReplicas int
	// TurnStream (--turn-stream-storage, --turn-stream-max-bytes) shapes
	// the turn-event stream that gateways and runners share (its Replicas
	// come from NATSReplicas). Defaults: bus.TurnStreamConfig's.
	TurnStream bus.TurnStreamConfig

	Gateway      gateway.Config
	TurnRunner   runnerconfig.Config
	SessionStore sessionstore.Config
	Approval     approval.Config
	Command      command.Config
}

// DefaultShutdownTimeout is the default of Config.ShutdownTimeout.
const DefaultShutdownTimeout = 15 * time.Second

// Log formats.
const (
	LogJSON = "json"
	LogText = "text"
	LogAuto = "auto"
)

// RegisterFlags registers every flag of `waggle serve` on fs, with its
// default: the process's own, then each service's.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	home, _ := os.UserHomeDir()
	flagext.PathVar(fs, &c.DataDir, "data-dir", filepath.Join(home, ".waggle"), "data directory (sessions, grants, config.json, embedded NATS store)")
	fs.StringVar(&c.NATSURL, "nats-url", "", "external NATS URL(s), comma-separated; empty runs an embedded NATS server")
	fs.StringVar(&c.NATSListen, "nats-listen", "", "host:port for the embedded NATS server to accept TCP clients on (they authenticate with <data-dir>/nats.nk); empty = in-process only")
	flagext.PathVar(fs, &c.NATSNkey, "nats-nkey", "", "nkey seed file to authenticate to --nats-url with (e.g. the <data-dir>/nats.nk of the process whose --nats-listen it is)")
	flagext.ListVar(fs, &c.Targets, "targets", []string{"all"}, "comma list of services to run: all, gateway, turn-runner, approval, session-store, command")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", "", "extra listener for /metrics and /health (processes without a gateway); empty = only the gateway serves them")
	fs.StringVar(&c.OTLPEndpoint, "otlp-endpoint", "", "OTLP/HTTP endpoint for traces (e.g. http://collector:4318); empty = no export")
	flagext.DurationVar(fs, &c.ShutdownTimeout, "shutdown-timeout", DefaultShutdownTimeout, "how long a graceful shutdown may take before streams and turns are cut")
	c.LogLevel = slog.LevelInfo
	fs.Var((*levelValue)(&c.LogLevel), "log-level", "debug, info, warn or error")
	flagext.EnumVar(fs, &c.LogFormat, "log-format", LogAuto, "json, text, or auto (text on a terminal, JSON otherwise)", LogJSON, LogText, LogAuto)
	flagext.IntVar(fs, &c.NATSReplicas, "nats-replicas", 1, "replicas of Waggle's JetStream streams and buckets (3 on a 3-node cluster)")
	// bus.TurnStreamConfig's flags live here, not in libs/bus: the stream is
	// the bus's, but only this process chooses its shape.
	fs.StringVar(&c.TurnStream.Storage, "turn-stream-storage", "memory", "memory or file: where turn events are kept for relay and resume (the session store is the record either way)")
	flagext.BytesVar(fs, &c.TurnStream.MaxBytes, "turn-stream-max-bytes", bus.DefaultTurnStreamBytes, "what the turn stream keeps for live relay and resume, in bytes (oldest events go first; suffixes KiB, MiB, GiB)")

	c.Gateway.RegisterFlags(fs)
	c.TurnRunner.RegisterFlags(fs)
	c.SessionStore.RegisterFlags(fs)
	c.Approval.RegisterFlags(fs)
}

// levelValue is --log-level: debug, info, warn or error (slog's names).
type levelValue slog.Level

func (v *levelValue) String() string { return strings.ToLower(slog.Level(*v).String()) }

func (v *levelValue) Set(s string) error { return (*slog.Level)(v).UnmarshalText([]byte(s)) }

// EnvName is the environment variable of a flag: WAGGLE_ and the flag's
// name in upper case with - as _ (--max-turns: WAGGLE_MAX_TURNS).
func EnvName(flagName string) string {
	return "WAGGLE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// textBool is a boolean flag's text on the command line: "true" when the
// flag is given alone, else its value, parsed by the typed flag later.
type textBool struct{ s *string }

func (v textBool) String() string {
	if v.s == nil {
		return ""
	}
	return *v.s
}

func (v textBool) Set(s string) error { *v.s = s; return nil }

func (v textBool) IsBoolFlag() bool { return true }

// ParseServe reads the configuration of `waggle serve` from args and the
// environment. It returns flag.ErrHelp after printing help for -h.
func ParseServe(args []string, lookupEnv func(string) (string, bool), out io.Writer) (Config, error) {
	var c Config
	typed := flag.NewFlagSet("waggle serve", flag.ContinueOnError)
	c.RegisterFlags(typed)
	// The command line takes every value as text and sets it after the
	// environment is read, so that a value that does not parse names where
	// it came from (--flag or WAGGLE_FLAG) and help shows each as a string.
	fs := flag.NewFlagSet("waggle serve", flag.ContinueOnError)
	fs.SetOutput(out)
	text := map[string]*string{}
	typed.VisitAll(func(f *flag.Flag) {
		usage := fmt.Sprintf("%s (env %s)", f.Usage, EnvName(f.Name))
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			// A switch (--allow-dev-origins) takes no value on the
			// command line.
			v := f.DefValue
			text[f.Name] = &v
			fs.Var(textBool{&v}, f.Name, usage)
			return
		}
		text[f.Name] = fs.String(f.Name, f.DefValue, usage)
	})
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: waggle serve [flags]\n\nRuns Waggle core. Every flag can also be set with its environment variable; flags win.\n"+
			"Without --addr and WAGGLE_ADDR, WAGGLE_HOST (default 127.0.0.1) and WAGGLE_PORT (default 3333) give the address,\n"+
			"as the Waggle desktop app sets them for its sidecar.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q (see waggle serve --help)", fs.Arg(0))
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	var err error
	typed.VisitAll(func(f *flag.Flag) {
		if err != nil {
			return
		}
		v, source := *text[f.Name], "--"+f.Name
		if !explicit[f.Name] {
			ev, ok := lookupEnv(EnvName(f.Name))
			if !ok {
				return // the default, already in c
			}
			v, source = ev, EnvName(f.Name)
		}
		if serr := f.Value.Set(strings.TrimSpace(v)); serr != nil {
			err = fmt.Errorf("invalid %s %q: %w", source, v, serr)
		}
	})
	if err != nil {
		return c, err
	}
	if _, ok := lookupEnv("WAGGLE_ADDR"); !explicit["addr"] && !ok {
		addr, err := hostPortAddr(lookupEnv)
		if err != nil {
			return c, err
		}
		if addr != "" {
			c.Gateway.Addr = addr
		}
	}
	return c, c.Validate()
}

// Validate checks the process's own settings, then each service's.
func (c Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("the data directory is empty (set --data-dir or WAGGLE_DATA_DIR)")
	}
	if c.NATSReplicas < 0 {
		return errors.New("--nats-replicas must not be negative")
	}
	if s := c.TurnStream.Storage; s != "" && s != "memory" && s != "file" {
		return errors.New("--turn-stream-storage must be memory or file")
	}
	if c.NATSURL != "" && c.NATSListen != "" {
		return errors.New("--nats-listen only applies to the embedded NATS server; drop it or --nats-url")
	}
	if c.Gateway.Auth == gateway.AuthRequired && c.SessionStore.PostgresURL == "" && c.runs(TargetSessionStore) {
		// Users, teams and tokens live only in PostgreSQL: without it every
		// authenticated request would answer 503 behind a healthy /health.
		return errors.New("--auth=required needs --postgres-url (users, teams and tokens are kept in PostgreSQL)")
	}
	if c.NATSNkey != "" && c.NATSURL == "" {
		return errors.New("--nats-nkey only applies with --nats-url (the embedded server keeps its credentials in <data-dir>/nats.nk)")
	}
	for _, v := range []interface{ Validate() error }{c.Gateway, c.TurnRunner, c.SessionStore, c.Approval} {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// hostPortAddr is the listen address from the original server's
// WAGGLE_HOST and WAGGLE_PORT (what the Waggle desktop app sets for its
// sidecar), or "" when neither is set. Each defaults to its part of
// gateway.DefaultAddr: the host is loopback, not the original's 0.0.0.0,
// since a desktop server must not be reachable from the network unless
// asked.
func hostPortAddr(lookupEnv func(string) (string, bool)) (string, error) {
	host, hostSet := lookupEnv("WAGGLE_HOST")
	port, portSet := lookupEnv("WAGGLE_PORT")
	if !hostSet && !portSet {
		return "", nil
	}
	defHost, defPort, _ := net.SplitHostPort(gateway.DefaultAddr)
	host, port = strings.TrimSpace(host), strings.TrimSpace(port)
	if host == "" {
		host = defHost
	}
	if port == "" {
		port = defPort
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("invalid WAGGLE_PORT %q: want a port number 0-65535", port)
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), port), nil
}

// runs reports whether this process runs target (directly or through
// "all"); no targets means all.
func (c Config) runs(target string) bool {
	if len(c.Targets) == 0 {
		return true
	}
	for _, t := range c.Targets {
		if t == target || t == lifecycle.All {
			return true
		}
	}
	return false
}
