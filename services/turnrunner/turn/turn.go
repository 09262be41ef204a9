// Package turn runs one chat turn, from its request to its terminal
// event: it waits for its session, stores the user's message, takes the
// echo, command or agent path (or resumes a turn claimed from another
// runner from its checkpoint), stores the reply and ends the turn's
// stream. It reaches the runner only through Deps, its ownership through
// Ownership and its event writer through a turnevents.Publisher.
package turn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/telemetry"
	"github.com/waggle-os/core/services/turnrunner/turnevents"
)

// Turn is one running chat turn, owned by the goroutine that runs it.
type Turn struct {
	deps *Deps
	// own is the turn's lease and place in its session's queue.
	own     Ownership
	req     protocol.TurnRequest
	ctx     context.Context
	cancel  context.CancelCauseFunc
	pub     events
	started time.Time
	// path is the turn's path for metrics (set once it is known).
	path string
	// resumed marks a turn claimed from another runner.
	resumed bool
	// finished is set once the terminal event is stored.
	finished bool
	// followers is who follows the turn's stream (for notifications and
	// a handover's lease).
	followers Followers

	firstToken sync.Once

	// prefetch, when set, delivers the agent's inputs (history, workspace,
	// spend) loaded while the user message was being stored.
	prefetch <-chan prefetched

	// produced is the assistant text streamed so far, persisted if the turn
	// fails or is cancelled.
	produced strings.Builder

	// userSaved is closed once the user's message is stored (with userErr
	// set when that failed); nil when it was stored before the turn's work
	// began.
	userSaved chan struct{}
	userErr   error

	// toolsSaved is closed once every tool event handed over so far is
	// stored (nil: none was). Tool events are appended in order behind
	// one another, off the model's path; whatever the turn stores after
	// them waits (awaitTools), so history keeps the order.
	toolsMu    sync.Mutex
	toolsSaved chan struct{}

	// rec is the turn's part in the store's record of accepted turns
	// (record.go).
	rec recording
}

// Causes of a turn's end that the runner gives (Cancel) or that a resumed
// turn finds stored with a partial reply.
var (
	ErrShutdown    = errors.New("runner shutting down")
	ErrClientGone  = errors.New("client disconnected")
	ErrCancelled   = errors.New("cancelled")
	ErrAborted     = errors.New("aborted")
	ErrInterrupted = errors.New("interrupted by a newer message")
)

// New builds one turn of req, owned through own and followed as followers
// tells (nothing runs yet): Run runs a new turn, Resume one claimed from
// another runner; Close follows either.
func New(d *Deps, req protocol.TurnRequest, own Ownership, followers Followers) *Turn {
	t := newTurn(d, req, own, followers)
	t.pub = turnevents.New(d.JS, req.TurnID, t.onToken)
	return t
}

// newTurn is New without its event writer.
func newTurn(d *Deps, req protocol.TurnRequest, own Ownership, followers Followers) *Turn {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Turn{deps: d, own: own, req: req, ctx: ctx, cancel: cancel, started: time.Now(), followers: followers,
		rec: recording{done: make(chan struct{})}}
}

// Request is the turn's request.
func (t *Turn) Request() protocol.TurnRequest { return t.req }

// Cancel stops the turn for cause (one of the Err values above): it
// persists what it produced and ends its stream, except after
// ErrHandover or ErrLeaseLost, when another runner goes on with it.
func (t *Turn) Cancel(cause error) { t.cancel(cause) }

// MarkStarted publishes the start marker that makes the turn followable.
// It is not waited for: it is stored before anything else the turn
// publishes, and the lease (which is durable) is what makes the turn
// resumable; a round trip here would be added to every turn's time to
// first token.
func (t *Turn) MarkStarted(runner string) error {
	return t.pub.Note(protocol.EventStart, protocol.StartMarker{Runner: runner, Workspace: t.req.Workspace})
}

// Run runs a newly accepted turn to its end.
func (t *Turn) Run() {
	t.run()
	t.end()
}

// Resume runs a turn claimed from another runner to its end.
func (t *Turn) Resume() {
	t.resumed = true
	t.resume()
	t.end()
}

// Close releases what the turn holds once Run or Resume returned: its
// context, the user message's and tool events' store requests, its
// event writer.
func (t *Turn) Close() {
	t.cancel(nil)
	_ = t.awaitUser()
	t.awaitTools()
	t.pub.Close()
}

// errUserNotSaved cancels a turn whose user message could not be stored.
var errUserNotSaved = errors.New("the user message could not be stored")

// saveUserText is the error a client gets when its message was not stored.
const saveUserText = "Could not save your message. Try sending it again."

func (t *Turn) ref() protocol.SessionRef {
	return protocol.SessionRef{Workspace: t.req.Workspace, Session: t.req.Session}
}

func (t *Turn) logger() *slog.Logger {
	return t.deps.Log.With("turn", t.req.TurnID, "workspace", t.req.Workspace, "session", t.req.Session)
}

// silent reports whether the turn stopped because it is not this runner's
// any more (handed over, or its lease taken): it then writes nothing — no
// persisted partial reply, no terminal event — since the new owner goes on.
func (t *Turn) silent() bool {
	c := context.Cause(t.ctx)
	return errors.Is(c, ErrHandover) || errors.Is(c, ErrLeaseLost) || errors.Is(c, errCheckpointUnread)
}

// errCheckpointUnread stops a claimed turn whose checkpoint could not be
// read: its lease is left as it is, for this runner to take it back.
var errCheckpointUnread = errors.New("the turn's checkpoint could not be read")

// run runs a newly accepted turn.
func (t *Turn) run() {
	defer t.markRecorded() // whatever happened, nothing is waiting for the record any more
	log := t.logger()
	if !t.own.Holds() && !t.queue() {
		return
	}
	if protocol.IsSlashCommand(t.req.Message) {
		// A command may act on the session: it runs once the message that
		// asked for it is on disk.
		err := t.persist(protocol.Message{Role: protocol.RoleUser, Content: t.req.Message})
		t.markRecorded()
		if err != nil {
			log.Error("persist user message", "err", err)
			t.finishError(saveUserText)
			return
		}
		t.decide()
		return
	}
	// A model turn reads its history while the user message is stored:
	// history excludes this turn's own lines anyway, and the two store
	// round trips overlap instead of adding up before the first token.
	if t.deps.ModelServer.Last().Reachable {
		t.prefetch = t.prefetchInputs()
	}
	t.saveUser()
	t.decide()
}

// saveUser stores the user's message while the turn's work starts. Until
// it is on disk, nothing the turn publishes reaches a client (the
// publisher holds it), no tool runs (a tool's checkpoint waits for the
// hold) and nothing else of the turn is stored (persist waits): whatever
// happens next, the user's words are not lost, and the model's first
// token costs no fsync. If it cannot be stored, what was held is dropped
// and the turn ends with saveUserText.
func (t *Turn) saveUser() {
	t.pub.Hold()
	t.userSaved = make(chan struct{})
	go func() {
		defer close(t.userSaved)
		t.userErr = t.store(protocol.Message{Role: protocol.RoleUser, Content: t.req.Message})
		t.markRecorded()
		if t.userErr != nil {
			t.logger().Error("persist user message", "err", t.userErr)
			t.pub.Discard()
			t.cancel(errUserNotSaved)
			return
		}
		t.pub.Release()
	}()
}

// awaitUser waits until the user's message is stored and reports whether
// that failed.
func (t *Turn) awaitUser() error {
	if t.userSaved == nil {
		return nil
	}
	<-t.userSaved
	return t.userErr
}

// queue waits for the session's earlier turn to end. A turn cancelled
// while it waits ends without touching the session: its message was never
// taken up.
func (t *Turn) queue() bool {
	if err := t.pub.Emit(protocol.EventStep, protocol.TokenData{Content: protocol.StepWaitingForSession}); err != nil {
		t.logger().Error("publish step", "err", err)
	}
	if t.own.Wait(t.ctx) == nil {
		return true
	}
	if !t.silent() {
		t.closeRecord()
		t.finishError("The turn was cancelled.")
	}
	return false
}

// decide takes the turn down its path: slash command, echo mode or the
// agent loop.
func (t *Turn) decide() {
	if t.deps.Config.LLMAPIKey == "" && !t.deps.ModelServer.Last().Reachable {
		// A model server that wants a key answers the probe only with one:
		// look up the vault's before probing (the probe sends the last
		// key found in the local vault).
		t.deps.Settings.ModelKey(t.ctx, t.req.Workspace, t.req.Model)
	}
	llm := t.deps.ModelServer.Available(t.ctx)
	if !llm && t.deps.Config.LLMAPIKey == "" && t.deps.ModelServer.Last().WantsKey() &&
		t.deps.Settings.ModelKey(t.ctx, t.req.Workspace, t.req.Model) != "" {
		// The server refused the probe's key (the local vault's, or none)
		// but this turn's team has one: the turn uses it (pipeline.Turn.LoopOptions),
		// and a wrong one is the model server's error, not echo mode.
		llm = true
	}
	message := t.req.Message
	if protocol.IsSlashCommand(message) {
		prompt, handled := t.runCommand(llm)
		if handled {
			return
		}
		message = prompt
	}
	if !llm {
		t.reply(protocol.TurnPathEcho, echoText(t.req.Message), 0)
		return
	}
	t.setPath(protocol.TurnPathAgent)
	if !t.markPath(protocol.PathCheckpoint{Path: protocol.TurnPathAgent, Prompt: message}) {
		return
	}
	t.runAgent(message, nil)
}

// setPath records the turn's path for metrics.
func (t *Turn) setPath(path string) {
	t.path = path
	if !t.resumed {
		telemetry.TurnsStarted.WithLabelValues(path).Inc()
	}
}

// markPath publishes the path checkpoint ahead of anything of the path:
// the stream stores it before every later event of the turn, so waiting
// for it would only add a round trip before the first token. A turn that
// cannot publish it is ended (it could not be resumed).
func (t *Turn) markPath(cp protocol.PathCheckpoint) bool {
	if err := t.pub.Note(protocol.EventPath, cp); err != nil {
		t.logger().Error("publish path checkpoint", "err", err)
		t.finishError("Something went wrong. Try sending your message again.")
		return false
	}
	return true
}

// reply streams a fixed reply (echo mode, a command's result) after its
// checkpoint, skipping the first skip pieces (already streamed by the
// runner this turn was taken from).
func (t *Turn) reply(path, text string, skip int) {
	t.setPath(path)
	if skip == 0 && !t.markPath(protocol.PathCheckpoint{Path: path, Text: text}) {
		return
	}
	t.streamReply(text, skip)
}

// end cleans up after the turn's goroutine: a finished turn gives its
// session to the next turn and drops its lease; a handed-over one releases
// the lease for another runner (once every event it published is stored);
// one whose lease was taken touches nothing.
func (t *Turn) end() {
	switch {
	case t.finished || !t.silent():
		t.own.Leave()
		t.own.Drop()
	case errors.Is(context.Cause(t.ctx), ErrHandover):
		t.pub.Drain(2 * time.Second)
		t.own.Release(t.followers.Followed())
		telemetry.TurnsFinished.WithLabelValues("handover").Inc()
	case errors.Is(context.Cause(t.ctx), errCheckpointUnread):
		t.own.Abandon()
		telemetry.TurnsFinished.WithLabelValues("retry").Inc()
	default:
		telemetry.TurnsFinished.WithLabelValues("lost").Inc()
	}
}

// echoText is the echo-mode reply (protocol.EchoText).
func echoText(message string) string { return protocol.EchoText(message) }

// runCommand asks the command service to run a slash command. It reports
// handled=false when the turn should go on to the model: no command
// service answered (prompt is the message itself), or the command
// rerouted to the model and one is available (prompt is the rewritten
// request; the disk keeps the original slash text).
func (t *Turn) runCommand(llm bool) (prompt string, handled bool) {
	rep, err := bus.Call(context.Background(), t.deps.Conn, protocol.ExecuteCommand, protocol.CommandRequest{
		Command: t.req.Message, Workspace: t.req.Workspace, Session: t.req.Session, LLMAvailable: llm,
	}, bus.Within(t.deps.Config.StoreTimeout))
	if err != nil {
		if errors.Is(err, protocol.ErrUnavailable) {
			return t.req.Message, false
		}
		t.deps.Log.Error("command failed", "turn", t.req.TurnID, "err", err)
		t.setPath(protocol.TurnPathCommand)
		t.finishError("Something went wrong. Try sending your message again.")
		return "", true
	}
	if rest, ok := strings.CutPrefix(rep.Result, protocol.RerouteAgentLoopPrefix); ok {
		if !llm {
			t.reply(protocol.TurnPathCommand, requiresAIText(t.req.Message), 0)
			return "", true
		}
		name := strings.TrimPrefix(strings.Fields(strings.TrimSpace(t.req.Message))[0], "/")
		if err := t.pub.Emit(protocol.EventStep, protocol.TokenData{Content: "Processing /" + name + " via AI..."}); err != nil {
			t.deps.Log.Error("publish step", "turn", t.req.TurnID, "err", err)
		}
		return rest, false
	}
	t.reply(protocol.TurnPathCommand, rep.Result, 0)
	return "", true
}

func requiresAIText(message string) string {
	token := strings.Fields(strings.TrimSpace(message))[0]
	return protocol.RequiresAIText(token)
}

// streamReply streams text the way echo mode and commands do: split on
// single spaces, one token per piece with its trailing space, EchoDelay
// apart; then persists it and finishes with the zero-usage done. The first
// skip pieces are not streamed again (a resumed turn).
func (t *Turn) streamReply(text string, skip int) {
	pieces := strings.Split(text, " ")
	for _, p := range pieces[:min(skip, len(pieces))] {
		t.produced.WriteString(p + " ")
	}
	var timer *time.Timer
	for i := skip; i < len(pieces); i++ {
		if i > 0 && t.deps.Config.EchoDelay > 0 {
			if timer == nil {
				timer = time.NewTimer(t.deps.Config.EchoDelay)
			} else {
				timer.Reset(t.deps.Config.EchoDelay)
			}
			select {
			case <-timer.C:
			case <-t.ctx.Done():
				t.abort()
				return
			}
		} else if t.ctx.Err() != nil {
			t.abort()
			return
		}
		tok := pieces[i] + " "
		if err := t.pub.Emit(protocol.EventToken, protocol.TokenData{Content: tok}); err != nil {
			t.deps.Log.Error("publish token", "turn", t.req.TurnID, "err", err)
			t.abort()
			return
		}
		t.produced.WriteString(tok)
	}
	if err := t.persist(protocol.Message{Role: protocol.RoleAssistant, Content: text}); err != nil {
		t.deps.Log.Error("persist assistant message", "turn", t.req.TurnID, "err", err)
		t.finishError("Your reply could not be saved. Try sending your message again.")
		return
	}
	t.finish(protocol.EventDone, protocol.EchoDone{Content: text, ToolsUsed: []string{}})
}

// busReturnWait bounds how long an aborted turn waits for a lost bus.
const busReturnWait = 15 * time.Second

// abort ends a streamed reply that was cancelled (or could not publish).
func (t *Turn) abort() { t.abortWith(strings.TrimSuffix(t.produced.String(), " ")) }

// abortWith ends a cancelled turn: content (what was produced) is
// persisted with the reason, and the stream gets a terminal error so every
// follower stops.
func (t *Turn) abortWith(content string) {
	if t.silent() {
		return
	}
	// A turn that could not publish because the bus is away waits for it
	// (bounded): its partial reply, session lock, lease and terminal event
	// all go over the bus, and a lease left behind would look alive.
	wctx, wcancel := context.WithTimeout(context.Background(), busReturnWait)
	_ = bus.WaitConnected(wctx, t.deps.Conn)
	wcancel()
	cause := context.Cause(t.ctx)
	if cause == nil {
		cause = ErrCancelled
	}
	msg := protocol.Message{Role: protocol.RoleAssistant, Content: content, Error: cause.Error()}
	if err := t.persist(msg); err != nil {
		t.deps.Log.Error("persist partial reply", "turn", t.req.TurnID, "err", err)
	}
	t.finishError("The turn was cancelled.")
}

// persist stores a message of the turn, after the user's message.
func (t *Turn) persist(m protocol.Message) error {
	if m.Role != protocol.RoleUser {
		if err := t.awaitUser(); err != nil {
			return fmt.Errorf("turnrunner: persist %s message: %w", m.Role, errUserNotSaved)
		}
		t.awaitTools()
	}
	return t.store(m)
}

// store sends one message of the turn to the session store. A turn
// stores one message per role, so the turn's id and the role name it
// (a claimed turn storing the user message again finds the first
// runner's).
func (t *Turn) store(m protocol.Message) error {
	m.TurnID = t.req.TurnID
	req := protocol.AppendRequest{SessionRef: t.ref(), Message: &m, Key: protocol.AppendKey(t.req.TurnID, m.Role)}
	if m.Role == protocol.RoleUser {
		req.Accepted = t.accepted()
	}
	err := t.appendToStore(req)
	if err != nil {
		return fmt.Errorf("turnrunner: persist %s message: %w", m.Role, err)
	}
	return nil
}

// appendResendAfter is how long an append waits for its answer before it
// is sent again (an append answers in milliseconds, an fsync on a busy
// disk in a few hundred).
const appendResendAfter = time.Second

// appendToStore sends one append of the turn (storeWrite): its key makes
// the store keep one copy however many sends arrive.
func (t *Turn) appendToStore(req protocol.AppendRequest) error {
	return storeWrite(context.Background(), t.deps, protocol.AppendToSession, req)
}

// storeWrite sends a write to the session store, again while it is
// unanswered, until the store timeout: each of these writes is
// idempotent, so an answer lost while a cluster elects (or a store
// reconnecting to another node) costs a resend, not the turn.
func storeWrite[Req, Rep any](ctx context.Context, d *Deps, ep protocol.Endpoint[Req, Rep], req Req) error {
	ctx, cancel := context.WithTimeout(ctx, d.Config.StoreTimeout)
	defer cancel()
	_, err := bus.CallResending(ctx, d.Conn, ep, req, bus.Resending{After: appendResendAfter, Unanswered: historyResendAfter})
	return err
}

func (t *Turn) finishError(message string) {
	t.finish(protocol.EventError, protocol.ErrorData{Message: message})
}

func (t *Turn) finish(event string, data any) {
	if t.silent() {
		return
	}
	if t.awaitUser() != nil {
		event, data = protocol.EventError, protocol.ErrorData{Message: saveUserText}
	}
	t.awaitTools()
	// Everything the turn keeps is persisted by now: the session is free
	// before the client sees the end, so a next message sent on `done`
	// (even with multitask "reject") never finds it busy.
	t.own.Leave()
	if err := t.pub.Finish(event, data); err != nil {
		t.deps.Log.Error("publish terminal event", "turn", t.req.TurnID, "event", event, "err", err)
		return
	}
	t.finished = true
	t.notifyFinished(data)
	outcome := event
	if event == protocol.EventError && t.ctx.Err() != nil {
		outcome = "cancelled"
	}
	telemetry.TurnsFinished.WithLabelValues(outcome).Inc()
	path := t.path
	if path == "" {
		path = "none"
	}
	telemetry.TurnDuration.WithLabelValues(path).Observe(time.Since(t.started).Seconds())
}

// onToken is told of every token event published.
func (t *Turn) onToken() {
	telemetry.TokensPublished.Inc()
	t.firstToken.Do(func() {
		if !t.resumed {
			telemetry.TimeToFirstToken.Observe(time.Since(t.started).Seconds())
		}
	})
}
