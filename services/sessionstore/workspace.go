package sessionstore

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/workspaces"
)

func (s *Service) memorySave(_ context.Context, req protocol.MemorySaveRequest) (protocol.MemorySaveReply, error) {
	m, err := s.mem.Save(req.Workspace, req.Content, req.Tags)
	if err != nil {
		return protocol.MemorySaveReply{}, err
	}
	return protocol.MemorySaveReply{ID: m.ID}, nil
}

func (s *Service) memorySearch(_ context.Context, req protocol.MemorySearchRequest) (protocol.MemorySearchReply, error) {
	ms, err := s.mem.Search(req.Workspace, req.Query, req.Limit)
	if err != nil {
		return protocol.MemorySearchReply{}, err
	}
	if ms == nil {
		ms = []protocol.Memory{}
	}
	return protocol.MemorySearchReply{Memories: ms}, nil
}

// workspaceGet is the typed read other services use (model, persona…).
func (s *Service) workspaceGet(_ context.Context, req protocol.WorkspaceRequest) (protocol.Workspace, error) {
	doc, err := s.wss.Get(req.Workspace)
	if err != nil {
		return protocol.Workspace{}, err
	}
	return doc.Workspace(), nil
}

func (s *Service) workspaceList(_ context.Context, _ protocol.Empty) (protocol.WorkspaceListReply, error) {
	docs, err := s.wss.List()
	if err != nil {
		return protocol.WorkspaceListReply{}, err
	}
	out := protocol.WorkspaceListReply{Workspaces: make([]json.RawMessage, 0, len(docs))}
	for _, d := range docs {
		b, err := json.Marshal(d)
		if err != nil {
			return protocol.WorkspaceListReply{}, fmt.Errorf("sessionstore: encode workspace: %w", err)
		}
		out.Workspaces = append(out.Workspaces, b)
	}
	return out, nil
}

func (s *Service) workspaceDoc(_ context.Context, req protocol.WorkspaceRequest) (protocol.WorkspaceDocReply, error) {
	return docReply(s.wss.Get(req.Workspace))
}

func (s *Service) workspaceCreate(_ context.Context, req protocol.WorkspaceCreateRequest) (protocol.WorkspaceDocReply, error) {
	fields, err := decodeFields(req.Fields)
	if err != nil {
		return protocol.WorkspaceDocReply{}, err
	}
	return docReply(s.wss.Create(fields))
}

func (s *Service) workspaceUpdate(_ context.Context, req protocol.WorkspaceUpdateRequest) (protocol.WorkspaceDocReply, error) {
	fields, err := decodeFields(req.Fields)
	if err != nil {
		return protocol.WorkspaceDocReply{}, err
	}
	return docReply(s.wss.Update(req.Workspace, fields))
}

func (s *Service) workspaceDelete(_ context.Context, req protocol.WorkspaceRequest) (protocol.DeletedReply, error) {
	sessions, err := s.wss.Delete(req.Workspace)
	s.mem.Forget(req.Workspace)
	s.forgetWorkspace(req.Workspace)
	// Every runner drops what it caches of the removed sessions, even when
	// the removal failed halfway.
	for _, id := range sessions {
		s.publishEvicted(protocol.SessionRef{Workspace: req.Workspace, Session: id})
	}
	if err != nil {
		return protocol.DeletedReply{}, err
	}
	return protocol.DeletedReply{Deleted: true}, nil
}

func decodeFields(raw json.RawMessage) (workspaces.Doc, error) {
	fields := workspaces.Doc{}
	if len(raw) == 0 || string(raw) == "null" {
		return fields, nil
	}
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, protocol.Errorf(http.StatusBadRequest, "body must be a JSON object")
	}
	return fields, nil
}

func docReply(doc workspaces.Doc, err error) (protocol.WorkspaceDocReply, error) {
	if err != nil {
		return protocol.WorkspaceDocReply{}, err
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return protocol.WorkspaceDocReply{}, fmt.Errorf("sessionstore: encode workspace: %w", err)
	}
	return protocol.WorkspaceDocReply{Workspace: b}, nil
}
