package turn

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/llmprobe"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/approvalgate"
	"github.com/waggle-os/core/services/turnrunner/mcp"
	"github.com/waggle-os/core/services/turnrunner/subagent"
	"github.com/waggle-os/core/services/turnrunner/tools"
)

// Deps is what a turn needs of the runner that runs it. The runner builds
// it once, when it starts; every turn of the runner shares it and none
// changes it.
type Deps struct {
	// Conn is the runner's bus connection: a turn asks the session store,
	// the command service and the approval service over it, and publishes
	// notifications.
	Conn *nats.Conn
	// JS writes the turn's events and reads a claimed turn's event log.
	JS jetstream.JetStream
	// Config is the runner's settings a turn reads.
	Config Config
	// Log is the runner's logger; a turn adds its ids.
	Log *slog.Logger

	// ModelServer says whether the model server answers (echo mode when
	// not); Settings is config.json's model settings and the vault's keys;
	// Policies is the teams' tool policies.
	ModelServer ModelServer
	Settings    Settings
	Policies    Policies
	// FallbackModel is the model of a turn that nothing names.
	FallbackModel func() string

	// Agent runs the agent loop; Tools are the built-in tools, MCP the
	// MCP servers' tools, SubAgents the list of running sub-agents.
	Agent     *agent.Agent
	Tools     *tools.Registry
	MCP       *mcp.Manager
	SubAgents *subagent.List
	// Remote places sub-agents on runners with more room; nil runs them
	// on this runner.
	Remote *subagent.Remote
}

// Config is the part of the runner's configuration a turn reads (the
// fields of the runner's Config of the same names).
type Config struct {
	// DataDir holds the workspaces' files.
	DataDir string
	// LLMAPIKey is the configured model server key ("" for none: the
	// vault's is looked up).
	LLMAPIKey string
	// EchoDelay is the pause between echo-mode and command tokens.
	EchoDelay time.Duration
	// StoreTimeout bounds one session-store request.
	StoreTimeout time.Duration
	// PromptBudget is the most estimated tokens of the system prompt.
	PromptBudget int
	// SubAgents bounds spawn_agent.
	SubAgents subagent.Limits
	// Approval configures each turn's approval gate.
	Approval approvalgate.Config
	// RecordAccepted makes the session store the durable record of the
	// turn's acceptance (record.go): set when the runner's coordination
	// state is written without an fsync (ownership.OwnerConfig.Async).
	RecordAccepted bool
}

// ModelServer is the model-server probe (llmprobe.Prober).
type ModelServer interface {
	// Last is the last probe's outcome; Available probes (cached briefly).
	Last() llmprobe.Status
	Available(ctx context.Context) bool
}

// Settings is config.json's model settings and the vault's keys, cached
// by the runner.
type Settings interface {
	// Get is the current model configuration.
	Get() agent.ModelConfig
	// ModelKey is the vault's key for model in workspace, SearchKey a web
	// search provider's in team's vault ("" for none).
	ModelKey(ctx context.Context, workspace, model string) string
	SearchKey(ctx context.Context, team, provider string) string
	// AutoSaveOn reports whether auto-save is on for workspace.
	AutoSaveOn(workspace string) bool
}

// Policies is the teams' tool policies, cached by the runner.
type Policies interface {
	// Policy is user's tool policy in workspace; an error means it could
	// not be read, and the turn then runs no tool.
	Policy(ctx context.Context, user, workspace string, now time.Time) (protocol.ToolPolicy, error)
}

// Followers is what a turn knows of the clients following its stream
// (the runner tracks their attaches and detaches).
type Followers interface {
	// Followed reports whether a client ever followed the turn; Count is
	// how many follow it now.
	Followed() bool
	Count() int
}
