package sessionstore

import (
	"context"

	"github.com/waggle-os/core/libs/protocol"
)

func (s *Service) forgetWorkspace(ws string) { s.sess.ForgetWorkspace(ws) }

func (s *Service) sessionList(ctx context.Context, req protocol.SessionListRequest) (protocol.SessionListReply, error) {
	if !protocol.ValidID(req.Workspace) {
		return protocol.SessionListReply{}, protocol.Errorf(400, "invalid workspace id")
	}
	infos, err := s.sess.List(ctx, req.Workspace, req.HideEmpty)
	return protocol.SessionListReply{Sessions: infos}, err
}

func (s *Service) sessionSearch(ctx context.Context, req protocol.SessionSearchRequest) (protocol.SessionSearchReply, error) {
	if !protocol.ValidID(req.Workspace) {
		return protocol.SessionSearchReply{}, protocol.Errorf(400, "invalid workspace id")
	}
	rs, err := s.sess.Search(ctx, req.Workspace, req.Query, req.Limit)
	return protocol.SessionSearchReply{Results: rs}, err
}

func (s *Service) sessionExport(_ context.Context, req protocol.SessionRef) (protocol.SessionExportReply, error) {
	if err := validRef(req); err != nil {
		return protocol.SessionExportReply{}, err
	}
	md, err := s.sess.Export(req)
	return protocol.SessionExportReply{Markdown: md}, err
}

func (s *Service) sessionTimeline(_ context.Context, req protocol.SessionRef) (protocol.SessionTimelineReply, error) {
	if err := validRef(req); err != nil {
		return protocol.SessionTimelineReply{}, err
	}
	evs, err := s.sess.Timeline(req)
	return protocol.SessionTimelineReply{Events: evs}, err
}

func (s *Service) sessionCreate(_ context.Context, req protocol.SessionCreateRequest) (protocol.SessionInfo, error) {
	if !protocol.ValidID(req.Workspace) {
		return protocol.SessionInfo{}, protocol.Errorf(400, "invalid workspace id")
	}
	return s.sess.Create(req.Workspace, req.Title)
}

func (s *Service) sessionRename(_ context.Context, req protocol.SessionRenameRequest) (protocol.SessionRenameReply, error) {
	if err := validLocator(req.SessionLocator); err != nil {
		return protocol.SessionRenameReply{}, err
	}
	return s.sess.Rename(req.SessionLocator, req.Title)
}

// sessionDelete removes the file, then tells every runner to drop its
// cached copy, so a later turn cannot resurrect the old history.
func (s *Service) sessionDelete(_ context.Context, req protocol.SessionLocator) (protocol.DeletedReply, error) {
	if err := validLocator(req); err != nil {
		return protocol.DeletedReply{}, err
	}
	ref, err := s.sess.Delete(req)
	if err != nil {
		return protocol.DeletedReply{}, err
	}
	s.publishEvicted(ref)
	return protocol.DeletedReply{Deleted: true}, nil
}

func (s *Service) sessionSummary(_ context.Context, req protocol.SessionLocator) (protocol.SessionSummary, error) {
	if err := validLocator(req); err != nil {
		return protocol.SessionSummary{}, err
	}
	return s.sess.Summary(req)
}

func validLocator(loc protocol.SessionLocator) error {
	if !protocol.ValidID(loc.Session) || loc.Workspace != "" && !protocol.ValidID(loc.Workspace) {
		return protocol.Errorf(400, "invalid workspace or session id")
	}
	return nil
}
