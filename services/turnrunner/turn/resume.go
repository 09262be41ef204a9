package turn

import (
	"context"
	"errors"
	"time"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/telemetry"
	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/agentcontext"
	"github.com/waggle-os/core/services/turnrunner/ownership"
	"github.com/waggle-os/core/services/turnrunner/turnevents"
)

// resume continues a turn claimed from another runner, from what is
// durable: the turn's events (the path it took, the tokens the client
// already has, the agent's step and exec checkpoints) and the session
// store (the user message, finished tool calls, a final message the other
// runner stored just before it stopped).
func (t *Turn) resume() {
	log := t.logger()
	telemetry.TurnsStarted.WithLabelValues("resume").Inc()
	ctx, cancel := context.WithTimeout(t.ctx, 10*time.Second)
	lg, err := turnevents.ReadLog(ctx, t.deps.JS, t.req.TurnID)
	if err == nil {
		err = t.own.Place(ctx)
	}
	cancel()
	if err != nil {
		if t.silent() {
			return
		}
		// Most likely the bus (a cluster electing the stream's leader).
		// Nothing is published: without the checkpoint this runner does
		// not know the turn's next event number, and an end numbered
		// from 1 would be passed over by its followers. The lease stays
		// this runner's, which takes the turn back and resumes it again
		// (takeBack) once the lease has stood for a moment.
		log.Warn("read the checkpoint of a claimed turn; resuming it again shortly", "err", err)
		t.cancel(errCheckpointUnread)
		return
	}
	t.pub.ContinueAt(lg.Last)
	if lg.Ended {
		// It had ended; only the clean-up was left.
		t.finished = true
		return
	}
	// Approvals the other runner was waiting for can no longer let
	// anything run; a call that still needs one asks again.
	t.cancelApprovals()
	if err := t.pub.Emit(protocol.EventStep, protocol.TokenData{Content: protocol.StepResumed}); err != nil {
		log.Error("publish step", "err", err)
	}
	if !t.own.Placed() {
		// No place in the queue (see Place): it joins again, at the end.
		ctx, cancel := context.WithTimeout(context.Background(), joinWait)
		_, err := t.own.Join(ctx, ownership.Behind)
		cancel()
		if err != nil {
			log.Error("rejoin the session's queue", "err", err)
			t.finishError("Something went wrong. Try sending your message again.")
			return
		}
	}
	if !t.own.Holds() && !t.waitQuietly() {
		return
	}
	msgs, tools, err := t.turnHistory()
	if err != nil {
		log.Error("load the history of a claimed turn", "err", err)
		t.finishError("Could not load this conversation. Try sending your message again.")
		return
	}
	var user, final *protocol.Message
	for i := range msgs {
		switch msgs[i].Role {
		case protocol.RoleUser:
			user = &msgs[i]
		case protocol.RoleAssistant:
			final = &msgs[i]
		}
	}
	if final != nil {
		t.endStored(*final, lg, tools)
		return
	}
	if user == nil {
		if err := t.persist(protocol.Message{Role: protocol.RoleUser, Content: t.req.Message}); err != nil {
			log.Error("persist user message", "err", err)
			t.finishError("Could not save your message. Try sending it again.")
			return
		}
	}
	switch {
	case lg.Path == nil:
		t.decide()
	case lg.Path.Path == protocol.TurnPathAgent:
		t.setPath(protocol.TurnPathAgent)
		t.runAgent(lg.Path.Prompt, &agent.Resume{Content: lg.Text, Steps: lg.Steps, Executing: lg.Execs})
	default:
		t.setPath(lg.Path.Path)
		t.streamReply(lg.Path.Text, lg.Tokens)
	}
}

// waitQuietly waits for the session like a queued turn (the client saw
// the waiting step already).
func (t *Turn) waitQuietly() bool {
	if t.own.Wait(t.ctx) == nil {
		return true
	}
	if !t.silent() {
		t.finishError("The turn was cancelled.")
	}
	return false
}

// endStored finishes a turn whose final message the other runner stored
// before it stopped, without its terminal event.
func (t *Turn) endStored(final protocol.Message, lg turnevents.Log, tools []protocol.ToolEvent) {
	if final.Error != "" {
		msg := final.Error
		for _, cause := range []error{ErrClientGone, ErrCancelled, ErrAborted, ErrInterrupted, ErrShutdown} {
			if final.Error == cause.Error() {
				msg = "The turn was cancelled."
			}
		}
		t.finishError(msg)
		return
	}
	if lg.Path != nil && lg.Path.Path != protocol.TurnPathAgent {
		t.finish(protocol.EventDone, protocol.EchoDone{Content: final.Content, ToolsUsed: []string{}})
		return
	}
	res := agent.Result{Content: final.Content}
	if n := len(lg.Steps); n > 0 {
		last := lg.Steps[n-1]
		res.Model = last.Model
		res.Usage = agent.Usage{InputTokens: last.InputTokens, OutputTokens: last.OutputTokens}
	}
	for _, ev := range tools {
		if ev.Name != agent.AutoRecallTool {
			res.ToolsUsed = append(res.ToolsUsed, ev.Name)
		}
	}
	t.finish(protocol.EventDone, agent.DoneData(res))
}

// historyResendAfter is how long a claimed turn's history read waits for
// an answer before it is sent again (a read answers in milliseconds).
const historyResendAfter = 2 * time.Second

// turnHistory reads this turn's messages and tool events.
func (t *Turn) turnHistory() ([]protocol.Message, []protocol.ToolEvent, error) {
	// A read: sent again when unanswered (a request lost with a dying
	// cluster node, a store reconnecting to another node) instead of
	// failing the claimed turn after the whole store timeout.
	ctx, cancel := context.WithTimeout(t.ctx, t.deps.Config.StoreTimeout)
	defer cancel()
	rep, err := bus.CallResending(ctx, t.deps.Conn, protocol.ReadHistory,
		protocol.HistoryRequest{SessionRef: t.ref(), Tools: true}, bus.Resending{After: historyResendAfter, Unanswered: historyResendAfter})
	if err != nil {
		return nil, nil, err
	}
	msgs, tools := agentcontext.OfTurn(rep.Messages, rep.Tools, t.req.TurnID)
	return msgs, tools, nil
}

// cancelApprovals cancels whatever approval of this turn is still pending.
func (t *Turn) cancelApprovals() {
	_, err := bus.Call(context.Background(), t.deps.Conn, protocol.CancelTurnApprovals,
		protocol.ApprovalCancelTurnRequest{TurnID: t.req.TurnID}, bus.Within(t.deps.Config.StoreTimeout))
	if err != nil && !errors.Is(err, protocol.ErrUnavailable) {
		t.logger().Warn("cancel the approvals of a claimed turn", "err", err)
	}
}
