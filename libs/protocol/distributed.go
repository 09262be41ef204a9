package protocol

import (
	"strings"
	"time"
)

// Distributed turns. Every accepted turn has a lease in BucketTurnLeases
// naming its runner, and every runner writes its entry in BucketRunners
// every LeaseHeartbeat. A lease whose runner's entry has not changed for
// LeaseStaleAfter (the runner died), names an earlier incarnation of its
// runner (it restarted), or was released (the runner shut down) is claimed
// by another runner with a compare-and-set on its revision, and that
// runner resumes the turn from
// its checkpoint: the session store (the user message, finished tool calls)
// and the turn's own events (tokens streamed so far and the internal
// checkpoint events below). At most one turn per session runs at a time:
// the turn runners' session queues (services/turnrunner/ownership, private
// to the runners) decide which.

// RunnerBeat is the value of a runner's entry in BucketRunners.
type RunnerBeat struct {
	// Incarnation is random per process start: leases of an earlier
	// incarnation of the same runner id are its dead predecessor's.
	Incarnation string `json:"incarnation"`
	// Heartbeat is the runner's clock (Unix ms), for operators; liveness
	// is judged by the entry's revision changing.
	Heartbeat int64 `json:"heartbeat"`
	// Turns is how many turns the runner runs, for operators.
	Turns int `json:"turns"`
}

// Lease timing. Liveness is judged by a runner's entry in BucketRunners
// changing, on the observer's own clock, so no two machines' clocks are
// ever compared.
const (
	// LeaseHeartbeat is how often a runner rewrites its BucketRunners entry.
	LeaseHeartbeat = time.Second
	// LeaseStaleAfter is how long a runner's entry may stay unchanged
	// before any runner may claim its turns.
	LeaseStaleAfter = 3 * time.Second
	// LeaseOrphanAfter is how long a gateway waits on a turn whose
	// liveness revision (see OrphanCheck) did not change before the turn is
	// ended: no runner is left to take it over.
	LeaseOrphanAfter = 10 * time.Second
	// LeaseMaxAge is the lease bucket's MaxAge: a lease not written for
	// this long is garbage. Runners rewrite their leases well within it.
	LeaseMaxAge = time.Hour
	// RunnerMaxAge is BucketRunners' MaxAge: a dead runner's entry goes.
	RunnerMaxAge = time.Minute
)

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

// TurnLease is the value of a turn's lease.
type TurnLease struct {
	// Request is the turn as the gateway sent it: everything a runner needs
	// to run or resume it.
	Request TurnRequest `json:"request"`
	// Runner owns the turn; "" after a release.
	Runner string `json:"runner,omitempty"`
	// Incarnation is the owner's RunnerBeat.Incarnation.
	Incarnation string `json:"incarnation,omitempty"`
	// Released means the owner gave the turn up (graceful shutdown): claim
	// it at once instead of waiting for LeaseStaleAfter.
	Released bool `json:"released,omitempty"`
	// Accepted is when the turn was first accepted (Unix ms).
	Accepted int64 `json:"accepted"`
	// Heartbeat is the owner's clock at its last write (Unix ms), for
	// operators.
	Heartbeat int64 `json:"heartbeat"`
	// Claims counts takeovers.
	Claims int `json:"claims,omitempty"`
	// Followed is set once any client attached, so a runner that takes the
	// turn over applies the disconnect grace to it too.
	Followed bool `json:"followed,omitempty"`
}

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

// OrphanCheck is the gateway's watchdog over one turn it relays, so a
// client gets a terminal error in bounded time when no runner is left.
//
// While relaying, the gateway calls Observe about every LeaseHeartbeat
// with the turn's liveness revision — the revision of its runner's entry
// in BucketRunners when the lease names a runner whose entry has the
// lease's incarnation, else the revision of the lease itself (0 when there
// is none or the bucket does not exist) — and whether the last message on
// TurnEvents(turnID) is terminal (read the lease first, then the last
// message: a runner stores the terminal event before it deletes the
// lease). The runners own those buckets, so they read them: the gateway
// gets both from ReapTurn (reap.go). When Observe reports true the
// turn is ended — by a runner, asked with ReapRequest.End at that revision:
//  1. it deletes the lease with kv.Delete(key, jetstream.LastRevision(lease
//     revision)) (skipped when there is no lease); if that fails, a runner
//     just claimed the turn: keep relaying and keep observing;
//  2. it publishes `error` {message: TurnOrphanedText} on TurnEvents(turnID)
//     with header Nats-Msg-Id = TurnEndMsgID(turnID) (a runner finishing
//     at the same moment uses the same id, so the stream keeps one end).
//
// With no runner subscribed to ReapTurn at all, the gateway observes
// the sequence of the turn's last message instead and publishes step 2
// itself, expecting that sequence as the subject's last; the lease stays
// for the runner that claims the turn later, finds it ended and cleans up.
//
// A turn whose runner is alive (working, waiting for an approval or for
// its session) is never orphaned however quiet the stream is.
type OrphanCheck struct {
	rev   uint64
	since time.Time
	seen  bool
}

// Observe records the lease revision seen at now and reports whether the
// turn is orphaned: not ended, and its lease absent or unchanged for
// LeaseOrphanAfter.
func (c *OrphanCheck) Observe(rev uint64, terminal bool, now time.Time) bool {
	if terminal {
		return false
	}
	if !c.seen || rev != c.rev {
		c.rev, c.since, c.seen = rev, now, true
		return false
	}
	return now.Sub(c.since) >= LeaseOrphanAfter
}
