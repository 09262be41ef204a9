package protocol

import (
	"encoding/json"
	"strings"
)

// Message roles.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleSystem    = "system"
)

// Message is one chat message of a session, as stored on a JSONL line
// `{"role":…,"content":…,"timestamp":…}`.
type Message struct {
	Role      string `json:"role"`
	Content   string `json:"content"`
	Timestamp string `json:"timestamp,omitempty"`
	// TurnID ties the message to the turn that wrote it; tool events of the
	// same turn carry the same id.
	TurnID string `json:"turnId,omitempty"`
	// Error is set on the assistant message of a turn that failed or was
	// cancelled: Content holds what was produced before that.
	Error string `json:"error,omitempty"`
}

// ToolEvent is one tool call of a turn and its outcome, stored on a JSONL
// line `{"type":"tool",…}` so the timeline and summary read real events.
type ToolEvent struct {
	TurnID string          `json:"turnId"`
	CallID string          `json:"callId"`
	Name   string          `json:"name"`
	Input  json.RawMessage `json:"input"`
	Result string          `json:"result"`
	// IsError follows the contract: the result starts with "Error:" or "Error ".
	IsError bool `json:"isError"`
	// Status is "success", "error" or "denied" (a gated call that never ran).
	Status     string `json:"status"`
	DurationMs *int64 `json:"durationMs,omitempty"`
	// Parent is the CallID of the spawn_agent call this call ran under.
	Parent    string `json:"parent,omitempty"`
	Timestamp string `json:"timestamp"`
	// Key names the event within its turn (the agent's step and call, and
	// a sub-agent's parent call) for the append key it is stored under;
	// it is not stored itself.
	Key string `json:"-"`
}

// SessionMeta is the first line of a session file.
type SessionMeta struct {
	Type      string          `json:"type"` // always "meta"
	Title     *string         `json:"title"`
	Summary   *string         `json:"summary,omitempty"`
	Created   string          `json:"created"`
	Distilled bool            `json:"distilled,omitempty"`
	Outcome   json.RawMessage `json:"outcome,omitempty"`
	// BranchOf is set in a branch's meta line (SessionBranch).
	BranchOf *SessionBranch `json:"branchOf,omitempty"`
}

// SessionRef names one session.
type SessionRef struct {
	Workspace string `json:"workspace"`
	Session   string `json:"session"`
}

// HistoryRequest reads a session's messages (and, with Tools, its tool events).
type HistoryRequest struct {
	SessionRef
	Tools bool `json:"tools,omitempty"`
}

// HistoryReply is a session's history in file order. A missing session is an
// empty history, not an error.
type HistoryReply struct {
	Messages []Message   `json:"messages"`
	Tools    []ToolEvent `json:"tools,omitempty"`
}

// AppendRequest appends exactly one of Message or Tool to a session,
// creating the file (meta line first) when it does not exist.
type AppendRequest struct {
	SessionRef
	Message *Message   `json:"message,omitempty"`
	Tool    *ToolEvent `json:"tool,omitempty"`
	// Key, when set, makes the append idempotent: a second append of the
	// same key to the same session (a resend whose first answer was
	// lost, a claimed turn storing again what its first runner stored)
	// appends nothing and answers like the first. The sender derives it
	// from what identifies the line (AppendKey), never from its content.
	Key string `json:"key,omitempty"`
	// Accepted, on a turn's user message, also records the turn as
	// accepted and open (acceptedturns.go) before the line is stored: the
	// line's fsync makes both durable.
	Accepted *AcceptedTurn `json:"accepted,omitempty"`
}

// AppendReply confirms a durable append (fsync done).
type AppendReply struct {
	// Timestamp is the stored line's: for a duplicate, the first one's.
	Timestamp string `json:"timestamp"`
	// Duplicate reports an append whose key was stored already: nothing
	// was appended.
	Duplicate bool `json:"duplicate,omitempty"`
}

// MaxAppendKey is the longest AppendRequest.Key the store accepts.
const MaxAppendKey = 512

// AppendKey is the key of one line a turn stores: the turn's id and what
// names the line within it (its role, or its tool call), so every send of
// the same line carries the same key and two lines never share one.
func AppendKey(turnID string, parts ...string) string {
	if turnID == "" {
		return ""
	}
	return turnID + "/" + strings.Join(parts, "/")
}

// ClearRequest evicts every cached copy of a session (the file stays).
type ClearRequest struct {
	SessionRef
}

// ClearReply answers ClearRequest.
type ClearReply struct {
	Cleared string `json:"cleared"`
}

// SessionEvicted is published on SessionEvictions.
type SessionEvicted struct {
	SessionRef
}

// Empty is the body of a reply that carries nothing.
type Empty struct{}

// MemorySaveRequest stores one memory in a workspace.
type MemorySaveRequest struct {
	Workspace string   `json:"workspace"`
	Content   string   `json:"content"`
	Tags      []string `json:"tags,omitempty"`
	// Importance and Source of the frame (memory.go); empty: normal and
	// agent_inferred.
	Importance string `json:"importance,omitempty"`
	Source     string `json:"source,omitempty"`
	// Personal saves to the personal mind of User instead of the
	// workspace's (MemoryOwner).
	Personal bool   `json:"personal,omitempty"`
	User     string `json:"user,omitempty"`
}

// MemorySaveReply answers MemorySaveRequest.
type MemorySaveReply struct {
	ID string `json:"id"`
	// Duplicate: identical content was already kept; ID is that frame.
	Duplicate bool `json:"duplicate,omitempty"`
}

// Memory is one stored memory.
type Memory struct {
	ID        string   `json:"id"`
	Content   string   `json:"content"`
	Tags      []string `json:"tags,omitempty"`
	Timestamp string   `json:"timestamp"`
	// Score is a search hit's relevance from 0 to 1 (the fused rank score
	// over its best possible value); 0 in listings.
	Score float64 `json:"score,omitempty"`
}

// MemorySearchRequest searches a workspace's memories by keywords.
type MemorySearchRequest struct {
	Workspace string `json:"workspace"`
	Query     string `json:"query"`
	Limit     int    `json:"limit,omitempty"`
	// User and Scope as in MemoryQueryRequest; empty Scope is the
	// workspace mind and the personal mind together.
	User  string `json:"user,omitempty"`
	Scope string `json:"scope,omitempty"`
}

// MemorySearchReply lists matching memories, best first.
type MemorySearchReply struct {
	Memories []Memory `json:"memories"`
}

// UsageRecord is one turn's token usage, added to the store's ledger.
type UsageRecord struct {
	Workspace    string  `json:"workspace"`
	Session      string  `json:"session"`
	TurnID       string  `json:"turnId"`
	Model        string  `json:"model"`
	InputTokens  int     `json:"inputTokens"`
	OutputTokens int     `json:"outputTokens"`
	Cost         float64 `json:"cost"`
	Timestamp    string  `json:"timestamp"`
}

// WorkspaceRequest names one workspace.
type WorkspaceRequest struct {
	Workspace string `json:"workspace"`
}

// Workspace is a workspace's config (workspace.json). Unknown fields are
// kept by the store; these are the ones other services read.
type Workspace struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Model   string `json:"model,omitempty"`
	Persona string `json:"persona,omitempty"`
	// Tone is the workspace's tone preset (professional, casual,
	// technical, legal, marketing) or the user's own words.
	Tone      string  `json:"tone,omitempty"`
	TeamID    string  `json:"teamId,omitempty"`
	Directory string  `json:"directory,omitempty"`
	Budget    float64 `json:"budget,omitempty"`
	Group     string  `json:"group,omitempty"`
	Created   string  `json:"created,omitempty"`
}

// CommandRequest runs a slash command.
type CommandRequest struct {
	Command   string `json:"command"`
	Workspace string `json:"workspace"`
	Session   string `json:"session"`
	// LLMAvailable tells the command whether rerouting to the agent loop can work.
	LLMAvailable bool `json:"llmAvailable,omitempty"`
	// User is the team-server user running the command ("" locally).
	User string `json:"user,omitempty"`
}

// CommandReply is a command's result text; a result that starts with
// RerouteAgentLoopPrefix asks the agent loop to run the rest as a prompt.
type CommandReply struct {
	Result string `json:"result"`
}

// RerouteAgentLoopPrefix marks a command result that the agent loop must run.
const RerouteAgentLoopPrefix = "AGENT_LOOP_REROUTE::"

// UsageSummaryRequest totals the ledger since a time (ISO-8601; empty means
// since the last reset).
type UsageSummaryRequest struct {
	Since string `json:"since,omitempty"`
	// Workspace, when set, totals only that workspace's records.
	Workspace string `json:"workspace,omitempty"`
}

// ModelUsage is one model's share of the ledger.
type ModelUsage struct {
	Input  int     `json:"input"`
	Output int     `json:"output"`
	Cost   float64 `json:"cost"`
}

// UsageSummary is the ledger's totals (the `usage` object of
// /api/agent/status, reference §5.2).
type UsageSummary struct {
	TotalInputTokens  int                   `json:"totalInputTokens"`
	TotalOutputTokens int                   `json:"totalOutputTokens"`
	EstimatedCost     float64               `json:"estimatedCost"`
	Turns             int                   `json:"turns"`
	ByModel           map[string]ModelUsage `json:"byModel"`
}
