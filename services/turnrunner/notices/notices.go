// Package notices is what a turn tells its user besides the reply: desktop
// notifications for a user who is not watching (a turn ended, an approval
// waits, a workflow was captured) and the warning of a workspace that spent
// its budget.
package notices

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

// Notification texts.
const (
	finishedTitle = "Agent finished"
	failedTitle   = "Agent stopped"
	approvalTitle = "Approval needed"
	// WorkflowCapturedTitle titles both the stream's notification event
	// and the desktop notification of a captured workflow.
	WorkflowCapturedTitle = "Pattern detected"
	workflowCapturedType  = "workflow_captured"
	bodyMaxRunes          = 160
)

// Publisher publishes a runner's desktop notifications
// (protocol.Notifications) on core NATS; the gateways keep the history.
type Publisher struct {
	Conn *nats.Conn
	Log  *slog.Logger
}

// Notify publishes one notification for req's user. A lost notification
// is logged, never the turn's failure.
func (p Publisher) Notify(req protocol.TurnRequest, category, title, body string) {
	n := protocol.Notification{
		ID: protocol.NewUUID(), Type: "notification", Title: title, Body: shorten(body, bodyMaxRunes),
		Category: category, Timestamp: protocol.Timestamp(time.Now()), Workspace: req.Workspace,
		Session: req.Session, User: req.User,
	}
	if err := bus.Publish(p.Conn, protocol.Notifications, n); err != nil {
		p.Log.Warn("publish notification", "turn", req.TurnID, "err", err)
	}
}

// TurnEnded announces the end of req's turn, whose terminal event carried
// data: an error's message, or that the reply is ready.
func (p Publisher) TurnEnded(req protocol.TurnRequest, data any) {
	if d, failed := data.(protocol.ErrorData); failed {
		p.Notify(req, protocol.NotifyAgent, failedTitle, d.Message)
		return
	}
	p.Notify(req, protocol.NotifyAgent, finishedTitle, "Your reply in "+req.Workspace+" is ready.")
}

// ApprovalWaiting announces that tool waits for the user's approval.
func (p Publisher) ApprovalWaiting(req protocol.TurnRequest, tool string) {
	p.Notify(req, protocol.NotifyApproval, approvalTitle, tool+" is waiting for your approval in "+req.Workspace+".")
}

// WorkflowCaptured announces a workflow pattern seen for the first time.
func (p Publisher) WorkflowCaptured(req protocol.TurnRequest, name string) {
	p.Notify(req, protocol.NotifyWorkflow, WorkflowCapturedTitle, WorkflowCapturedMessage(name))
}

// NotificationData is the data of a notification event in a turn's
// stream.
type NotificationData struct {
	Type    string                   `json:"type"`
	Title   string                   `json:"title"`
	Message string                   `json:"message"`
	Pattern protocol.WorkflowPattern `json:"pattern"`
}

// Workflow is the stream's notification of a captured pattern.
func Workflow(p protocol.WorkflowPattern) NotificationData {
	return NotificationData{Type: workflowCapturedType, Title: WorkflowCapturedTitle, Message: WorkflowCapturedMessage(p.Name), Pattern: p}
}

// WorkflowCapturedMessage is the notifications' message for a pattern.
func WorkflowCapturedMessage(name string) string {
	return "Detected repeating workflow: " + name + ". Save as a reusable skill?"
}

// BudgetWarning is the step of a workspace that spent its budget
// (reference §1.9 (1)), or "" while it has not.
func BudgetWarning(spent, budget float64) string {
	if budget <= 0 || spent < budget {
		return ""
	}
	return fmt.Sprintf("\u26a0\ufe0f Budget limit reached ($%.2f / $%.2f). Responses may be limited.", spent, budget)
}

// WorkspaceBudget is the budget warning of workspace, from its recorded
// spend (the usage ledger since the last cost reset) asked of the session
// store within timeout; "" under budget, without one, or when the ledger
// cannot be read (the turn runs either way).
func WorkspaceBudget(ctx context.Context, conn *nats.Conn, timeout time.Duration, log *slog.Logger, workspace string, budget float64) string {
	if workspace == "default" || budget <= 0 {
		return ""
	}
	sum, err := bus.Call(ctx, conn, protocol.SummarizeUsage, protocol.UsageSummaryRequest{Workspace: workspace}, bus.Within(timeout))
	if err != nil {
		if !errors.Is(err, protocol.ErrUnavailable) {
			log.Warn("workspace spend unavailable; no budget warning", "err", err)
		}
		return ""
	}
	return BudgetWarning(sum.EstimatedCost, budget)
}

// shorten cuts s to at most n runes, with an ellipsis.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
