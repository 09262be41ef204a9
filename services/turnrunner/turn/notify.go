package turn

import (
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/notices"
)

// alone reports whether the turn had a client once and has none now: the
// user walked away (a turn no one ever followed, such as a group member's,
// is not announced).
func (t *Turn) alone() bool {
	return t.followers != nil && t.followers.Followed() && t.followers.Count() == 0
}

// notices publishes the turn's desktop notifications.
func (t *Turn) notices() notices.Publisher {
	return notices.Publisher{Conn: t.deps.Conn, Log: t.deps.Log}
}

// notifyFinished announces a turn that ended while no client watched it.
func (t *Turn) notifyFinished(data any) {
	if !t.alone() || t.ctx.Err() != nil {
		// Watched, or cancelled (the user left with no resume grace, or
		// stopped it): nothing to announce.
		return
	}
	t.notices().TurnEnded(t.req, data)
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
		a.t.notices().ApprovalWaiting(a.t.req, d.ToolName)
	}
	return err
}
