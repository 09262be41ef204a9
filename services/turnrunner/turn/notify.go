package turn

import (
	"time"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

// Desktop notifications (protocol.Notifications): what a user who is not
// watching should hear about. Published on core NATS; the gateways keep
// the history.

// Notification texts.
const (
	finishedTitle     = "Agent finished"
	failedTitle       = "Agent stopped"
	approvalTitle     = "Approval needed"
	notifyBodyMaxRune = 160
)

// alone reports whether the turn had a client once and has none now: the
// user walked away (a turn no one ever followed, such as a group member's,
// is not announced).
func (t *Turn) alone() bool {
	return t.followers != nil && t.followers.Followed() && t.followers.Count() == 0
}

// notify publishes one notification for the turn's user.
func (t *Turn) notify(category, title, body string) {
	n := protocol.Notification{
		ID: protocol.NewUUID(), Type: "notification", Title: title, Body: shorten(body, notifyBodyMaxRune),
		Category: category, Timestamp: protocol.Timestamp(time.Now()), Workspace: t.req.Workspace,
		Session: t.req.Session, User: t.req.User,
	}
	if err := bus.Publish(t.deps.Conn, protocol.Notifications, n); err != nil {
		t.deps.Log.Warn("publish notification", "turn", t.req.TurnID, "err", err)
	}
}

// notifyFinished announces a turn that ended while no client watched it.
func (t *Turn) notifyFinished(data any) {
	if !t.alone() || t.ctx.Err() != nil {
		// Watched, or cancelled (the user left with no resume grace, or
		// stopped it): nothing to announce.
		return
	}
	if d, failed := data.(protocol.ErrorData); failed {
		t.notify(protocol.NotifyAgent, failedTitle, d.Message)
		return
	}
	t.notify(protocol.NotifyAgent, finishedTitle, "Your reply in "+t.req.Workspace+" is ready.")
}

// shorten cuts s to at most n runes, with an ellipsis.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// approvalNotifier is the approval gate's emitter: the turn's publisher,
// plus a notification when an approval waits and no client is attached
// to answer it.
type approvalNotifier struct{ t *Turn }

// Emit publishes one event of the gate, and notifies the user when it
// asks for an approval that no client is there to answer.
func (a approvalNotifier) Emit(event string, data any) error {
	err := a.t.pub.Emit(event, data)
	if d, ok := data.(protocol.ApprovalRequiredData); ok && event == protocol.EventApprovalRequired && a.t.alone() {
		a.t.notify(protocol.NotifyApproval, approvalTitle, d.ToolName+" is waiting for your approval in "+a.t.req.Workspace+".")
	}
	return err
}
