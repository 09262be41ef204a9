package turnrunner

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
)

// turn is one running chat turn, owned by the goroutine that runs it.
type turn struct {
	svc *Service
	// own is the turn's lease and place in its session's queue.
	own     turnOwnership
	req     protocol.TurnRequest
	ctx     context.Context
	cancel  context.CancelCauseFunc
	pub     turnEvents
	started time.Time
	// path is the turn's path for metrics (set once it is known).
	path string
	// resumed marks a turn claimed from another runner.
	resumed bool
	// finished is set once the terminal event is stored.
	finished bool
	presence *presence

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
}

// errUserNotSaved cancels a turn whose user message could not be stored.
var errUserNotSaved = errors.New("the user message could not be stored")

// saveUserText is the error a client gets when its message was not stored.
const saveUserText = "Could not save your message. Try sending it again."

func (t *turn) ref() protocol.SessionRef {
	return protocol.SessionRef{Workspace: t.req.Workspace, Session: t.req.Session}
}

func (t *turn) logger() *slog.Logger {
	return t.svc.log.With("turn", t.req.TurnID, "workspace", t.req.Workspace, "session", t.req.Session)
}

// silent reports whether the turn stopped because it is not this runner's
// any more (handed over, or its lease taken): it then writes nothing — no
// persisted partial reply, no terminal event — since the new owner goes on.
func (t *turn) silent() bool {
	c := context.Cause(t.ctx)
	return errors.Is(c, errHandover) || errors.Is(c, errLeaseLost) || errors.Is(c, errCheckpointUnread)
}

// errCheckpointUnread stops a claimed turn whose checkpoint could not be
// read: its lease is left as it is, for this runner to take it back.
var errCheckpointUnread = errors.New("the turn's checkpoint could not be read")

// run runs a newly accepted turn.
func (t *turn) run() {
	log := t.logger()
	if !t.own.Holds() && !t.queue() {
		return
	}
	if protocol.IsSlashCommand(t.req.Message) {
		// A command may act on the session: it runs once the message that
		// asked for it is on disk.
		if err := t.persist(protocol.Message{Role: protocol.RoleUser, Content: t.req.Message}); err != nil {
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
	if t.svc.probe.Last().Reachable {
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
func (t *turn) saveUser() {
	t.pub.Hold()
	t.userSaved = make(chan struct{})
	go func() {
		defer close(t.userSaved)
		t.userErr = t.store(protocol.Message{Role: protocol.RoleUser, Content: t.req.Message})
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
func (t *turn) awaitUser() error {
	if t.userSaved == nil {
		return nil
	}
	<-t.userSaved
	return t.userErr
}

// queue waits for the session's earlier turn to end. A turn cancelled
// while it waits ends without touching the session: its message was never
// taken up.
func (t *turn) queue() bool {
	if err := t.pub.Emit(protocol.EventStep, protocol.TokenData{Content: protocol.StepWaitingForSession}); err != nil {
		t.logger().Error("publish step", "err", err)
	}
	if t.own.Wait(t.ctx) == nil {
		return true
	}
	if !t.silent() {
		t.finishError("The turn was cancelled.")
	}
	return false
}

// decide takes the turn down its path: slash command, echo mode or the
// agent loop.
func (t *turn) decide() {
	if t.svc.cfg.LLMAPIKey == "" && !t.svc.probe.Last().Reachable {
		// A model server that wants a key answers the probe only with one:
		// look up the vault's before probing (the probe sends the last
		// key found in the local vault).
		t.svc.models.ModelKey(t.ctx, t.req.Workspace, t.req.Model)
	}
	llm := t.svc.probe.Available(t.ctx)
	if !llm && t.svc.cfg.LLMAPIKey == "" && t.svc.probe.Last().WantsKey() &&
		t.svc.models.ModelKey(t.ctx, t.req.Workspace, t.req.Model) != "" {
		// The server refused the probe's key (the local vault's, or none)
		// but this turn's team has one: the turn uses it (loopOptions),
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
func (t *turn) setPath(path string) {
	t.path = path
	if !t.resumed {
		telemetry.TurnsStarted.WithLabelValues(path).Inc()
	}
}

// markPath publishes the path checkpoint ahead of anything of the path:
// the stream stores it before every later event of the turn, so waiting
// for it would only add a round trip before the first token. A turn that
// cannot publish it is ended (it could not be resumed).
func (t *turn) markPath(cp protocol.PathCheckpoint) bool {
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
func (t *turn) reply(path, text string, skip int) {
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
func (t *turn) end() {
	switch {
	case t.finished || !t.silent():
		t.own.Leave()
		t.own.Drop()
	case errors.Is(context.Cause(t.ctx), errHandover):
		t.pub.Drain(2 * time.Second)
		t.own.Release(t.presence.wasFollowed())
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
func (t *turn) runCommand(llm bool) (prompt string, handled bool) {
	rep, err := bus.Call(context.Background(), t.svc.nc, protocol.ExecuteCommand, protocol.CommandRequest{
		Command: t.req.Message, Workspace: t.req.Workspace, Session: t.req.Session, LLMAvailable: llm,
	}, bus.Within(t.svc.cfg.StoreTimeout))
	if err != nil {
		if errors.Is(err, protocol.ErrUnavailable) {
			return t.req.Message, false
		}
		t.svc.log.Error("command failed", "turn", t.req.TurnID, "err", err)
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
			t.svc.log.Error("publish step", "turn", t.req.TurnID, "err", err)
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
func (t *turn) streamReply(text string, skip int) {
	pieces := strings.Split(text, " ")
	for _, p := range pieces[:min(skip, len(pieces))] {
		t.produced.WriteString(p + " ")
	}
	var timer *time.Timer
	for i := skip; i < len(pieces); i++ {
		if i > 0 && t.svc.cfg.EchoDelay > 0 {
			if timer == nil {
				timer = time.NewTimer(t.svc.cfg.EchoDelay)
			} else {
				timer.Reset(t.svc.cfg.EchoDelay)
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
			t.svc.log.Error("publish token", "turn", t.req.TurnID, "err", err)
			t.abort()
			return
		}
		t.produced.WriteString(tok)
	}
	if err := t.persist(protocol.Message{Role: protocol.RoleAssistant, Content: text}); err != nil {
		t.svc.log.Error("persist assistant message", "turn", t.req.TurnID, "err", err)
		t.finishError("Your reply could not be saved. Try sending your message again.")
		return
	}
	t.finish(protocol.EventDone, protocol.EchoDone{Content: text, ToolsUsed: []string{}})
}

// busReturnWait bounds how long an aborted turn waits for a lost bus.
const busReturnWait = 15 * time.Second

// abort ends a streamed reply that was cancelled (or could not publish).
func (t *turn) abort() { t.abortWith(strings.TrimSuffix(t.produced.String(), " ")) }

// abortWith ends a cancelled turn: content (what was produced) is
// persisted with the reason, and the stream gets a terminal error so every
// follower stops.
func (t *turn) abortWith(content string) {
	if t.silent() {
		return
	}
	// A turn that could not publish because the bus is away waits for it
	// (bounded): its partial reply, session lock, lease and terminal event
	// all go over the bus, and a lease left behind would look alive.
	wctx, wcancel := context.WithTimeout(context.Background(), busReturnWait)
	_ = bus.WaitConnected(wctx, t.svc.nc)
	wcancel()
	cause := context.Cause(t.ctx)
	if cause == nil {
		cause = errCancelled
	}
	msg := protocol.Message{Role: protocol.RoleAssistant, Content: content, Error: cause.Error()}
	if err := t.persist(msg); err != nil {
		t.svc.log.Error("persist partial reply", "turn", t.req.TurnID, "err", err)
	}
	t.finishError("The turn was cancelled.")
}

// persist stores a message of the turn, after the user's message.
func (t *turn) persist(m protocol.Message) error {
	if m.Role != protocol.RoleUser {
		if err := t.awaitUser(); err != nil {
			return fmt.Errorf("turnrunner: persist %s message: %w", m.Role, errUserNotSaved)
		}
		t.awaitTools()
	}
	return t.store(m)
}

// store sends one message of the turn to the session store.
func (t *turn) store(m protocol.Message) error {
	m.TurnID = t.req.TurnID
	_, err := bus.Call(context.Background(), t.svc.nc, protocol.AppendToSession, protocol.AppendRequest{SessionRef: t.ref(), Message: &m}, bus.Within(t.svc.cfg.StoreTimeout))
	if err != nil {
		return fmt.Errorf("turnrunner: persist %s message: %w", m.Role, err)
	}
	return nil
}

func (t *turn) finishError(message string) {
	t.finish(protocol.EventError, protocol.ErrorData{Message: message})
}

func (t *turn) finish(event string, data any) {
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
		t.svc.log.Error("publish terminal event", "turn", t.req.TurnID, "event", event, "err", err)
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
func (t *turn) onToken() {
	telemetry.TokensPublished.Inc()
	t.firstToken.Do(func() {
		if !t.resumed {
			telemetry.TimeToFirstToken.Observe(time.Since(t.started).Seconds())
		}
	})
}
