package protocol

// Event names of a retrieval run (contract §8).
const (
	AgentRunEventStarted   = "started"
	AgentRunEventProgress  = "progress"
	AgentRunEventFinalized = "finalized"
	AgentRunEventError     = "error" // data {error}; not terminal: done follows
	AgentRunEventDone      = "done"  // data {ok:true}; always last
)

// AgentRunRequest is a validated POST /api/agent/run body.
type AgentRunRequest struct {
	TurnID string `json:"turnId,omitempty"`
	// Question is required and non-empty.
	Question string `json:"question"`
	// Shape is the requested prompt-shape name ("" = model default).
	Shape string `json:"shape,omitempty"`
	// Model defaults to DefaultAgentModel.
	Model string `json:"model,omitempty"`
	// Persona defaults to "general-purpose".
	Persona string `json:"persona,omitempty"`
	// Workspace to retrieve from; "" or "personal" means the personal
	// (default) workspace.
	Workspace string `json:"workspace,omitempty"`
	// User is the team-server user the run is for ("" locally). With a
	// user, "" Workspace means that user's personal mind only, never the
	// shared default workspace.
	User string `json:"user,omitempty"`
	// MaxSteps defaults to 5; MaxRetrievalsPerStep to 8.
	MaxSteps             int `json:"maxSteps,omitempty"`
	MaxRetrievalsPerStep int `json:"maxRetrievalsPerStep,omitempty"`
}

// AgentRunShapes are the prompt shapes a run recognises (reference §5.4).
var AgentRunShapes = []string{"claude", "qwen-thinking", "qwen-non-thinking", "gpt", "generic-simple", "claude-gen1-v1", "qwen-thinking-gen1-v1"}
