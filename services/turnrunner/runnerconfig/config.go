// Package runnerconfig is the turn runner's configuration: its flags and
// their defaults, the checks of its settings, and the configurations it
// derives from them for the model server, the agent, the tools and MCP.
package runnerconfig

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/flagext"
	"github.com/waggle-os/core/libs/llmprobe"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/approvalgate"
	"github.com/waggle-os/core/services/turnrunner/chatstream"
	"github.com/waggle-os/core/services/turnrunner/mcp"
	"github.com/waggle-os/core/services/turnrunner/prompt"
	"github.com/waggle-os/core/services/turnrunner/subagent"
	"github.com/waggle-os/core/services/turnrunner/tools"
)

// Defaults of the runner's flags whose zero value is a setting of its own
// (so withDefaults leaves them alone): the flags start from these.
const (
	// DefaultEchoDelay is the pause between echo-mode tokens, as the
	// original.
	DefaultEchoDelay = 15 * time.Millisecond
	// DefaultDisconnectGrace is how long a served turn outlives its last
	// client.
	DefaultDisconnectGrace = 30 * time.Second
)

// Choices of EnableBash and BashSandbox ("" is Auto).
const (
	Auto       = "auto"
	BashOn     = "true"
	BashOff    = "false"
	SandboxOn  = "on"
	SandboxOff = "off"
)

// Config configures the turn runner.
type Config struct {
	// DataDir is the data directory (workspace files, config.json). Required.
	DataDir string
	// LLMURL (--llm-url) is the OpenAI-compatible base URL including /v1;
	// the composition root gives the same model server to the session
	// store and the gateway's probe. Default chatstream.DefaultBaseURL.
	LLMURL string
	// LLMAPIKey (--llm-api-key) is sent as a bearer token to the model
	// server (optional).
	LLMAPIKey string
	// Model (--model) is the model of a turn that neither the request, the
	// workspace nor config.json's defaultModel names. Empty: agent's
	// DefaultModel, or the model server's first model when it does not
	// serve that one.
	Model string
	// EchoDelay (--echo-delay) is the pause between echo-mode and command
	// tokens; 0 streams as fast as possible. The flag's default is
	// DefaultEchoDelay, the original's pace; a Config built by hand sets it.
	EchoDelay time.Duration
	// Probe configures the model-server availability probe (URL and key
	// are taken from LLMURL and LLMAPIKey).
	Probe llmprobe.Config
	// Stream shapes the turn-event stream.
	Stream bus.TurnStreamConfig
	// MaxTurns (--max-turns) bounds turns running (or queued) at once on
	// this runner; past it a start is refused with 503 RUNNER_BUSY.
	// Default (0, the flag's "auto"): sized from the machine's memory
	// (defaultMaxTurns: 1,024 to 100,000).
	MaxTurns int
	// StoreTimeout bounds one session-store request. Default 10s.
	StoreTimeout time.Duration
	// AsyncCoordination writes the turn leases and session queues without
	// an fsync per write, the session store being the durable record of
	// accepted turns (ownership.OwnerConfig.Async). The composition root
	// sets it only when NATS is embedded in the same process and no other
	// process connects to it: then a crash of NATS is a crash of this
	// runner, and the runner's start puts back what NATS lost
	// (ownership/recovery) before it takes a turn. Default false.
	AsyncCoordination bool

	// TeamServer says the runner serves a team server (the composition
	// root sets it when the gateway's --auth is "required"); the "auto"
	// settings below follow it. Default false: a desktop.
	TeamServer bool
	// EnableBash (--enable-bash) offers the bash tool: "true", "false" or
	// "auto" (default, also ""): on a desktop, off on a team server.
	EnableBash string
	// BashSandbox (--bash-sandbox) runs bash under bubblewrap (bwrap): the
	// workspace is the only writable place, the data dir's other
	// workspaces are hidden, no network. "on", "off" or "auto" (default,
	// also ""): on a team server. When bash is offered and sandboxed, Start
	// fails if bwrap is not installed rather than run it unconfined.
	BashSandbox string
	// BashTimeout is a bash command's time limit when the model asks for
	// none. Default 30s (tools.DefaultBashTimeout).
	BashTimeout time.Duration
	// BashMaxTimeout caps the time limit a model may ask for. Default 10m.
	BashMaxTimeout time.Duration
	// BashOutputLimit caps the bash output returned to the model, in bytes.
	// Default 64 KiB.
	BashOutputLimit int
	// WebFetchAllowPrivate (--web-fetch-allow-private) lets web_fetch reach
	// loopback, link-local, private and metadata addresses on a team
	// server, each fetch after an approval as on a desktop; without it a
	// team server refuses them (a member's model must not probe the
	// server's own network). A desktop always may, after an approval.
	WebFetchAllowPrivate bool
	// ReadFileLimit is the most bytes read_file returns in one call.
	// Default 256 KiB.
	ReadFileLimit int64

	// AgentMaxSteps (--agent-max-steps) bounds the model calls of one
	// agent turn. Default agent.DefaultMaxSteps (200).
	AgentMaxSteps int
	// SubAgents bounds the sub-agents a turn's spawn_agent runs.
	SubAgents subagent.Limits
	// PromptBudget (--prompt-budget) is the most estimated tokens of the
	// agent's system prompt; over it, parts are trimmed in the order
	// docs/agent.md states. Default prompt.DefaultBudget.
	PromptBudget int
	// ModelRetries is how often a failing model call (429, 5xx, timeout,
	// refused connection) is retried before the fallback model. Default 3.
	ModelRetries int
	// ModelRetryBackoff is the first retry's wait, doubled per retry (a
	// short Retry-After from the server wins). Default 1s.
	ModelRetryBackoff time.Duration
	// ModelHeaderTimeout bounds the wait for a model's response headers.
	// Default 2m.
	ModelHeaderTimeout time.Duration
	// ModelConfigCheck is how often <DataDir>/config.json is checked for
	// changes (it is re-read only when it changed). Default 2s.
	ModelConfigCheck time.Duration

	// Approval configures each turn's tool-approval gate (the composition
	// root gives it the approval service's --approval-timeout).
	Approval approvalgate.Config
	// MCP configures the MCP tool servers (DataDir and RunnerID are filled
	// in; its flags are mcp.Config.RegisterFlags). Its Stdio may be
	// mcp.StdioAuto (default, also ""): direct on a desktop, sandboxed on a
	// team server.
	MCP mcp.Config

	// DisconnectGrace (--disconnect-grace) is how long a turn keeps
	// running once every client that followed it is gone (detached, or
	// silent for two attach intervals); 0 cancels at once, the original's
	// behaviour. The flag's default is DefaultDisconnectGrace; a Config
	// built by hand (tests) keeps 0.
	DisconnectGrace time.Duration
	// RunnerID names this runner in turn leases and logs. Default
	// <host>-<pid>-<random>.
	RunnerID string
	// PolicyTTL is how long a team user's tool policy is cached. Default 5s.
	PolicyTTL time.Duration
	// PolicyTimeout bounds the teams service's answer about a tool policy;
	// without an answer a team user's agent turn fails (closed). Default 5s.
	PolicyTimeout time.Duration
	// HandoverMargin is how much of the shutdown budget Stop keeps for
	// handing unfinished turns to other runners: it lets turns finish until
	// the budget's end minus the margin. Default 2s.
	HandoverMargin time.Duration

	// bashSandboxPath is the bwrap binary bash runs under, found by
	// Prepare; empty runs bash directly.
	bashSandboxPath string
}

// RegisterFlags registers the runner's flags on fs (and its MCP
// manager's), with their defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.LLMURL, "llm-url", chatstream.DefaultBaseURL, "OpenAI-compatible base URL including /v1 (LiteLLM, vLLM, Ollama, OpenAI)")
	fs.StringVar(&c.LLMAPIKey, "llm-api-key", "", "bearer key for the model server (prefer the env var: flags show in ps)")
	fs.StringVar(&c.Model, "model", "", "model a turn uses when neither the request, the workspace nor config.json's defaultModel names one; empty = "+agent.DefaultModel+", or the model server's first model when it does not serve that one")
	flagext.DurationVar(fs, &c.EchoDelay, "echo-delay", DefaultEchoDelay, "pause between echo-mode and command tokens")
	c.MaxTurns = 0
	fs.Var((*maxTurnsValue)(&c.MaxTurns), "max-turns", "turns one runner runs at once (more get 503 RUNNER_BUSY); auto = sized from the machine's memory")
	flagext.DurationVar(fs, &c.DisconnectGrace, "disconnect-grace", DefaultDisconnectGrace, "how long a turn keeps running with no client attached (0 = cancel at once)")
	flagext.EnumVar(fs, &c.EnableBash, "enable-bash", Auto, "offer the bash tool: true, false, or auto (on locally, off with --auth=required)", BashOn, BashOff, Auto)
	flagext.EnumVar(fs, &c.BashSandbox, "bash-sandbox", Auto, "run bash under bubblewrap (bwrap): on, off, or auto (on with --auth=required)", SandboxOn, SandboxOff, Auto)
	fs.BoolVar(&c.WebFetchAllowPrivate, "web-fetch-allow-private", false, "team servers: let web_fetch reach loopback, link-local, private or metadata addresses after an approval (refused by default; a desktop always asks)")
	flagext.IntVar(fs, &c.AgentMaxSteps, "agent-max-steps", agent.DefaultMaxSteps, "model calls one agent turn may make")
	flagext.IntVar(fs, &c.SubAgents.PerTurn, "subagents-per-turn", subagent.DefaultPerTurn, "sub-agents one turn's spawn_agent may start")
	fs.BoolVar(&c.SubAgents.Local, "subagents-local", false, "run every sub-agent on its turn's runner, never on another with more room")
	flagext.DurationVar(fs, &c.SubAgents.Timeout, "subagent-timeout", subagent.DefaultTimeout, "time limit of one sub-agent, its approvals included")
	flagext.IntVar(fs, &c.PromptBudget, "prompt-budget", prompt.DefaultBudget, "estimated tokens of the agent's system prompt; parts over it are trimmed (docs/agent.md)")
	c.MCP.RegisterFlags(fs)
}

// maxTurnsValue is --max-turns: a whole number, or "auto" (0).
type maxTurnsValue int

func (v *maxTurnsValue) String() string {
	if *v == 0 {
		return Auto
	}
	return strconv.Itoa(int(*v))
}

func (v *maxTurnsValue) Set(s string) error {
	if s == Auto {
		*v = 0
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("want a whole number")
	}
	*v = maxTurnsValue(n)
	return nil
}

// Validate reports settings that cannot work, each on its own terms: no
// defaults are filled and nothing outside c is looked at (the model URL,
// the runner id and bubblewrap are checked by Start).
func (c Config) Validate() error {
	if c.EchoDelay < 0 {
		return errors.New("turnrunner: the echo delay must not be negative (--echo-delay)")
	}
	if c.MaxTurns < 0 {
		return errors.New("turnrunner: max turns must not be negative (--max-turns)")
	}
	if c.AgentMaxSteps < 0 {
		return errors.New("turnrunner: agent max steps must not be negative (--agent-max-steps)")
	}
	if c.PromptBudget < 0 {
		return errors.New("turnrunner: the prompt budget must not be negative (--prompt-budget)")
	}
	if c.DisconnectGrace < 0 {
		return errors.New("turnrunner: the disconnect grace must not be negative (--disconnect-grace)")
	}
	switch c.EnableBash {
	case "", Auto, BashOn, BashOff:
	default:
		return fmt.Errorf("turnrunner: enable bash %q: want %s", c.EnableBash, flagext.OneOf(BashOn, BashOff, Auto))
	}
	switch c.BashSandbox {
	case "", Auto, SandboxOn, SandboxOff:
	default:
		return fmt.Errorf("turnrunner: bash sandbox %q: want %s", c.BashSandbox, flagext.OneOf(SandboxOn, SandboxOff, Auto))
	}
	switch c.MCP.Stdio {
	case "", mcp.StdioAuto, mcp.StdioDirect, mcp.StdioSandbox, mcp.StdioOff:
	default:
		return fmt.Errorf("turnrunner: MCP stdio mode %q: want %s", c.MCP.Stdio, flagext.OneOf(mcp.StdioAuto, mcp.StdioDirect, mcp.StdioSandbox, mcp.StdioOff))
	}
	return nil
}

// withDefaults is c with every unset field that has a default filled in.
func (c Config) withDefaults() Config {
	if c.LLMURL == "" {
		c.LLMURL = chatstream.DefaultBaseURL
	}
	if c.MaxTurns <= 0 {
		c.MaxTurns = defaultMaxTurns()
	}
	if c.StoreTimeout <= 0 {
		c.StoreTimeout = 10 * time.Second
	}
	if c.BashTimeout <= 0 {
		c.BashTimeout = tools.DefaultBashTimeout
	}
	if c.BashMaxTimeout <= 0 {
		c.BashMaxTimeout = max(tools.DefaultBashMaxTimeout, c.BashTimeout)
	}
	if c.BashOutputLimit <= 0 {
		c.BashOutputLimit = tools.DefaultBashOutputLimit
	}
	if c.ReadFileLimit <= 0 {
		c.ReadFileLimit = tools.DefaultReadLimit
	}
	if c.AgentMaxSteps <= 0 {
		c.AgentMaxSteps = agent.DefaultMaxSteps
	}
	c.SubAgents = c.SubAgents.WithDefaults()
	if c.ModelRetries <= 0 {
		c.ModelRetries = agent.DefaultMaxRetries
	}
	if c.ModelRetryBackoff <= 0 {
		c.ModelRetryBackoff = agent.DefaultRetryBackoff
	}
	if c.ModelHeaderTimeout <= 0 {
		c.ModelHeaderTimeout = chatstream.DefaultResponseHeaderTimeout
	}
	if c.ModelConfigCheck <= 0 {
		c.ModelConfigCheck = 2 * time.Second
	}
	if c.RunnerID == "" {
		c.RunnerID = defaultRunnerID()
	}
	if c.PolicyTTL <= 0 {
		c.PolicyTTL = 5 * time.Second
	}
	if c.PolicyTimeout <= 0 {
		c.PolicyTimeout = 5 * time.Second
	}
	if c.HandoverMargin <= 0 {
		c.HandoverMargin = 2 * time.Second
	}
	if c.MCP.Stdio == "" || c.MCP.Stdio == mcp.StdioAuto {
		c.MCP.Stdio = mcp.StdioDirect
		if c.TeamServer {
			c.MCP.Stdio = mcp.StdioSandbox
		}
	}
	return c
}

// Prepare fills c's defaults and checks everything Start needs: Validate,
// then the model URL, the runner id, the tools' and the agent's configs,
// and bubblewrap where bash or stdio MCP servers are sandboxed.
func (c *Config) Prepare() error {
	if c.DataDir == "" {
		return errors.New("turnrunner: DataDir is required")
	}
	if err := c.Validate(); err != nil {
		return err
	}
	*c = c.withDefaults()
	u, err := url.Parse(c.LLMURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("turnrunner: LLM URL %q must be an http(s) URL such as %s", c.LLMURL, chatstream.DefaultBaseURL)
	}
	c.LLMURL = strings.TrimRight(c.LLMURL, "/")
	c.Probe.URL, c.Probe.APIKey = c.LLMURL, c.LLMAPIKey
	if err := c.Probe.Validate(); err != nil {
		return err
	}
	if !protocol.ValidID(c.RunnerID) {
		return fmt.Errorf("turnrunner: runner id %q: want letters, digits, '-' or '_'", c.RunnerID)
	}
	if c.bashSandboxPath, err = c.bashSandbox(); err != nil {
		return err
	}
	if c.MCP.Stdio == mcp.StdioSandbox && c.MCP.Sandbox == "" {
		// Without bwrap stdio servers are refused in this mode, not run
		// unconfined; the manager reports that per server.
		c.MCP.Sandbox, _ = exec.LookPath("bwrap")
	}
	if err := c.ToolsConfig().Validate(); err != nil {
		return fmt.Errorf("turnrunner: %w", err)
	}
	return c.AgentConfig().Validate()
}

// bashOn reports whether the bash tool is offered: EnableBash, with auto
// meaning on except on a team server.
func (c *Config) bashOn() bool {
	return c.EnableBash == BashOn || (c.EnableBash != BashOff && !c.TeamServer)
}

// bashSandbox resolves BashSandbox to the bwrap binary bash runs under,
// or "" to run it directly: team servers (auto) and "on" sandbox bash, and
// refuse to start with bash offered but no sandbox, rather than run
// shared-server commands unconfined.
//
// With bash not offered the sandbox is still used when bwrap is installed:
// the git tools run under it too (and need it less, so its absence is no
// error then).
func (c *Config) bashSandbox() (string, error) {
	on := c.BashSandbox == SandboxOn || (c.BashSandbox != SandboxOff && c.TeamServer)
	if !on {
		return "", nil
	}
	path, err := exec.LookPath("bwrap")
	if err != nil && !c.bashOn() {
		return "", nil
	}
	if err != nil {
		return "", errors.New("bash needs its sandbox here but bubblewrap is not installed (apt-get install bubblewrap), or set --enable-bash=false / --bash-sandbox=off")
	}
	return path, nil
}

// ToolsConfig is the built-in tools' configuration: local-mode defaults
// with the limits of c.
func (c *Config) ToolsConfig() tools.Config {
	tc := tools.DefaultConfig()
	tc.EnableBash = c.bashOn()
	tc.BashTimeout, tc.BashMaxTimeout, tc.BashOutputLimit = c.BashTimeout, c.BashMaxTimeout, c.BashOutputLimit
	tc.ReadLimit = c.ReadFileLimit
	tc.BashSandbox, tc.SandboxHide = c.bashSandboxPath, []string{c.DataDir}
	tc.WebFetchAllowPrivate = !c.TeamServer || c.WebFetchAllowPrivate
	return tc
}

// ChatModel is the model server the agent loop and the retrieval runner use.
func (c *Config) ChatModel() chatstream.Model {
	return chatstream.Model{BaseURL: c.LLMURL, APIKey: c.LLMAPIKey, ResponseHeaderTimeout: c.ModelHeaderTimeout}
}

// AgentConfig is the agent loop's configuration: the model server and
// the limits of c.
func (c *Config) AgentConfig() agent.Config {
	return agent.Config{
		Model: c.ChatModel(), MaxSteps: c.AgentMaxSteps, MaxRetries: c.ModelRetries, RetryBackoff: c.ModelRetryBackoff,
	}
}

// MCPConfig is the MCP manager's configuration: c.MCP with the runner's
// data directory and name, and the data directory hidden from sandboxed
// servers as it is from bash.
func (c *Config) MCPConfig() mcp.Config {
	mc := c.MCP
	mc.DataDir, mc.RunnerID, mc.TeamServer = c.DataDir, c.RunnerID, c.TeamServer
	mc.SandboxHide = append(mc.SandboxHide, c.DataDir)
	return mc
}

// defaultRunnerID is Config.RunnerID when it is not set: the host name,
// the process id and a random part.
func defaultRunnerID() string {
	host, _ := os.Hostname()
	var b strings.Builder
	for _, c := range host {
		if c < 128 && protocol.ValidID(string(c)) {
			b.WriteRune(c)
		}
	}
	h := b.String()
	if len(h) > 64 {
		h = h[:64]
	}
	if h == "" {
		h = "runner"
	}
	return fmt.Sprintf("%s-%d-%s", h, os.Getpid(), protocol.NewUUID()[:8])
}
