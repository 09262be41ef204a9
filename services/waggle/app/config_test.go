package app

import (
	"errors"
	"flag"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestListenAddressPrecedence: flags > WAGGLE_ADDR > WAGGLE_HOST/WAGGLE_PORT
// (what the Waggle desktop app sets for its sidecar) > 127.0.0.1:3333. The
// host stays loopback unless asked, unlike the original's 0.0.0.0.
func TestListenAddressPrecedence(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
		err  string
	}{
		{name: "default", want: "127.0.0.1:3333"},
		{name: "port only", env: map[string]string{"WAGGLE_PORT": "4123"}, want: "127.0.0.1:4123"},
		{name: "host only", env: map[string]string{"WAGGLE_HOST": "0.0.0.0"}, want: "0.0.0.0:3333"},
		{name: "host and port", env: map[string]string{"WAGGLE_HOST": "192.168.1.5", "WAGGLE_PORT": "4123"}, want: "192.168.1.5:4123"},
		{name: "ipv6 host", env: map[string]string{"WAGGLE_HOST": "::1", "WAGGLE_PORT": "4123"}, want: "[::1]:4123"},
		{name: "bracketed ipv6 host", env: map[string]string{"WAGGLE_HOST": "[::1]"}, want: "[::1]:3333"},
		{name: "empty host is loopback", env: map[string]string{"WAGGLE_HOST": "", "WAGGLE_PORT": "4123"}, want: "127.0.0.1:4123"},
		{name: "WAGGLE_ADDR wins", env: map[string]string{"WAGGLE_ADDR": "127.0.0.1:5000", "WAGGLE_PORT": "4123", "WAGGLE_HOST": "0.0.0.0"}, want: "127.0.0.1:5000"},
		{name: "flag wins", args: []string{"--addr", "127.0.0.1:6000"}, env: map[string]string{"WAGGLE_ADDR": "127.0.0.1:5000", "WAGGLE_PORT": "4123"}, want: "127.0.0.1:6000"},
		{name: "bad port", env: map[string]string{"WAGGLE_PORT": "http"}, err: `invalid WAGGLE_PORT "http"`},
		{name: "port out of range", env: map[string]string{"WAGGLE_PORT": "70000"}, err: `invalid WAGGLE_PORT "70000"`},
		{name: "bad port ignored under WAGGLE_ADDR", env: map[string]string{"WAGGLE_ADDR": "127.0.0.1:5000", "WAGGLE_PORT": "x"}, want: "127.0.0.1:5000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"WAGGLE_DATA_DIR": t.TempDir()}
			for k, v := range tt.env {
				env[k] = v
			}
			lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
			c, err := ParseServe(tt.args, lookup, io.Discard)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Gateway.Addr != tt.want {
				t.Fatalf("addr %q, want %q", c.Gateway.Addr, tt.want)
			}
		})
	}
}

func TestFrontendDirSetting(t *testing.T) {
	data := t.TempDir()
	tests := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, ""},
		{nil, map[string]string{"WAGGLE_FRONTEND_DIR": "/opt/waggle/dist"}, "/opt/waggle/dist"},
		{[]string{"--frontend-dir", "/srv/dist"}, map[string]string{"WAGGLE_FRONTEND_DIR": "/opt/waggle/dist"}, "/srv/dist"},
	}
	for _, tt := range tests {
		env := map[string]string{"WAGGLE_DATA_DIR": data}
		for k, v := range tt.env {
			env[k] = v
		}
		c, err := ParseServe(tt.args, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if c.Gateway.FrontendDir != tt.want {
			t.Errorf("%v %v: frontend dir %q, want %q", tt.args, tt.env, c.Gateway.FrontendDir, tt.want)
		}
	}
}

// serveFlags are the flags of `waggle serve` before the configs moved
// next to their services, with the defaults its help showed: every one must
// still exist with the same default (data-dir's depends on $HOME).
var serveFlags = map[string]string{
	"addr": "127.0.0.1:3333", "agent-max-steps": "200", "allow-dev-origins": "false", "body-read-timeout": "30s", "allowed-hosts": "", "allowed-origins": "", "approval-timeout": "5m",
	"auth": "local", "bash-sandbox": "auto", "data-dir": "", "disconnect-grace": "30s", "echo-delay": "15ms",
	"enable-bash": "auto", "frontend-dir": "", "llm-api-key": "", "llm-url": "http://localhost:4000/v1", "log-format": "auto",
	"log-level": "info", "max-message-length": "50000", "model": "", "max-turns": "auto", "mcp-allow-private-urls": "false", "mcp-call-timeout": "1m", "mcp-stdio": "auto",
	"metrics-addr": "", "nats-listen": "", "prompt-budget": "12000", "nats-nkey": "", "nats-replicas": "1", "nats-url": "", "otlp-endpoint": "", "postgres-url": "",
	"rate-limit": "0", "rate-limit-chat": "120", "rate-limit-window": "1m", "shutdown-timeout": "15s", "store": "jsonl",
	"targets": "all", "turn-stream-max-bytes": "64MiB", "turn-stream-storage": "memory",
	"web-fetch-allow-private": "false", "subagents-per-turn": "4", "subagent-timeout": "10m", "subagents-local": "false",
}

func TestServeFlagsRegistered(t *testing.T) {
	home, _ := os.UserHomeDir()
	want := maps.Clone(serveFlags)
	want["data-dir"] = filepath.Join(home, ".waggle")
	var c Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs)
	got := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { got[f.Name] = f.DefValue })
	for name, def := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("--%s is no longer registered", name)
		} else if g != def {
			t.Errorf("--%s default %q, want %q", name, g, def)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("--%s is new: add it to serveFlags and the README's table", name)
		}
	}
	var help strings.Builder
	if _, err := ParseServe([]string{"--help"}, func(string) (string, bool) { return "", false }, &help); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	for name := range want {
		shown := strings.Contains(help.String(), "  -"+name+" string\n") || strings.Contains(help.String(), "  -"+name+"\n") // a switch
		if !shown || !strings.Contains(help.String(), "(env "+EnvName(name)+")") {
			t.Errorf("help lacks --%s or its %s", name, EnvName(name))
		}
	}
}

// TestServeSettings: each flag reaches the config of the service that owns
// it, from the command line or the environment, and the parse-time checks
// of every owner run.
func TestServeSettings(t *testing.T) {
	data := t.TempDir()
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		check func(Config) bool
		err   string
	}{
		{name: "defaults", check: func(c Config) bool {
			return c.Gateway.MaxMessageLength == 50000 && c.TurnRunner.EchoDelay == 15*time.Millisecond &&
				c.TurnRunner.DisconnectGrace == 30*time.Second && c.TurnRunner.MaxTurns == 0 && c.Approval.Timeout == 5*time.Minute &&
				c.TurnStream.MaxBytes == 64<<20 && c.TurnStream.Storage == "memory" && c.LogLevel == slog.LevelInfo &&
				c.TurnRunner.MCP.CallTimeout == time.Minute && c.Gateway.RateWindow == time.Minute && slices.Equal(c.Targets, []string{"all"})
		}},
		{name: "no message limit, no echo delay", args: []string{"--max-message-length", "0", "--echo-delay", "0"}, check: func(c Config) bool {
			return c.Gateway.MaxMessageLength == 0 && c.TurnRunner.EchoDelay == 0
		}},
		{name: "env", env: map[string]string{"WAGGLE_MAX_TURNS": "12", "WAGGLE_TURN_STREAM_MAX_BYTES": " 2 GiB ", "WAGGLE_ENABLE_BASH": "true",
			"WAGGLE_ALLOWED_HOSTS": "a.example, .b.example", "WAGGLE_LOG_LEVEL": "debug", "WAGGLE_POSTGRES_URL": "postgres://x", "WAGGLE_STORE": "postgres"},
			check: func(c Config) bool {
				return c.TurnRunner.MaxTurns == 12 && c.TurnStream.MaxBytes == 2<<30 && c.TurnRunner.EnableBash == "true" &&
					slices.Equal(c.Gateway.AllowedHosts, []string{"a.example", ".b.example"}) && c.LogLevel == slog.LevelDebug &&
					c.SessionStore.PostgresURL == "postgres://x" && c.SessionStore.Store == "postgres"
			}},
		{name: "dev origins switch, body timeout", args: []string{"--allow-dev-origins", "--body-read-timeout", "2s"}, check: func(c Config) bool {
			return c.Gateway.AllowDevOrigins && c.Gateway.BodyReadTimeout == 2*time.Second
		}},
		{name: "dev origins from env", env: map[string]string{"WAGGLE_ALLOW_DEV_ORIGINS": "true"}, check: func(c Config) bool { return c.Gateway.AllowDevOrigins }},
		{name: "dev origins switched off", args: []string{"--allow-dev-origins=false"}, env: map[string]string{"WAGGLE_ALLOW_DEV_ORIGINS": "true"},
			check: func(c Config) bool { return !c.Gateway.AllowDevOrigins }},
		{name: "bad dev origins env", env: map[string]string{"WAGGLE_ALLOW_DEV_ORIGINS": "maybe"}, err: "invalid WAGGLE_ALLOW_DEV_ORIGINS"},
		{name: "bad allowed origin", args: []string{"--allowed-origins", "*"}, err: "--allowed-origins"},
		{name: "flag wins over env", args: []string{"--mcp-stdio", "off"}, env: map[string]string{"WAGGLE_MCP_STDIO": "sandbox"},
			check: func(c Config) bool { return c.TurnRunner.MCP.Stdio == "off" }},
		{name: "bad env names its variable", env: map[string]string{"WAGGLE_APPROVAL_TIMEOUT": "soon"}, err: `invalid WAGGLE_APPROVAL_TIMEOUT "soon": want a duration`},
		{name: "bad choice", args: []string{"--bash-sandbox", "maybe"}, err: `invalid --bash-sandbox "maybe": want on, off or auto`},
		{name: "bad auth", env: map[string]string{"WAGGLE_AUTH": "open"}, err: `invalid WAGGLE_AUTH "open": want local or required`},
		{name: "negative message length", args: []string{"--max-message-length", "-1"}, err: "--max-message-length"},
		{name: "negative echo delay", args: []string{"--echo-delay", "-1ms"}, err: "--echo-delay"},
		{name: "negative approval timeout", args: []string{"--approval-timeout", "-1s"}, err: "--approval-timeout"},
		{name: "negative max turns", args: []string{"--max-turns", "-3"}, err: "--max-turns"},
		{name: "negative grace", args: []string{"--disconnect-grace", "-1s"}, err: "--disconnect-grace"},
		{name: "negative replicas", args: []string{"--nats-replicas", "-1"}, err: "--nats-replicas"},
		{name: "unknown store", args: []string{"--store", "mysql"}, err: "--store must be"},
		{name: "postgres store without URL", args: []string{"--store", "postgres"}, err: "--store=postgres needs --postgres-url"},
		{name: "unknown turn storage", args: []string{"--turn-stream-storage", "disk"}, err: "--turn-stream-storage must be memory or file"},
		{name: "listen with external NATS", args: []string{"--nats-url", "nats://x:4222", "--nats-listen", "127.0.0.1:4222"}, err: "--nats-listen only applies"},
		{name: "nkey without external NATS", args: []string{"--nats-nkey", "/x/nats.nk"}, err: "--nats-nkey only applies"},
		{name: "empty data dir", args: []string{"--data-dir", ""}, err: "the data directory is empty"},
		{name: "team server without PostgreSQL", args: []string{"--auth", "required"}, err: "--auth=required needs --postgres-url"},
		{name: "team server's store without PostgreSQL", args: []string{"--auth", "required", "--targets", "session-store"}, err: "--auth=required needs --postgres-url"},
		{name: "stray argument", args: []string{"now"}, err: `unexpected argument "now"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"WAGGLE_DATA_DIR": data}
			maps.Copy(env, tt.env)
			c, err := ParseServe(tt.args, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, io.Discard)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(c) {
				t.Fatalf("config %+v", c)
			}
		})
	}
}

func TestEnvName(t *testing.T) {
	for flagName, want := range map[string]string{"addr": "WAGGLE_ADDR", "turn-stream-max-bytes": "WAGGLE_TURN_STREAM_MAX_BYTES", "llm-api-key": "WAGGLE_LLM_API_KEY"} {
		if got := EnvName(flagName); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", flagName, got, want)
		}
	}
}
