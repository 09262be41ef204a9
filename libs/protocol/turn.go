package protocol

import (
	"strings"
	"time"
)

// SSE event names of a chat turn (contract §1).
const (
	EventToken            = "token"
	EventStep             = "step"
	EventTool             = "tool"
	EventToolResult       = "tool_result"
	EventFileCreated      = "file_created"
	EventApprovalRequired = "approval_required"
	EventGepaChoices      = "gepa_choices"
	EventModelSwitch      = "model_switch"
	EventNotification     = "notification"
	EventDone             = "done"
	EventError            = "error"
	// EventStreamGap tells a client that events of the turn it follows
	// were discarded before it could read them (it fell behind the window
	// the server keeps). The reply's full text still comes with done, and
	// the stored history has everything the turn persisted.
	EventStreamGap = "stream_gap"
)

// StreamGapData is the data of EventStreamGap.
type StreamGapData struct {
	// Missed is how many events were lost.
	Missed uint64 `json:"missed"`
	// Message says what happened, for display.
	Message string `json:"message"`
}

// StreamGapEndedText is the error a client behind the window gets for a
// turn that ended with an error (the details are in the history).
const StreamGapEndedText = "This turn ended with an error while your connection was behind. The conversation history has what was saved."

// StreamGapText is StreamGapData.Message.
const StreamGapText = "Part of this reply was not kept while your connection was behind. The complete reply arrives at the end of the turn and is in the conversation history."

// IsTerminal reports whether an event ends its turn's stream.
func IsTerminal(event string) bool { return event == EventDone || event == EventError }

// Autonomy levels (contract §1 request body).
const (
	AutonomyNormal  = "normal"
	AutonomyTrusted = "trusted"
	AutonomyYolo    = "yolo"
)

// Autonomy is the tool-confirmation relaxation a chat request asks for.
type Autonomy struct {
	Level string `json:"level,omitempty"`
	// ExpiresAt is a Unix time in milliseconds; 0 means no expiry.
	ExpiresAt int64 `json:"expiresAt,omitempty"`
}

// Effective returns the level in force at now: "trusted" or "yolo" only when
// asked for and not expired, otherwise "normal".
func (a Autonomy) Effective(now time.Time) string {
	if a.Level != AutonomyTrusted && a.Level != AutonomyYolo {
		return AutonomyNormal
	}
	if a.ExpiresAt != 0 && a.ExpiresAt <= now.UnixMilli() {
		return AutonomyNormal
	}
	return a.Level
}

// TurnRequest asks a runner to run one chat turn. The gateway has validated
// every field: IDs pass ValidID and WorkspacePath (if set) is an absolute
// path inside the data directory or the workspace's linked directory.
type TurnRequest struct {
	// TurnID is chosen by the gateway so it can be logged and traced before
	// the runner answers; a runner assigns one when it is empty.
	TurnID        string   `json:"turnId,omitempty"`
	Workspace     string   `json:"workspace"`
	Session       string   `json:"session"`
	Message       string   `json:"message"`
	Model         string   `json:"model,omitempty"`
	Persona       string   `json:"persona,omitempty"`
	WorkspacePath string   `json:"workspacePath,omitempty"`
	Autonomy      Autonomy `json:"autonomy"`
	// Multitask says what happens when the session already has a running
	// turn: MultitaskQueue (default) waits for it, MultitaskReject fails
	// with 409 SESSION_BUSY, MultitaskInterrupt cancels it first.
	Multitask string `json:"multitask,omitempty"`
	// User is the authenticated user in team-server mode ("" locally); the
	// runner applies the user's team policies (blocked tools).
	User string `json:"user,omitempty"`
}

// Multitask policies of TurnRequest.Multitask.
const (
	MultitaskQueue     = "queue"
	MultitaskReject    = "reject"
	MultitaskInterrupt = "interrupt"
)

// TurnStarted is a runner's answer to TurnRequest: the turn runs and its
// events are (or will be) on TurnEvents(TurnID).
type TurnStarted struct {
	TurnID string `json:"turnId"`
}

// Turn control messages, published on TurnControl(turnID).
const (
	// ControlCancel stops the turn: the model stream is cut, what was
	// produced is persisted and pending approvals are denied.
	ControlCancel = "cancel"
	// ControlAttach says a client is following the turn's stream; relays
	// repeat it every AttachInterval while they stream, so a runner can
	// tell a slow client from a gone one even when a gateway dies.
	ControlAttach = "attach"
	// ControlDetach says a client stopped following the turn.
	ControlDetach = "detach"
	// ControlProbe, sent as a request, asks whether a runner runs the
	// turn: only its owner answers (an operator's check; older gateways
	// asked it before ending a turn they believed had no runner left).
	ControlProbe = "probe"
)

// AttachInterval is how often a relay repeats ControlAttach.
const AttachInterval = 5 * time.Second

// AbortWorkspace is the body of WorkspaceAborts.
type AbortWorkspace struct {
	Workspace string `json:"workspace"`
}

// TurnControlMsg is the body of a message on TurnControl.
type TurnControlMsg struct {
	Action string `json:"action"`
	Reason string `json:"reason,omitempty"`
	// Client identifies one follower of the stream (attach/detach).
	Client string `json:"client,omitempty"`
}

// TokenData is the data of a token or step event.
type TokenData struct {
	Content string `json:"content"`
}

// ErrorData is the data of a terminal error event.
type ErrorData struct {
	Message string `json:"message"`
}

// EchoUsage is the zero usage object of echo-mode and command-only turns.
type EchoUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// EchoDone is the done event of echo-mode and command-only turns.
type EchoDone struct {
	Content   string    `json:"content"`
	Usage     EchoUsage `json:"usage"`
	ToolsUsed []string  `json:"toolsUsed"`
}

// IsSlashCommand reports whether a chat message is a slash command: after
// trimming, a '/' followed by an ASCII word character (reference §3.1).
func IsSlashCommand(message string) bool {
	s := strings.TrimSpace(message)
	if len(s) < 2 || s[0] != '/' {
		return false
	}
	c := s[1]
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}
