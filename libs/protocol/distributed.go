package protocol

import "strings"

// Distributed turns. A turn runs on one turn runner at a time; when its
// runner dies, another takes it over and resumes it from its checkpoint:
// the session store (the user message, finished tool calls) and the turn's
// own events (tokens streamed so far and the internal checkpoint events
// below). How runners own turns — leases, heartbeats, the session queues
// that let one turn per session run at a time — is private to them
// (services/turnrunner/ownership); other services ask LookupTurn.

// Internal turn events. They travel on TurnEvents like the others, but
// relays do not send them to clients (IsInternalEvent): they make a turn
// followable at once and let another runner resume it.
const (
	// EventStart is published when a runner accepts a turn, before it
	// answers the start request (StartMarker).
	EventStart = "_start"
	// EventPath records the path a turn took, before anything of it is
	// visible (PathCheckpoint).
	EventPath = "_path"
	// EventCheckpointStep records a model step that asked for tools,
	// before any of them runs (StepCheckpoint).
	EventCheckpointStep = "_step"
	// EventCheckpointExec records that a tool call is about to run
	// (ExecCheckpoint): a call with this mark and no result may have had
	// its effect and is never run again.
	EventCheckpointExec = "_exec"
)

// IsInternalEvent reports whether a turn event is for services only.
func IsInternalEvent(event string) bool { return strings.HasPrefix(event, "_") }

// Turn paths (PathCheckpoint.Path, and the path label of turn metrics).
const (
	TurnPathEcho    = "echo"
	TurnPathCommand = "command"
	TurnPathAgent   = "agent"
)

// Texts of distributed turns.
const (
	// StepWaitingForSession is the step a queued turn shows while an
	// earlier turn of its session runs.
	StepWaitingForSession = "Waiting for the previous turn in this session..."
	// StepResumed is the step a turn shows when another runner took it over.
	StepResumed = "Resumed on another runner"
	// TurnOrphanedText is the error an orphaned turn is ended with.
	TurnOrphanedText = "This turn was interrupted and no server is available to finish it. Try sending your message again."
)

// CodeSessionBusy is the error code of a turn refused because its session
// is busy and the request asked for MultitaskReject.
const CodeSessionBusy = "SESSION_BUSY"

// ErrSessionBusy is the start-request answer for MultitaskReject when the
// session has a turn running (Conflict, before any stream starts).
var ErrSessionBusy = &Error{Kind: Conflict, Message: "This session already has a turn running.", Code: CodeSessionBusy}

// TurnEndMsgID is the Nats-Msg-Id of a turn's terminal event. Runners and
// gateways (OrphanCheck) use it, so a turn gets one terminal event even if
// both try within the stream's duplicate window.
func TurnEndMsgID(turnID string) string { return turnID + ":end" }

// StartMarker is the data of EventStart.
type StartMarker struct {
	Runner string `json:"runner"`
	// Workspace lets a gateway check who may follow or cancel the turn.
	Workspace string `json:"workspace,omitempty"`
}

// PathCheckpoint is the data of EventPath. Text is the whole reply of an
// echo or command turn (streamed as tokens next); Prompt is the message an
// agent turn sends the model (a slash command may have rewritten it).
type PathCheckpoint struct {
	Path   string `json:"path"`
	Text   string `json:"text,omitempty"`
	Prompt string `json:"prompt,omitempty"`
}

// StepCheckpoint is the data of EventCheckpointStep: one model step that
// asked for tools, published (and stored) before any of them runs.
type StepCheckpoint struct {
	// Step numbers the turn's checkpointed steps from 1.
	Step int `json:"step"`
	// Model answered the step.
	Model string `json:"model"`
	// Content is the text the model streamed in this step.
	Content string           `json:"content"`
	Calls   []CheckpointCall `json:"calls"`
	// InputTokens and OutputTokens are the turn's usage so far.
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
}

// CheckpointCall is one tool call of a StepCheckpoint.
type CheckpointCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Args string `json:"args"`
}

// ExecCheckpoint is the data of EventCheckpointExec.
type ExecCheckpoint struct {
	Step   int    `json:"step"`
	CallID string `json:"callId"`
}
