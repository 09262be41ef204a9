package agentcontext

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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
	// Persona is the persona the turn runs as: the request's, else the
	// workspace's.
	Persona Persona
	// Recall is the auto-recall of the turn's message.
	Recall *Recall
}

// Inputs reads everything the turn needs before its model is called in
// one request to the session store (protocol.LoadTurnContext): the
// session's history, the workspace's config, the prompt's context, the
// persona, the recall for the turn's message and (only when a daily
// budget can switch models) today's spend. Only the history is required;
// the rest degrades to "none".
func (l Loader) Inputs(ctx context.Context, mc agent.ModelConfig) (Inputs, error) {
	req := protocol.TurnContextRequest{SessionRef: l.ref(), User: l.Req.User, Preload: true,
		Knowledge: keyKnowledgeEntities, Persona: l.Req.Persona}
	if l.Req.Message != "" && !protocol.IsSlashCommand(l.Req.Message) {
		// A command's prompt is only known once the command ran: its
		// recall is asked then.
		req.Recall = &protocol.TurnRecallRequest{Query: l.Req.Message}
	}
	if mc.DailyBudget > 0 && mc.BudgetModel != "" {
		req.UsageSince = startOfDayUTC(time.Now()).Format(time.RFC3339)
	}
	rep, err := read(ctx, l.Store, protocol.LoadTurnContext, req)
	if errors.Is(err, protocol.ErrUnavailable) {
		// No store answers the request: an older store during an
		// upgrade, or none at all. The history and the workspace's config
		// keep the turn going (the prompt goes without the rest).
		rep, err = l.historyOnly(ctx)
	}
	if err != nil {
		return Inputs{}, fmt.Errorf("agentcontext: context of %s/%s: %w", l.Req.Workspace, l.Req.Session, err)
	}
	if len(rep.Unavailable) > 0 && ctx.Err() == nil {
		l.Log.Warn("turn context unavailable; prompt built without it", "parts", rep.Unavailable)
	}
	var in Inputs
	in.History, in.HistoryTools = withoutTurn(rep.History.Messages, rep.History.Tools, l.Req.TurnID)
	_, in.TurnTools = OfTurn(rep.History.Messages, rep.History.Tools, l.Req.TurnID)
	if rep.Workspace != nil {
		in.Workspace = *rep.Workspace
	}
	if rep.Usage != nil {
		in.Spent = rep.Usage.EstimatedCost
	}
	in.Context = contextOf(rep)
	in.Persona = personaOf(cmp.Or(l.Req.Persona, in.Workspace.Persona), rep.Persona)
	if req.Recall != nil {
		in.Recall = &Recall{Query: req.Recall.Query}
		if rep.Missing(protocol.TurnContextRecall) {
			in.Recall.Err = errRecall
		} else {
			in.Recall.Frames = append(rep.RecallWorkspace, rep.RecallPersonal...)
		}
	}
	return in, nil
}

// historyOnly reads the history and the workspace's config with the
// separate endpoints, for a store that does not answer LoadTurnContext.
func (l Loader) historyOnly(ctx context.Context) (protocol.TurnContext, error) {
	h, err := readRequired(ctx, l.Store, protocol.ReadHistory, protocol.HistoryRequest{SessionRef: l.ref(), Tools: true})
	if err != nil {
		return protocol.TurnContext{}, err
	}
	l.Log.Warn("session store does not answer the turn's context; prompt built from the history only")
	out := protocol.TurnContext{History: h}
	if ws, err := read(ctx, l.Store, protocol.GetWorkspace, protocol.WorkspaceRequest{Workspace: l.Req.Workspace}); err == nil {
		out.Workspace = &ws
	}
	return out, nil
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
