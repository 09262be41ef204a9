package turnrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/protocol"
)

// reapTimeout bounds the bucket and stream reads of one answer about a
// turn.
const reapTimeout = 5 * time.Second

// errCannotLook answers a question about a turn whose reads did not
// finish in time.
var errCannotLook = &protocol.Error{Kind: protocol.Unavailable, Message: "The turn cannot be looked at now."}

// turnInfo answers protocol.LookupTurn from what the runners own: the
// turn's lease (its owner and request) and its stored events (ended,
// waiting for an approval, and, once the lease is gone, the workspace in
// the turn's start marker). It reads the lease first: a runner stores the
// terminal event before it deletes the lease, so a turn is never seen
// with neither.
func (s *Service) turnInfo(ctx context.Context, req protocol.TurnInfoRequest) (protocol.TurnInfo, error) {
	if !protocol.ValidID(req.TurnID) {
		return protocol.TurnInfo{}, &protocol.Error{Kind: protocol.Invalid, Message: "invalid turn id"}
	}
	ctx, cancel := context.WithTimeout(ctx, reapTimeout)
	defer cancel()
	info, err := s.lookUpTurn(ctx, req.TurnID)
	if err != nil {
		s.log.Debug("look up a turn", "turn", req.TurnID, "err", err)
		return protocol.TurnInfo{}, errCannotLook
	}
	return info, nil
}

func (s *Service) lookUpTurn(ctx context.Context, turnID string) (protocol.TurnInfo, error) {
	info := protocol.TurnInfo{State: protocol.TurnUnknown}
	l, leased, err := s.own.Lookup(ctx, turnID)
	if err != nil {
		return info, fmt.Errorf("turnrunner: %w", err)
	}
	if leased {
		info.State, info.Runner, info.Workspace = protocol.TurnRunning, l.Runner, l.Request.Workspace
	}
	subj := protocol.TurnEvents(turnID)
	m, err := s.stream.GetLastMsgForSubject(ctx, subj)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		// Accepted and not published to yet, or taken over after a full
		// restart that lost its events: the lease says it all.
		return info, nil
	case err != nil:
		return info, fmt.Errorf("turnrunner: last event of %s: %w", turnID, err)
	}
	switch ev := m.Header.Get(protocol.HeaderEvent); {
	case protocol.IsTerminal(ev):
		info.State, info.Runner = protocol.TurnEnded, ""
	case ev == protocol.EventApprovalRequired:
		info.State = protocol.TurnPaused
	case !leased:
		// Events and no lease: its runner is finishing it, or it waits for
		// a runner to end it. Followers follow; nobody owns it.
		info.State = protocol.TurnRunning
	}
	if info.Workspace == "" {
		first, err := s.stream.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subj))
		if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return info, fmt.Errorf("turnrunner: first event of %s: %w", turnID, err)
		}
		var start protocol.StartMarker
		if err == nil && first.Header.Get(protocol.HeaderEvent) == protocol.EventStart && json.Unmarshal(first.Data, &start) == nil {
			info.Workspace = start.Workspace
		}
	}
	return info, nil
}
