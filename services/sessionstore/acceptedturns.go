package sessionstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/waggle-os/core/libs/protocol"
)

// The store's record of accepted turns (libs/protocol/acceptedturns.go,
// the journal in sessionstore/acceptedturns). These endpoints are the
// bus's only, called by turn runners: no HTTP route reaches them.

// checkAccepted refuses an append whose Accepted is not the record of the
// turn whose user message it appends: a record for another turn, session
// or workspace would be answered later as an open turn of the wrong place.
func checkAccepted(req protocol.AppendRequest) error {
	acc := req.Accepted
	if err := validAcceptedTurn(*acc); err != nil {
		return err
	}
	r := acc.Request
	if req.Message == nil || req.Message.Role != "user" {
		return protocol.Errorf(protocol.Invalid, "an accepted turn is recorded with its user message only")
	}
	if req.Key != protocol.AppendKey(r.TurnID, "user") || r.Workspace != req.Workspace || r.Session != req.Session {
		return protocol.Errorf(protocol.Invalid, "the accepted turn does not match the appended message's turn or session")
	}
	if req.Message.TurnID != "" && req.Message.TurnID != r.TurnID {
		return protocol.Errorf(protocol.Invalid, "the accepted turn does not match the appended message's turn or session")
	}
	return nil
}

// validAcceptedTurn checks what a recorded turn must carry to be run
// again.
func validAcceptedTurn(rec protocol.AcceptedTurn) error {
	r := rec.Request
	if !protocol.ValidID(r.TurnID) || !protocol.ValidID(r.Workspace) || !protocol.ValidID(r.Session) {
		return protocol.Errorf(protocol.Invalid, "invalid turn, workspace or session id")
	}
	if r.Message == "" {
		return protocol.Errorf(protocol.Invalid, "the accepted turn has no message")
	}
	return nil
}

// repliedTurn is the turn whose reply req appends (its key is
// AppendKey(turn, "assistant")), or "".
func repliedTurn(req protocol.AppendRequest) string {
	if req.Message == nil {
		return ""
	}
	id, ok := strings.CutSuffix(req.Key, "/assistant")
	if !ok || !protocol.ValidID(id) {
		// A tool event's key (turn/tool/…) never passes ValidID.
		return ""
	}
	return id
}

// appendAccepted appends a turn's user message and records the turn as
// accepted and open. The record is written (no fsync) before the line is
// stored, so a turn whose user message is stored is in the record too
// whatever kills the process after; its fsync runs beside the line's
// (measured: 0.2 ms more after it, much less beside it, docs/sessions.md),
// and the reply waits for both, so a power cut after it loses neither.
func (s *Service) appendAccepted(ctx context.Context, req protocol.AppendRequest) (protocol.AppendReply, error) {
	if err := checkAccepted(req); err != nil {
		return protocol.AppendReply{}, err
	}
	if err := checkDeadline(ctx); err != nil {
		return protocol.AppendReply{}, err
	}
	turn := req.Accepted.Request.TurnID
	if err := s.turns.Record(*req.Accepted, false); err != nil {
		return protocol.AppendReply{}, fmt.Errorf("sessionstore: record accepted turn: %w", err)
	}
	synced := make(chan error, 1)
	go func() { synced <- s.turns.Sync() }()
	rep, err := s.store.Append(ctx, req)
	syncErr := <-synced
	if err != nil {
		// The runner ends the turn with this error: nothing is left to
		// recover.
		s.closeTurn(turn)
		return protocol.AppendReply{}, err
	}
	if syncErr != nil {
		return protocol.AppendReply{}, fmt.Errorf("sessionstore: record accepted turn: %w", syncErr)
	}
	return rep, nil
}

// closeTurn closes a recorded turn whose end is stored (or whose user
// message could not be); a failed close is logged only: OpenTurns finds
// the reply in the session's history and closes it then.
func (s *Service) closeTurn(turnID string) {
	if err := s.turns.Close(turnID); err != nil {
		s.log.Warn("close accepted turn", "turn", turnID, "err", err)
	}
}

// recordTurn records a turn that waits for its session, fsynced before it
// answers.
func (s *Service) recordTurn(ctx context.Context, rec protocol.AcceptedTurn) (protocol.RecordTurnReply, error) {
	if err := validAcceptedTurn(rec); err != nil {
		return protocol.RecordTurnReply{}, err
	}
	if err := checkDeadline(ctx); err != nil {
		return protocol.RecordTurnReply{}, err
	}
	if err := s.turns.Record(rec, true); err != nil {
		return protocol.RecordTurnReply{}, fmt.Errorf("sessionstore: record turn: %w", err)
	}
	return protocol.RecordTurnReply{}, nil
}

// closeTurnRequest closes a recorded turn that ended without a reply,
// fsynced before it answers: no reply in the history would tell a
// restarted runner that this turn ended, so a close lost with a power cut
// would run a cancelled turn. A turn that is not open is already closed:
// nothing to do.
func (s *Service) closeTurnRequest(_ context.Context, req protocol.CloseTurnRequest) (protocol.CloseTurnReply, error) {
	if err := validRef(req.SessionRef); err != nil {
		return protocol.CloseTurnReply{}, err
	}
	if !protocol.ValidID(req.TurnID) {
		return protocol.CloseTurnReply{}, protocol.Errorf(protocol.Invalid, "invalid turn id")
	}
	if rec, ok := s.turns.Lookup(req.TurnID); ok && (rec.Request.Workspace != req.Workspace || rec.Request.Session != req.Session) {
		return protocol.CloseTurnReply{}, protocol.Errorf(protocol.Invalid, "the turn is not in this session")
	}
	if err := s.turns.Close(req.TurnID); err != nil {
		return protocol.CloseTurnReply{}, fmt.Errorf("sessionstore: close turn: %w", err)
	}
	if err := s.turns.Sync(); err != nil {
		return protocol.CloseTurnReply{}, fmt.Errorf("sessionstore: close turn: %w", err)
	}
	return protocol.CloseTurnReply{}, nil
}

// openTurns lists the open turns, by workspace, session and place. A turn
// whose reply is in its session's history ended and its close was lost in
// a crash: it is closed now and left out.
func (s *Service) openTurns(ctx context.Context, _ protocol.OpenTurnsRequest) (protocol.OpenTurnsReply, error) {
	recs := s.turns.Open()
	slices.SortFunc(recs, func(a, b protocol.AcceptedTurn) int {
		return cmp.Or(
			cmp.Compare(a.Request.Workspace, b.Request.Workspace),
			cmp.Compare(a.Request.Session, b.Request.Session),
			cmp.Compare(a.Place, b.Place),
			cmp.Compare(a.Request.TurnID, b.Request.TurnID))
	})
	out := make([]protocol.AcceptedTurn, 0, len(recs))
	for i := 0; i < len(recs); {
		ref := protocol.SessionRef{Workspace: recs[i].Request.Workspace, Session: recs[i].Request.Session}
		end := i + 1
		for end < len(recs) && recs[end].Request.Workspace == ref.Workspace && recs[end].Request.Session == ref.Session {
			end++
		}
		replied, err := s.repliedTurns(ctx, ref)
		if err != nil {
			return protocol.OpenTurnsReply{}, err
		}
		for _, rec := range recs[i:end] {
			if _, ok := replied[rec.Request.TurnID]; ok {
				s.closeTurn(rec.Request.TurnID)
				continue
			}
			out = append(out, rec)
		}
		i = end
	}
	return protocol.OpenTurnsReply{Turns: out}, nil
}

// repliedTurns is the set of turns with an assistant message in ref's
// history (JSONL or PostgreSQL, wherever the session lives).
func (s *Service) repliedTurns(ctx context.Context, ref protocol.SessionRef) (map[string]struct{}, error) {
	h, err := s.store.History(ctx, protocol.HistoryRequest{SessionRef: ref})
	if err != nil {
		return nil, fmt.Errorf("sessionstore: open turns of %s/%s: %w", ref.Workspace, ref.Session, err)
	}
	out := map[string]struct{}{}
	for _, m := range h.Messages {
		if m.Role == "assistant" && m.TurnID != "" {
			out[m.TurnID] = struct{}{}
		}
	}
	return out, nil
}
