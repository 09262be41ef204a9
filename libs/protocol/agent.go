package protocol

import "encoding/json"

// DefaultAgentModel is the agent model until one is set.
const DefaultAgentModel = "claude-sonnet-4-6"

// CommandListRequest lists commands; a non-empty Query keeps those whose
// name or alias contains it (case-insensitive).
type CommandListRequest struct {
	Query string `json:"query,omitempty"`
}

// CommandInfo describes one slash command for autocomplete.
type CommandInfo struct {
	Name        string   `json:"name"`
	Aliases     []string `json:"aliases"`
	Usage       string   `json:"usage"`
	Description string   `json:"description"`
}

// CommandList answers CommandListRequest, in registration order.
type CommandList struct {
	Commands []CommandInfo `json:"commands"`
}

// AgentModel is the current agent model.
type AgentModel struct {
	Model string `json:"model"`
}

// UsageReset confirms a ledger reset.
type UsageReset struct {
	ResetAt string `json:"resetAt"`
}

// Agent-group strategies.
const (
	StrategyParallel    = "parallel"
	StrategySequential  = "sequential"
	StrategyCoordinator = "coordinator"
)

// Member roles with a meaning to the runner; any other string is allowed.
const (
	RoleLead   = "lead"
	RoleWorker = "worker"
)

// AgentGroupMember is one member of a group.
type AgentGroupMember struct {
	AgentID        string `json:"agentId"`
	RoleInGroup    string `json:"roleInGroup"`
	ExecutionOrder int    `json:"executionOrder"`
}

// AgentGroup is a stored group (contract §7).
type AgentGroup struct {
	ID          string             `json:"id"`
	Name        string             `json:"name"`
	Description *string            `json:"description,omitempty"`
	Strategy    string             `json:"strategy"`
	Members     []AgentGroupMember `json:"members"`
	CreatedAt   string             `json:"createdAt"`
	// TeamID is the team the group belongs to (set when it is created;
	// "" for groups of a local server and those made before groups had a
	// team, which on a team server are the operator's alone).
	TeamID string `json:"teamId,omitempty"`
}

// AgentGroupList answers ListGroups, in creation order.
type AgentGroupList struct {
	Groups []AgentGroup `json:"groups"`
}

// AgentGroupRef names one group.
type AgentGroupRef struct {
	ID string `json:"id"`
}

// AgentGroupWrite creates (ID empty) or updates (ID set) a group. Fields is
// the HTTP body's JSON object as the client sent it: the store checks types
// and values, so every validation rule lives in one place.
type AgentGroupWrite struct {
	ID     string                     `json:"id,omitempty"`
	Fields map[string]json.RawMessage `json:"fields"`
}

// Deleted confirms a deletion.
type Deleted struct {
	Deleted bool `json:"deleted"`
}

// GroupRunRequest queues a run of a group. Workspace is where the members'
// sessions are written (default "default").
type GroupRunRequest struct {
	GroupID   string `json:"groupId"`
	Task      string `json:"task"`
	TeamID    string `json:"teamId,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	// User is the team-server user who started the run ("" locally): the
	// members' turns run as them, under their team's governance.
	User string `json:"user,omitempty"`
}

// GroupJobRequest reads one job of one group (GroupID "": of any group).
type GroupJobRequest struct {
	GroupID string `json:"groupId"`
	JobID   string `json:"jobId"`
}

// Job and step states.
const (
	JobQueued    = "queued"
	JobRunning   = "running"
	JobCompleted = "completed"
	JobFailed    = "failed"
	// JobCancelled is a job (and the steps it stopped) cancelled by a
	// user (POST /api/jobs/{id}/cancel).
	JobCancelled = "cancelled"
	// StepPending and StepSkipped apply to steps only: not started yet, and
	// never started because the run failed before them.
	StepPending = "pending"
	StepSkipped = "skipped"
)

// Coordinator phases of a step.
const (
	PhasePlan    = "plan"
	PhaseWork    = "work"
	PhaseCombine = "combine"
)

// GroupJob is a group run and its progress. Steps are in execution order;
// a coordinator's lead has two steps (plan and combine).
type GroupJob struct {
	JobID       string         `json:"jobId"`
	GroupID     string         `json:"groupId"`
	GroupName   string         `json:"groupName"`
	Strategy    string         `json:"strategy"`
	MemberCount int            `json:"memberCount"`
	Task        string         `json:"task"`
	TeamID      string         `json:"teamId,omitempty"`
	Workspace   string         `json:"workspace"`
	Status      string         `json:"status"`
	Steps       []GroupJobStep `json:"steps"`
	// Result is the run's final text: the last member's output
	// (sequential), every output under its agent's heading (parallel), or
	// the lead's combination (coordinator).
	Result     string `json:"result,omitempty"`
	Error      string `json:"error,omitempty"`
	CreatedAt  string `json:"createdAt"`
	StartedAt  string `json:"startedAt,omitempty"`
	FinishedAt string `json:"finishedAt,omitempty"`
	UpdatedAt  string `json:"updatedAt"`
}

// GroupJobCancelReply answers CancelGroupJob (the original's
// {cancelled, jobId}).
type GroupJobCancelReply struct {
	Cancelled bool   `json:"cancelled"`
	JobID     string `json:"jobId"`
}

// GroupJobStep is one member turn of a run.
type GroupJobStep struct {
	AgentID        string `json:"agentId"`
	RoleInGroup    string `json:"roleInGroup"`
	ExecutionOrder int    `json:"executionOrder"`
	Phase          string `json:"phase,omitempty"`
	Status         string `json:"status"`
	Session        string `json:"session"`
	TurnID         string `json:"turnId,omitempty"`
	Output         string `json:"output,omitempty"`
	Error          string `json:"error,omitempty"`
	StartedAt      string `json:"startedAt,omitempty"`
	FinishedAt     string `json:"finishedAt,omitempty"`
}

// ActiveAgent is one step of a running group job.
type ActiveAgent struct {
	JobID          string `json:"jobId"`
	GroupID        string `json:"groupId"`
	GroupName      string `json:"groupName"`
	AgentID        string `json:"agentId"`
	RoleInGroup    string `json:"roleInGroup"`
	ExecutionOrder int    `json:"executionOrder"`
	Phase          string `json:"phase,omitempty"`
	Status         string `json:"status"`
	Session        string `json:"session"`
	TurnID         string `json:"turnId,omitempty"`
	StartedAt      string `json:"startedAt,omitempty"`
	// TeamID is the team of the run's workspace on a team server (the
	// job's TeamID), so a user is shown only their teams' runs.
	TeamID string `json:"teamId,omitempty"`
}

// ActiveAgents answers ListActiveAgents: Workers are every step of
// every running job, Active those whose turn is running now.
type ActiveAgents struct {
	Workers []ActiveAgent `json:"workers"`
	Active  []ActiveAgent `json:"active"`
	// SubAgents are the running sub-agents of chat turns (spawn_agent);
	// the gateway adds them from ListSubAgents.
	SubAgents []SubAgent `json:"subAgents"`
}

// SubAgent is one running sub-agent: a nested agent run a turn's
// spawn_agent call started. It lives as long as that call.
type SubAgent struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Role    string `json:"role"`
	Persona string `json:"persona,omitempty"`
	// Task is the start of the sub-agent's task (SubAgentTaskPreview).
	Task  string   `json:"task"`
	Tools []string `json:"tools"`
	// ParentTurnID and ParentCallID are the turn and the spawn_agent call
	// it runs under (its tool events carry ParentCallID as Parent).
	ParentTurnID string `json:"parentTurnId"`
	ParentCallID string `json:"parentCallId"`
	Workspace    string `json:"workspace"`
	Session      string `json:"session"`
	// TeamID is the team of the workspace on a team server, so a user is
	// shown only their teams' sub-agents.
	TeamID    string `json:"teamId,omitempty"`
	Status    string `json:"status"`
	StartedAt string `json:"startedAt"`
}

// SubAgentTaskPreview is how much of a sub-agent's task SubAgent.Task keeps.
const SubAgentTaskPreview = 200

// SubAgentList answers ListSubAgents.
type SubAgentList struct {
	SubAgents []SubAgent `json:"subAgents"`
}
