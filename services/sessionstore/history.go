package sessionstore

import (
	"context"
	"time"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

func (s *Service) history(ctx context.Context, req protocol.HistoryRequest) (protocol.HistoryReply, error) {
	if err := validRef(req.SessionRef); err != nil {
		return protocol.HistoryReply{}, err
	}
	return s.store.History(ctx, req)
}

func (s *Service) append(ctx context.Context, req protocol.AppendRequest) (protocol.AppendReply, error) {
	if err := validRef(req.SessionRef); err != nil {
		return protocol.AppendReply{}, err
	}
	now := protocol.Timestamp(time.Now())
	switch {
	case req.Message != nil && req.Tool == nil:
		m := *req.Message
		if m.Role == "" {
			return protocol.AppendReply{}, protocol.Errorf(protocol.Invalid, "message role is required")
		}
		if m.Timestamp == "" {
			m.Timestamp = now
		}
		req.Message = &m
	case req.Tool != nil && req.Message == nil:
		t := *req.Tool
		if t.Timestamp == "" {
			t.Timestamp = now
		}
		req.Tool = &t
	default:
		return protocol.AppendReply{}, protocol.Errorf(protocol.Invalid, "exactly one of message or tool is required")
	}
	if len(req.Key) > protocol.MaxAppendKey {
		return protocol.AppendReply{}, protocol.Errorf(protocol.Invalid, "append key is too long")
	}
	store := s.store.Append
	if req.Accepted != nil {
		store = s.appendAccepted
	}
	rep, err := store(ctx, req)
	if err != nil {
		return protocol.AppendReply{}, err
	}
	if id := repliedTurn(req); id != "" && !rep.Duplicate {
		s.closeTurn(id)
	}
	if req.Message != nil && !rep.Duplicate {
		// Knowledge extraction runs in the background: the turn's done
		// never waits for it.
		s.knowledge.ObserveMessage(req.Workspace, *req.Message)
	}
	return rep, nil
}

func (s *Service) clear(_ context.Context, req protocol.ClearRequest) (protocol.ClearReply, error) {
	if err := validRef(req.SessionRef); err != nil {
		return protocol.ClearReply{}, err
	}
	// The store keeps no cache of its own yet; the broadcast tells every
	// runner to drop whatever it keeps for this session.
	s.publishEvicted(req.SessionRef)
	return protocol.ClearReply{Cleared: req.Session}, nil
}

func (s *Service) publishEvicted(ref protocol.SessionRef) {
	if err := bus.Publish(s.nc, protocol.SessionEvictions, protocol.SessionEvicted{SessionRef: ref}); err != nil {
		s.log.Warn("publish eviction failed", "workspace", ref.Workspace, "session", ref.Session, "err", err)
	}
}
