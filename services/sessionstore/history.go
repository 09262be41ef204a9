package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/digest"
	"github.com/waggle-os/core/services/sessionstore/jsonl"
)

func (s *Service) history(_ context.Context, req protocol.HistoryRequest) (protocol.HistoryReply, error) {
	if err := validRef(req.SessionRef); err != nil {
		return protocol.HistoryReply{}, err
	}
	data, _, err := s.files.Read(req.Workspace, req.Session)
	if errors.Is(err, jsonl.ErrNotFound) {
		return protocol.HistoryReply{Messages: []protocol.Message{}}, nil
	}
	if err != nil {
		return protocol.HistoryReply{}, fmt.Errorf("sessionstore: history %s/%s: %w", req.Workspace, req.Session, err)
	}
	f := digest.Parse(data)
	rep := protocol.HistoryReply{Messages: f.Messages}
	if rep.Messages == nil {
		rep.Messages = []protocol.Message{}
	}
	if req.Tools {
		rep.Tools = f.Tools
	}
	return rep, nil
}

func (s *Service) append(_ context.Context, req protocol.AppendRequest) (protocol.AppendReply, error) {
	if err := validRef(req.SessionRef); err != nil {
		return protocol.AppendReply{}, err
	}
	now := jsonl.Timestamp(time.Now())
	var line any
	switch {
	case req.Message != nil && req.Tool == nil:
		m := *req.Message
		if m.Role == "" {
			return protocol.AppendReply{}, protocol.Errorf(400, "message role is required")
		}
		if m.Timestamp == "" {
			m.Timestamp = now
		}
		line = m
	case req.Tool != nil && req.Message == nil:
		t := *req.Tool
		if t.Timestamp == "" {
			t.Timestamp = now
		}
		line = toolLine{Type: "tool", ToolEvent: t}
	default:
		return protocol.AppendReply{}, protocol.Errorf(400, "exactly one of message or tool is required")
	}
	if err := s.files.Append(req.Workspace, req.Session, line); err != nil {
		return protocol.AppendReply{}, fmt.Errorf("sessionstore: append %s/%s: %w", req.Workspace, req.Session, err)
	}
	s.sess.Invalidate(req.Workspace, req.Session)
	return protocol.AppendReply{Timestamp: now}, nil
}

// toolLine is a tool event as stored: the event's fields behind "type":"tool".
type toolLine struct {
	Type string `json:"type"`
	protocol.ToolEvent
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
	if err := publishJSON(s.nc, protocol.SubjSessionEvicted, protocol.SessionEvicted{SessionRef: ref}); err != nil {
		s.log.Warn("publish eviction failed", "workspace", ref.Workspace, "session", ref.Session, "err", err)
	}
}
