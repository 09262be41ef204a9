package agentcontext

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
)

// Inputs is what a turn loads before the model is called.
type Inputs struct {
	// History is the session's messages and HistoryTools its tool
	// events, both without this turn's own.
	History      []protocol.Message
	HistoryTools []protocol.ToolEvent
	// Workspace is the workspace's settings (zero when unreadable).
	Workspace protocol.Workspace
	// Spent is today's spend, read only when a daily budget can switch
	// models.
	Spent float64
	// TurnTools are this turn's own tool events (a resumed turn's finished calls).
	TurnTools []protocol.ToolEvent
	// Context is the profile, preloaded frames and Workspace Now.
	Context Context
}

// Inputs reads the session's history, the workspace's config and
// (only when a daily budget can switch models) today's spend, concurrently.
// Only the history is required; the rest degrades to "none".
func (l Loader) Inputs(ctx context.Context, mc agent.ModelConfig) (Inputs, error) {
	var (
		in      Inputs
		histErr error
		wg      sync.WaitGroup
	)
	wg.Go(func() {
		rep, err := readRequired(ctx, l.Store, protocol.ReadHistory,
			protocol.HistoryRequest{SessionRef: l.ref(), Tools: true})
		if err != nil {
			histErr = fmt.Errorf("agentcontext: history of %s/%s: %w", l.Req.Workspace, l.Req.Session, err)
			return
		}
		in.History, in.HistoryTools = withoutTurn(rep.Messages, rep.Tools, l.Req.TurnID)
		_, in.TurnTools = OfTurn(rep.Messages, rep.Tools, l.Req.TurnID)
	})
	wg.Go(func() {
		ws, err := read(ctx, l.Store, protocol.GetWorkspace,
			protocol.WorkspaceRequest{Workspace: l.Req.Workspace})
		switch {
		case err == nil:
			in.Workspace = ws
		case errors.Is(err, protocol.ErrUnavailable) || protocol.KindOf(err) == protocol.NotFound:
		default:
			l.Log.Warn("workspace config unavailable; using defaults", "workspace", l.Req.Workspace, "err", err)
		}
	})
	wg.Go(func() { in.Context = l.Context(ctx) })
	if mc.DailyBudget > 0 && mc.BudgetModel != "" {
		wg.Go(func() {
			sum, err := read(ctx, l.Store, protocol.SummarizeUsage,
				protocol.UsageSummaryRequest{Since: startOfDayUTC(time.Now()).Format(time.RFC3339)})
			if err != nil {
				if !errors.Is(err, protocol.ErrUnavailable) {
					l.Log.Warn("usage summary unavailable; assuming nothing spent today", "err", err)
				}
				return
			}
			in.Spent = sum.EstimatedCost
		})
	}
	wg.Wait()
	return in, histErr
}

// withoutTurn drops the messages and tool events of turn turnID: the user
// message of the running turn is already on disk (persisted first) but is
// passed to the agent separately.
func withoutTurn(msgs []protocol.Message, evs []protocol.ToolEvent, turnID string) ([]protocol.Message, []protocol.ToolEvent) {
	outM := make([]protocol.Message, 0, len(msgs))
	for _, m := range msgs {
		if m.TurnID != turnID {
			outM = append(outM, m)
		}
	}
	var outT []protocol.ToolEvent
	for _, ev := range evs {
		if ev.TurnID != turnID {
			outT = append(outT, ev)
		}
	}
	return outM, outT
}

// OfTurn keeps only the messages and tool events of turn turnID.
func OfTurn(msgs []protocol.Message, evs []protocol.ToolEvent, turnID string) ([]protocol.Message, []protocol.ToolEvent) {
	var outM []protocol.Message
	for _, m := range msgs {
		if m.TurnID == turnID {
			outM = append(outM, m)
		}
	}
	var outT []protocol.ToolEvent
	for _, ev := range evs {
		if ev.TurnID == turnID {
			outT = append(outT, ev)
		}
	}
	return outM, outT
}

func startOfDayUTC(now time.Time) time.Time {
	y, m, d := now.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// ref is the turn's session.
func (l Loader) ref() protocol.SessionRef {
	return protocol.SessionRef{Workspace: l.Req.Workspace, Session: l.Req.Session}
}
