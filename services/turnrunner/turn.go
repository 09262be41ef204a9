package turnrunner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

// turn is one running chat turn, owned by the goroutine that runs it.
type turn struct {
	svc    *Service
	req    protocol.TurnRequest
	ctx    context.Context
	cancel context.CancelCauseFunc
	pub    *publisher

	// produced is the assistant text streamed so far, persisted if the turn
	// fails or is cancelled.
	produced strings.Builder
}

func (t *turn) ref() protocol.SessionRef {
	return protocol.SessionRef{Workspace: t.req.Workspace, Session: t.req.Session}
}

func (t *turn) run() {
	log := t.svc.log.With("turn", t.req.TurnID, "workspace", t.req.Workspace, "session", t.req.Session)
	// The user message is on disk before any work starts: whatever happens
	// next, the user's words are not lost.
	if err := t.persist(protocol.Message{Role: protocol.RoleUser, Content: t.req.Message}); err != nil {
		log.Error("persist user message", "err", err)
		t.finishError("Could not save your message. Try sending it again.")
		return
	}
	llm := t.svc.probe.Available(t.ctx)
	message := t.req.Message
	if protocol.IsSlashCommand(message) {
		prompt, handled := t.runCommand(llm)
		if handled {
			return
		}
		message = prompt
	}
	if !llm {
		t.streamReply(echoText(t.req.Message))
		return
	}
	t.runAgent(message)
}

// echoText is the exact echo-mode reply of the original (reference §1.8).
func echoText(message string) string {
	return "**Waggle is running in local mode** (no LLM proxy connected).\n\nYour message: \"" + message +
		"\"\n\nTo enable AI responses, configure an API key in Settings > API Keys."
}

// runCommand asks the command service to run a slash command. It reports
// handled=false when the turn should go on to the model: no command
// service answered (prompt is the message itself), or the command
// rerouted to the model and one is available (prompt is the rewritten
// request; the disk keeps the original slash text).
func (t *turn) runCommand(llm bool) (prompt string, handled bool) {
	rep, err := storeRequest[protocol.CommandReply](t.svc, protocol.SubjCommandExecute, protocol.CommandRequest{
		Command: t.req.Message, Workspace: t.req.Workspace, Session: t.req.Session, LLMAvailable: llm,
	})
	if err != nil {
		if errors.Is(err, protocol.ErrUnavailable) {
			return t.req.Message, false
		}
		t.svc.log.Error("command failed", "turn", t.req.TurnID, "err", err)
		t.finishError("Something went wrong. Try sending your message again.")
		return "", true
	}
	if rest, ok := strings.CutPrefix(rep.Result, protocol.RerouteAgentLoopPrefix); ok {
		if !llm {
			t.streamReply(requiresAIText(t.req.Message))
			return "", true
		}
		name := strings.TrimPrefix(strings.Fields(strings.TrimSpace(t.req.Message))[0], "/")
		if err := t.pub.Emit(protocol.EventStep, protocol.TokenData{Content: "Processing /" + name + " via AI..."}); err != nil {
			t.svc.log.Error("publish step", "turn", t.req.TurnID, "err", err)
		}
		return rest, false
	}
	t.streamReply(rep.Result)
	return "", true
}

func requiresAIText(message string) string {
	token := strings.Fields(strings.TrimSpace(message))[0]
	return "**" + token + " requires AI** — This command needs a working LLM connection.\n\nConfigure an API key in Settings > API Keys, then try again."
}

// streamReply streams text the way echo mode and commands do: split on
// single spaces, one token per piece with its trailing space, EchoDelay
// apart; then persists it and finishes with the zero-usage done.
func (t *turn) streamReply(text string) {
	pieces := strings.Split(text, " ")
	var timer *time.Timer
	for i, p := range pieces {
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
		tok := p + " "
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

// abort ends a streamed reply that was cancelled (or could not publish).
func (t *turn) abort() { t.abortWith(strings.TrimSuffix(t.produced.String(), " ")) }

// abortWith ends a cancelled turn: content (what was produced) is
// persisted with the reason, and the stream gets a terminal error so every
// follower stops.
func (t *turn) abortWith(content string) {
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

func (t *turn) persist(m protocol.Message) error {
	m.TurnID = t.req.TurnID
	_, err := storeRequest[protocol.AppendReply](t.svc, protocol.SubjStoreAppend, protocol.AppendRequest{SessionRef: t.ref(), Message: &m})
	if err != nil {
		return fmt.Errorf("turnrunner: persist %s message: %w", m.Role, err)
	}
	return nil
}

func (t *turn) finishError(message string) {
	t.finish(protocol.EventError, protocol.ErrorData{Message: message})
}

func (t *turn) finish(event string, data any) {
	if err := t.pub.Finish(event, data); err != nil {
		t.svc.log.Error("publish terminal event", "turn", t.req.TurnID, "event", event, "err", err)
	}
}
