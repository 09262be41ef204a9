package sessionstore

import (
	"context"
	"fmt"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

// sessionBranch makes a branch of a session: a new session in the same
// workspace (so the same team and store) holding copies of the source's
// first At messages and the tool events of their turns, with branchOf in
// its meta line. The source is only read. The copy is appended line by
// line: a crash part-way leaves a shorter branch, never a changed source
// (docs/sessions.md#branches).
func (s *Service) sessionBranch(ctx context.Context, req protocol.SessionBranchRequest) (protocol.SessionInfo, error) {
	if err := validRef(req.SessionRef); err != nil {
		return protocol.SessionInfo{}, err
	}
	if _, err := s.store.LocateSession(ctx, protocol.SessionLocator{Workspace: req.Workspace, Session: req.Session}); err != nil {
		return protocol.SessionInfo{}, err
	}
	h, err := s.store.History(ctx, protocol.HistoryRequest{SessionRef: req.SessionRef, Tools: true})
	if err != nil {
		return protocol.SessionInfo{}, err
	}
	if req.At < 0 || req.At >= len(h.Messages) || h.Messages[req.At].Role != "user" {
		return protocol.SessionInfo{}, protocol.Errorf(protocol.Invalid, "at must be the index of a user message of the session (it has %d messages)", len(h.Messages))
	}
	info, err := s.store.CreateSession(ctx, protocol.SessionCreateRequest{
		Workspace: req.Workspace,
		BranchOf:  &protocol.SessionBranch{Session: req.Session, At: req.At},
	})
	if err != nil {
		return protocol.SessionInfo{}, err
	}
	ref := protocol.SessionRef{Workspace: req.Workspace, Session: info.ID}
	now := protocol.Timestamp(time.Now())
	kept := h.Messages[:req.At]
	turns := make(map[string]bool, len(kept))
	for _, m := range kept {
		if m.TurnID != "" {
			turns[m.TurnID] = true
		}
	}
	// Tool events go before their turn's reply, as the runner wrote them.
	tools := map[string][]protocol.ToolEvent{}
	for _, t := range h.Tools {
		if turns[t.TurnID] {
			tools[t.TurnID] = append(tools[t.TurnID], t)
		}
	}
	for _, m := range kept {
		if m.Role == "assistant" {
			for _, t := range tools[m.TurnID] {
				if t.Timestamp == "" {
					t.Timestamp = now
				}
				if _, err := s.store.Append(ctx, protocol.AppendRequest{SessionRef: ref, Tool: &t}); err != nil {
					return protocol.SessionInfo{}, fmt.Errorf("sessionstore: branch %s/%s: %w", req.Workspace, req.Session, err)
				}
			}
			delete(tools, m.TurnID)
		}
		if m.Timestamp == "" {
			m.Timestamp = now
		}
		if _, err := s.store.Append(ctx, protocol.AppendRequest{SessionRef: ref, Message: &m}); err != nil {
			return protocol.SessionInfo{}, fmt.Errorf("sessionstore: branch %s/%s: %w", req.Workspace, req.Session, err)
		}
	}
	info.MessageCount = len(kept)
	return info, nil
}
