package sessionstore

import (
	"context"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/sessions"
)

func (s *Service) sessionList(ctx context.Context, req protocol.SessionListRequest) (protocol.SessionListReply, error) {
	if !protocol.ValidID(req.Workspace) {
		return protocol.SessionListReply{}, protocol.Errorf(protocol.Invalid, "invalid workspace id")
	}
	infos, err := s.store.ListSessions(ctx, req)
	return protocol.SessionListReply{Sessions: infos}, err
}

func (s *Service) sessionSearch(ctx context.Context, req protocol.SessionSearchRequest) (protocol.SessionSearchReply, error) {
	if !protocol.ValidID(req.Workspace) {
		return protocol.SessionSearchReply{}, protocol.Errorf(protocol.Invalid, "invalid workspace id")
	}
	rs, err := s.store.SearchSessions(ctx, req)
	return protocol.SessionSearchReply{Results: rs}, err
}

func (s *Service) sessionExport(ctx context.Context, req protocol.SessionRef) (protocol.SessionExportReply, error) {
	if err := validRef(req); err != nil {
		return protocol.SessionExportReply{}, err
	}
	md, err := s.store.ExportSession(ctx, req)
	return protocol.SessionExportReply{Markdown: md}, err
}

func (s *Service) sessionTimeline(ctx context.Context, req protocol.SessionRef) (protocol.SessionTimelineReply, error) {
	if err := validRef(req); err != nil {
		return protocol.SessionTimelineReply{}, err
	}
	evs, err := s.store.SessionTimeline(ctx, req)
	return protocol.SessionTimelineReply{Events: evs}, err
}

func (s *Service) sessionCreate(ctx context.Context, req protocol.SessionCreateRequest) (protocol.SessionInfo, error) {
	if !protocol.ValidID(req.Workspace) {
		return protocol.SessionInfo{}, protocol.Errorf(protocol.Invalid, "invalid workspace id")
	}
	return s.store.CreateSession(ctx, req)
}

func (s *Service) sessionRename(ctx context.Context, req protocol.SessionRenameRequest) (protocol.SessionRenameReply, error) {
	if err := validLocator(req.SessionLocator); err != nil {
		return protocol.SessionRenameReply{}, err
	}
	if req.Title == "" {
		return protocol.SessionRenameReply{}, sessions.ErrTitleRequired
	}
	ref, err := s.store.LocateSession(ctx, req.SessionLocator)
	if err != nil {
		return protocol.SessionRenameReply{}, err
	}
	if err := s.store.RenameSession(ctx, ref, req.Title); err != nil {
		return protocol.SessionRenameReply{}, err
	}
	return protocol.SessionRenameReply{ID: ref.Session, Title: req.Title}, nil
}

// sessionDelete removes the session, then tells every runner to drop its
// cached copy, so a later turn cannot resurrect the old history.
func (s *Service) sessionDelete(ctx context.Context, req protocol.SessionLocator) (protocol.DeletedReply, error) {
	if err := validLocator(req); err != nil {
		return protocol.DeletedReply{}, err
	}
	ref, err := s.store.LocateSession(ctx, req)
	if err != nil {
		return protocol.DeletedReply{}, err
	}
	if err := s.store.DeleteSession(ctx, ref); err != nil {
		return protocol.DeletedReply{}, err
	}
	s.publishEvicted(ref)
	return protocol.DeletedReply{Deleted: true}, nil
}

func (s *Service) sessionSummary(ctx context.Context, req protocol.SessionLocator) (protocol.SessionSummary, error) {
	if err := validLocator(req); err != nil {
		return protocol.SessionSummary{}, err
	}
	ref, err := s.store.LocateSession(ctx, req)
	if err != nil {
		return protocol.SessionSummary{}, err
	}
	return s.store.SessionSummary(ctx, ref)
}

func validLocator(loc protocol.SessionLocator) error {
	if !protocol.ValidID(loc.Session) || loc.Workspace != "" && !protocol.ValidID(loc.Workspace) {
		return protocol.Errorf(protocol.Invalid, "invalid workspace or session id")
	}
	return nil
}
