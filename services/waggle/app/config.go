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
)

// Config is the whole configuration of a waggle process. Every field has a
// flag and an environment variable; flags win over the environment, the
// environment over the defaults.
type Config struct {
	Addr             string
	DataDir          string
	LLMURL           string
	LLMAPIKey        string
	NATSURL          string
	NATSListen       string
	Targets          []string
	PostgresURL      string
	MaxMessageLength int
	EchoDelay        time.Duration
	AllowedOrigins   []string
	AllowedHosts     []string
	ShutdownTimeout  time.Duration
	ApprovalTimeout  time.Duration
	LogLevel         slog.Level
	LogFormat        string
	Store            string
	MetricsAddr      string
	NATSReplicas     int
	TurnStorage      string
	MaxTurns         int
	TurnStreamBytes  int64
	DisconnectGrace  time.Duration
	Auth             string
	RateLimit        int
	RateLimitChat    int
	RateWindow       time.Duration
	EnableBash       string
	AgentMaxSteps    int
	OTLPEndpoint     string
	BashSandbox      string
	FrontendDir      string
	MCPStdio         string
	MCPCallTimeout   time.Duration
}

// setting is one flag and its environment variable.
type setting struct {
	flag, env, def, usage string
	set                   func(string) error
}

func settings(c *Config) []setting {
	home, _ := os.UserHomeDir()
	return []setting{
		{"addr", "WAGGLE_ADDR", "127.0.0.1:3333", "HTTP listen address", func(v string) error { c.Addr = v; return nil }},
		{"data-dir", "WAGGLE_DATA_DIR", filepath.Join(home, ".waggle"), "data directory (sessions, grants, config.json, embedded NATS store)",
			func(v string) error { c.DataDir = expandHome(v, home); return nil }},
		{"llm-url", "WAGGLE_LLM_URL", "http://localhost:4000/v1", "OpenAI-compatible base URL including /v1 (LiteLLM, vLLM, Ollama, OpenAI)",
			func(v string) error { c.LLMURL = v; return nil }},
		{"llm-api-key", "WAGGLE_LLM_API_KEY", "", "bearer key for the model server (prefer the env var: flags show in ps)",
			func(v string) error { c.LLMAPIKey = v; return nil }},
		{"nats-url", "WAGGLE_NATS_URL", "", "external NATS URL(s), comma-separated; empty runs an embedded NATS server",
			func(v string) error { c.NATSURL = v; return nil }},
		{"nats-listen", "WAGGLE_NATS_LISTEN", "", "host:port for the embedded NATS server to accept TCP clients on; empty = in-process only",
			func(v string) error { c.NATSListen = v; return nil }},
		{"targets", "WAGGLE_TARGETS", "all", "comma list of services to run: all, gateway, turn-runner, approval, session-store, command",
			func(v string) error { c.Targets = splitList(v); return nil }},
		{"postgres-url", "WAGGLE_POSTGRES_URL", "", "PostgreSQL URL for team workspaces", func(v string) error { c.PostgresURL = v; return nil }},
		{"max-message-length", "WAGGLE_MAX_MESSAGE_LENGTH", "50000", "longest chat message in UTF-16 code units (0 = no limit)",
			func(v string) error { return parseInt(v, &c.MaxMessageLength) }},
		{"echo-delay", "WAGGLE_ECHO_DELAY", "15ms", "pause between echo-mode and command tokens", func(v string) error { return parseDuration(v, &c.EchoDelay) }},
		{"allowed-origins", "WAGGLE_ALLOWED_ORIGINS", "", "comma list of CORS origins (exact match); empty = the desktop/web client origins",
			func(v string) error { c.AllowedOrigins = splitList(v); return nil }},
		{"allowed-hosts", "WAGGLE_ALLOWED_HOSTS", "", "comma list of host names the server answers to besides localhost, its listen address and IP addresses (DNS rebinding protection; .example.com = domain and subdomains, * = off)",
			func(v string) error { c.AllowedHosts = splitList(v); return nil }},
		{"shutdown-timeout", "WAGGLE_SHUTDOWN_TIMEOUT", "15s", "how long a graceful shutdown may take before streams and turns are cut",
			func(v string) error { return parseDuration(v, &c.ShutdownTimeout) }},
		{"approval-timeout", "WAGGLE_APPROVAL_TIMEOUT", "5m", "how long a tool approval waits for a human before it is denied as timed out",
			func(v string) error { return parseDuration(v, &c.ApprovalTimeout) }},
		{"store", "WAGGLE_STORE", "jsonl", "jsonl (personal workspaces in JSONL files, team workspaces in PostgreSQL when --postgres-url is set) or postgres (everything in PostgreSQL)",
			func(v string) error { c.Store = v; return nil }},
		{"auth", "WAGGLE_AUTH", "local", "local (desktop trust: loopback passes, others need the /health token) or required (team server: every request needs a user token)",
			func(v string) error {
				if v != "local" && v != "required" {
					return errors.New("want local or required")
				}
				c.Auth = v
				return nil
			}},
		{"rate-limit", "WAGGLE_RATE_LIMIT", "0", "requests per route per client per window (0 = off locally, 100 with --auth=required; negative = off)",
			func(v string) error { return parseInt(v, &c.RateLimit) }},
		{"rate-limit-chat", "WAGGLE_RATE_LIMIT_CHAT", "120", "rate limit of POST /api/chat when rate limiting is on", func(v string) error { return parseInt(v, &c.RateLimitChat) }},
		{"rate-limit-window", "WAGGLE_RATE_LIMIT_WINDOW", "60s", "sliding window of the rate limit", func(v string) error { return parseDuration(v, &c.RateWindow) }},
		{"metrics-addr", "WAGGLE_METRICS_ADDR", "", "extra listener for /metrics and /health (processes without a gateway); empty = only the gateway serves them",
			func(v string) error { c.MetricsAddr = v; return nil }},
		{"nats-replicas", "WAGGLE_NATS_REPLICAS", "1", "replicas of Waggle's JetStream streams and buckets (3 on a 3-node cluster)",
			func(v string) error { return parseInt(v, &c.NATSReplicas) }},
		{"turn-stream-storage", "WAGGLE_TURN_STREAM_STORAGE", "memory", "memory or file: where turn events are kept for relay and resume (the session store is the record either way)",
			func(v string) error { c.TurnStorage = v; return nil }},
		{"max-turns", "WAGGLE_MAX_TURNS", "auto", "turns one runner runs at once (more get 503 RUNNER_BUSY); auto = sized from the machine's memory",
			func(v string) error {
				if v == "auto" {
					c.MaxTurns = 0
					return nil
				}
				return parseInt(v, &c.MaxTurns)
			}},
		{"turn-stream-max-bytes", "WAGGLE_TURN_STREAM_MAX_BYTES", "64MiB", "what the turn stream keeps for live relay and resume, in bytes (oldest events go first; suffixes KiB, MiB, GiB)",
			func(v string) error { return parseBytes(v, &c.TurnStreamBytes) }},
		{"disconnect-grace", "WAGGLE_DISCONNECT_GRACE", "30s", "how long a turn keeps running with no client attached (0 = cancel at once)",
			func(v string) error { return parseDuration(v, &c.DisconnectGrace) }},
		{"enable-bash", "WAGGLE_ENABLE_BASH", "auto", "offer the bash tool: true, false, or auto (on locally, off with --auth=required)",
			func(v string) error {
				if v != "auto" && v != "true" && v != "false" {
					return errors.New("want true, false or auto")
				}
				c.EnableBash = v
				return nil
			}},
		{"bash-sandbox", "WAGGLE_BASH_SANDBOX", "auto", "run bash under bubblewrap (bwrap): on, off, or auto (on with --auth=required)",
			func(v string) error {
				if v != "auto" && v != "on" && v != "off" {
					return errors.New("want on, off or auto")
				}
				c.BashSandbox = v
				return nil
			}},
		{"mcp-stdio", "WAGGLE_MCP_STDIO", "auto", "stdio MCP servers: direct, sandbox (bubblewrap), off, or auto (direct locally, sandbox with --auth=required)",
			func(v string) error {
				if v != "auto" && v != "direct" && v != "sandbox" && v != "off" {
					return errors.New("want auto, direct, sandbox or off")
				}
				c.MCPStdio = v
				return nil
			}},
		{"mcp-call-timeout", "WAGGLE_MCP_CALL_TIMEOUT", "60s", "time limit of one MCP tool call (a server's \"timeout\" overrides it)",
			func(v string) error { return parseDuration(v, &c.MCPCallTimeout) }},
		{"agent-max-steps", "WAGGLE_AGENT_MAX_STEPS", "25", "model calls one agent turn may make", func(v string) error { return parseInt(v, &c.AgentMaxSteps) }},
		{"otlp-endpoint", "WAGGLE_OTLP_ENDPOINT", "", "OTLP/HTTP endpoint for traces (e.g. http://collector:4318); empty = no export",
			func(v string) error { c.OTLPEndpoint = v; return nil }},
		{"frontend-dir", "WAGGLE_FRONTEND_DIR", "", "built single-page app (the Waggle desktop app's dist) to serve at / with an index.html fallback; the web chat moves to /chat/",
			func(v string) error { c.FrontendDir = expandHome(v, home); return nil }},
		{"log-level", "WAGGLE_LOG_LEVEL", "info", "debug, info, warn or error", func(v string) error { return c.LogLevel.UnmarshalText([]byte(v)) }},
		{"log-format", "WAGGLE_LOG_FORMAT", "auto", "json, text, or auto (text on a terminal, JSON otherwise)", func(v string) error {
			switch v {
			case "json", "text", "auto":
				c.LogFormat = v
				return nil
			}
			return errors.New("want json, text or auto")
		}},
	}
}

// ParseServe reads the configuration of `waggle serve` from args and the
// environment. It returns flag.ErrHelp after printing help for -h.
func ParseServe(args []string, lookupEnv func(string) (string, bool), out io.Writer) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("waggle serve", flag.ContinueOnError)
	fs.SetOutput(out)
	ss := settings(&c)
	values := make(map[string]*string, len(ss))
	for _, s := range ss {
		def := s.def
		values[s.flag] = fs.String(s.flag, def, fmt.Sprintf("%s (env %s)", s.usage, s.env))
	}
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
	for _, s := range ss {
		v, source := *values[s.flag], "--"+s.flag
		if !explicit[s.flag] {
			if ev, ok := lookupEnv(s.env); ok {
				v, source = ev, s.env
			} else {
				source = "default of --" + s.flag
			}
		}
		if err := s.set(strings.TrimSpace(v)); err != nil {
			return c, fmt.Errorf("invalid %s %q: %w", source, v, err)
		}
	}
	if _, ok := lookupEnv("WAGGLE_ADDR"); !explicit["addr"] && !ok {
		addr, err := hostPortAddr(lookupEnv)
		if err != nil {
			return c, err
		}
		if addr != "" {
			c.Addr = addr
		}
	}
	return c, c.Validate()
}

// Validate checks the values that no single service owns.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("the data directory is empty (set --data-dir or WAGGLE_DATA_DIR)")
	}
	if c.MaxMessageLength < 0 {
		return errors.New("--max-message-length must not be negative")
	}
	if c.EchoDelay < 0 {
		return errors.New("--echo-delay must not be negative")
	}
	if c.ApprovalTimeout < 0 {
		return errors.New("--approval-timeout must not be negative")
	}
	if c.Store != "" && c.Store != "jsonl" && c.Store != "postgres" {
		return errors.New("--store must be jsonl or postgres")
	}
	if c.Store == "postgres" && c.PostgresURL == "" {
		return errors.New("--store=postgres needs --postgres-url (WAGGLE_POSTGRES_URL)")
	}
	if c.NATSReplicas < 0 || c.MaxTurns < 0 || c.AgentMaxSteps < 0 || c.DisconnectGrace < 0 {
		return errors.New("--nats-replicas, --max-turns, --agent-max-steps and --disconnect-grace must not be negative")
	}
	if c.TurnStorage != "" && c.TurnStorage != "memory" && c.TurnStorage != "file" {
		return errors.New("--turn-stream-storage must be memory or file")
	}
	if c.NATSURL != "" && c.NATSListen != "" {
		return errors.New("--nats-listen only applies to the embedded NATS server; drop it or --nats-url")
	}
	return nil
}

// hostPortAddr is the listen address from the original server's
// WAGGLE_HOST and WAGGLE_PORT (what the Waggle desktop app sets for its
// sidecar), or "" when neither is set. The host defaults to loopback, not
// the original's 0.0.0.0: a desktop server must not be reachable from the
// network unless asked.
func hostPortAddr(lookupEnv func(string) (string, bool)) (string, error) {
	host, hostSet := lookupEnv("WAGGLE_HOST")
	port, portSet := lookupEnv("WAGGLE_PORT")
	if !hostSet && !portSet {
		return "", nil
	}
	host, port = strings.TrimSpace(host), strings.TrimSpace(port)
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "3333"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("invalid WAGGLE_PORT %q: want a port number 0-65535", port)
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), port), nil
}

func expandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return filepath.Join(home, rest)
	}
	return p
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func parseInt(v string, dst *int) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return errors.New("want a whole number")
	}
	*dst = n
	return nil
}

// parseBytes reads a size: a whole number of bytes with an optional
// binary suffix (KiB, MiB, GiB; K, M, G mean the same).
func parseBytes(v string, dst *int64) error {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return errors.New("want a positive size such as 64MiB")
	}
	*dst = n * mult
	return nil
}

func parseDuration(v string, dst *time.Duration) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return errors.New("want a duration such as 15ms, 5s or 2m")
	}
	*dst = d
	return nil
}
