package approval

import (
	"context"
	"errors"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

// announce tells whoever waits for approval e (the runner of its turn) that
// it reached its final state. The bucket is the record and the notice is
// only prompt: a waiter that misses it (reconnecting, or this process died
// between the write and the publish) reads the state with protocol.GetApprovalState.
func (s *Service) announce(e protocol.PendingApproval) {
	ev := protocol.ApprovalDecidedEvent{RequestID: e.RequestID, TurnID: e.TurnID, State: e.State}
	if err := bus.Publish(s.nc, protocol.ApprovalDecided(e.RequestID), ev); err != nil {
		s.log.Warn("announce approval decision", "request", e.RequestID, "state", e.State, "err", err)
	}
}

// state answers an approval's current state, so a waiter that subscribed to
// its decision learns one taken before it did.
func (s *Service) state(ctx context.Context, req protocol.ApprovalStateRequest) (protocol.ApprovalStateReply, error) {
	if !protocol.ValidID(req.RequestID) {
		return protocol.ApprovalStateReply{}, errNoPending
	}
	e, err := s.pending.get(ctx, req.RequestID)
	if errors.Is(err, errNoEntry) {
		return protocol.ApprovalStateReply{}, errNoPending
	}
	if err != nil {
		return protocol.ApprovalStateReply{}, err
	}
	return protocol.ApprovalStateReply{State: e.State}, nil
}
