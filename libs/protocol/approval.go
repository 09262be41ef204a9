package protocol

import "encoding/json"

// Gate actions of an ApprovalCheckReply.
const (
	// ApprovalRun lets the call run now (after emitting Step, if any).
	ApprovalRun = "run"
	// ApprovalAsk means a human must decide: the runner emits
	// approval_required and waits for the entry RequestID to be decided.
	ApprovalAsk = "ask"
)

// States of a PendingApproval entry. Only pending and claimed entries can
// still change; the others are final.
const (
	ApprovalStatePending = "pending"
	// ApprovalStateClaimed marks an approval whose "always" grant is being
	// written: the decision is taken (no other decision can win) but the
	// tool must not run before the grant is on disk.
	ApprovalStateClaimed   = "claimed"
	ApprovalStateApproved  = "approved"
	ApprovalStateDenied    = "denied"
	ApprovalStateTimedOut  = "timeout"
	ApprovalStateCancelled = "cancelled"
)

// ApprovalFinal reports whether state is a final decision.
func ApprovalFinal(state string) bool {
	return state != ApprovalStatePending && state != ApprovalStateClaimed
}

// ApprovalCheckRequest asks whether a turn's tool call may run.
type ApprovalCheckRequest struct {
	TurnID    string          `json:"turnId"`
	Workspace string          `json:"workspace"`
	Session   string          `json:"session"`
	ToolName  string          `json:"toolName"`
	Input     json.RawMessage `json:"input"`
	Autonomy  Autonomy        `json:"autonomy"`
}

// ApprovalCheckReply is the approval service's answer to a check.
type ApprovalCheckReply struct {
	// Action is ApprovalRun or ApprovalAsk.
	Action string `json:"action"`
	// Step is the step text to emit before the call runs (auto-approved by
	// autonomy, or allowed by a saved grant); empty for a silent run.
	Step string `json:"step,omitempty"`
	// RequestID names the pending entry (ApprovalAsk only).
	RequestID string `json:"requestId,omitempty"`
	// Deadline is when the pending entry times out, Unix milliseconds
	// (ApprovalAsk only).
	Deadline int64 `json:"deadline,omitempty"`
}

// PendingApproval is the value of one BucketApprovals entry, keyed by its
// RequestID. A decision is a compare-and-set of State on the entry's
// revision, so exactly one decision wins.
type PendingApproval struct {
	RequestID string          `json:"requestId"`
	TurnID    string          `json:"turnId"`
	Workspace string          `json:"workspace"`
	Session   string          `json:"session"`
	ToolName  string          `json:"toolName"`
	Input     json.RawMessage `json:"input"`
	// SourceWorkspaceID is the workspace the call ran in, sent to the client
	// so an "always" grant is scoped to it.
	SourceWorkspaceID *string `json:"sourceWorkspaceId"`
	// Timestamp is when the approval was asked for, Unix milliseconds.
	Timestamp int64 `json:"timestamp"`
	// Deadline is when it times out, Unix milliseconds.
	Deadline int64 `json:"deadline"`
	// State is one of the ApprovalState* values.
	State string `json:"state"`
	// Always is set on an approval that stored a grant.
	Always bool `json:"always,omitempty"`
	// DecidedAt is when State became final, Unix milliseconds.
	DecidedAt int64 `json:"decidedAt,omitempty"`
}

// ApprovalRequiredData is the data of an approval_required event.
type ApprovalRequiredData struct {
	RequestID         string          `json:"requestId"`
	ToolName          string          `json:"toolName"`
	Input             json.RawMessage `json:"input"`
	SourceWorkspaceID *string         `json:"sourceWorkspaceId"`
}

// ApprovalDecideRequest is a human decision.
type ApprovalDecideRequest struct {
	RequestID string `json:"requestId"`
	Approved  bool   `json:"approved"`
	// Always stores a grant (with Approved) before the tool runs.
	Always bool `json:"always,omitempty"`
	// SourceWorkspaceID scopes the grant; nil applies it in every workspace.
	SourceWorkspaceID *string `json:"sourceWorkspaceId"`
}

// ApprovalDecideReply confirms a decision.
type ApprovalDecideReply struct {
	RequestID string `json:"requestId"`
	Approved  bool   `json:"approved"`
	Always    bool   `json:"always"`
}

// ApprovalResolveRequest ends a pending approval with Outcome
// (ApprovalStateTimedOut or ApprovalStateCancelled).
type ApprovalResolveRequest struct {
	RequestID string `json:"requestId"`
	Outcome   string `json:"outcome"`
}

// ApprovalResolveReply is the entry's final state: Outcome, or the decision
// that won before it.
type ApprovalResolveReply struct {
	State string `json:"state"`
}

// ApprovalCancelTurnRequest names the turn whose approvals are cancelled.
type ApprovalCancelTurnRequest struct {
	TurnID string `json:"turnId"`
}

// ApprovalCancelTurnReply counts the approvals that were cancelled.
type ApprovalCancelTurnReply struct {
	Cancelled int `json:"cancelled"`
}

// ApprovalPendingReply lists the pending approvals, oldest first.
type ApprovalPendingReply struct {
	Pending []PendingApproval `json:"pending"`
}

// ApprovalGrant is one standing "always allow" grant, in the shape of the
// grant file and of GET /api/approval/grants.
type ApprovalGrant struct {
	ID                string  `json:"id"`
	ToolName          string  `json:"toolName"`
	TargetKey         string  `json:"targetKey"`
	SourceWorkspaceID *string `json:"sourceWorkspaceId"`
	Description       string  `json:"description"`
	GrantedAt         string  `json:"grantedAt"`
	ExpiresAt         *string `json:"expiresAt"`
}

// ApprovalGrantsReply lists the live grants, newest first.
type ApprovalGrantsReply struct {
	Grants []ApprovalGrant `json:"grants"`
}

// ApprovalRevokeRequest names the grant to revoke.
type ApprovalRevokeRequest struct {
	ID string `json:"id"`
}

// Step texts of the approval gate, and the texts the model reads in place
// of a result when a call was not allowed to run. The approval service and
// the turn runner both emit them, so they live here.

// ApprovalStepAutoApproved is shown when the autonomy level waived an
// approval.
func ApprovalStepAutoApproved(tool, level string) string {
	return "⚡ " + tool + " auto-approved (" + level + ")"
}

// ApprovalStepGrant is shown when a saved "always allow" grant covered the
// call.
func ApprovalStepGrant(tool string) string { return "✔ " + tool + " allowed by saved grant" }

// ApprovalStepApproved is shown when the user approved the call.
func ApprovalStepApproved(tool string) string { return "✔ " + tool + " approved" }

// ApprovalStepDenied is shown when the user denied the call (or the turn
// was cancelled while it waited).
func ApprovalStepDenied(tool string) string { return "✖ " + tool + " denied by user" }

// ApprovalStepTimedOut is shown when nobody answered in time. It is worded
// apart from ApprovalStepDenied so a timeout is never mistaken for the
// user's choice.
func ApprovalStepTimedOut(tool string) string {
	return "⏱ " + tool + " approval timed out — denied"
}

// ApprovalModelDenied is what the model reads instead of a result when the
// user denied the call.
func ApprovalModelDenied(tool string) string { return "[BLOCKED] User denied " + tool }

// ApprovalModelTimedOut is what the model reads when the approval timed
// out, so it does not tell the user they said no.
func ApprovalModelTimedOut(tool string) string {
	return "[BLOCKED] Approval for " + tool + " timed out"
}
