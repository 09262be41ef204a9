package sessionstore

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/sessions"
	"github.com/waggle-os/core/services/sessionstore/workspaces"
)

// Router is the Store the service serves from: it places each workspace in
// one of two stores and sends every request to the store holding it.
//
// A workspace lives where it was created: in the team store (PostgreSQL)
// when it was created with a teamId (or when every workspace goes there),
// else in the personal store (JSONL). Later patches never move it. A
// workspace unknown to the team store — including ids no workspace has
// yet, which chats may use ad hoc — belongs to the personal store, except
// in all-team mode. Listings merge both stores.
type Router struct {
	personal Store
	team     Store // nil: no team store
	allTeam  bool

	// createMu keeps two creates in different stores from picking one id.
	createMu sync.Mutex
}

// NewRouter returns a router over personal and team (nil when there is no
// team store). allTeam sends everything, personal workspaces included, to
// team; personal is then not consulted at all.
func NewRouter(personal, team Store, allTeam bool) *Router {
	return &Router{personal: personal, team: team, allTeam: allTeam && team != nil}
}

var _ Store = (*Router)(nil)

// pick returns the store holding workspace ws.
func (r *Router) pick(ctx context.Context, ws string) (Store, error) {
	if r.team == nil {
		return r.personal, nil
	}
	if r.allTeam {
		return r.team, nil
	}
	ok, err := r.team.WorkspaceExists(ctx, ws)
	if err != nil {
		return nil, err
	}
	if ok {
		return r.team, nil
	}
	return r.personal, nil
}

// stores are the stores a listing merges.
func (r *Router) stores() []Store {
	switch {
	case r.team == nil:
		return []Store{r.personal}
	case r.allTeam:
		return []Store{r.team}
	}
	return []Store{r.personal, r.team}
}

// EnsureDefault implements Store: the default workspace is personal.
func (r *Router) EnsureDefault(ctx context.Context) error {
	if r.allTeam {
		return r.team.EnsureDefault(ctx)
	}
	return r.personal.EnsureDefault(ctx)
}

// WorkspaceExists implements Store.
func (r *Router) WorkspaceExists(ctx context.Context, id string) (bool, error) {
	for _, s := range r.stores() {
		if ok, err := s.WorkspaceExists(ctx, id); err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// GetWorkspace implements Store.
func (r *Router) GetWorkspace(ctx context.Context, id string) (workspaces.Doc, error) {
	s, err := r.pick(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.GetWorkspace(ctx, id)
}

// ListWorkspaces implements Store.
func (r *Router) ListWorkspaces(ctx context.Context) ([]workspaces.Doc, error) {
	var all []workspaces.Doc
	for _, s := range r.stores() {
		docs, err := s.ListWorkspaces(ctx)
		if err != nil {
			return nil, err
		}
		all = append(all, docs...)
	}
	if all == nil {
		all = []workspaces.Doc{}
	}
	workspaces.SortDocs(all)
	return all, nil
}

// CreateWorkspace implements Store: a workspace with a teamId goes to the
// team store when there is one.
func (r *Router) CreateWorkspace(ctx context.Context, fields workspaces.Doc, taken func(string) (bool, error)) (workspaces.Doc, error) {
	if r.team == nil {
		return r.personal.CreateWorkspace(ctx, fields, taken)
	}
	if r.allTeam {
		return r.team.CreateWorkspace(ctx, fields, taken)
	}
	target, other := r.personal, r.team
	var teamID string
	if json.Unmarshal(fields["teamId"], &teamID) == nil && strings.TrimSpace(teamID) != "" {
		target, other = r.team, r.personal
	}
	r.createMu.Lock()
	defer r.createMu.Unlock()
	return target.CreateWorkspace(ctx, fields, func(id string) (bool, error) {
		if ok, err := other.WorkspaceExists(ctx, id); err != nil || ok {
			return ok, err
		}
		if taken == nil {
			return false, nil
		}
		return taken(id)
	})
}

// UpdateWorkspace implements Store.
func (r *Router) UpdateWorkspace(ctx context.Context, id string, fields workspaces.Doc) (workspaces.Doc, error) {
	s, err := r.pick(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.UpdateWorkspace(ctx, id, fields)
}

// DeleteWorkspace implements Store.
func (r *Router) DeleteWorkspace(ctx context.Context, id string) ([]string, error) {
	s, err := r.pick(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.DeleteWorkspace(ctx, id)
}

// ListSessions implements Store.
func (r *Router) ListSessions(ctx context.Context, req protocol.SessionListRequest) ([]protocol.SessionInfo, error) {
	s, err := r.pick(ctx, req.Workspace)
	if err != nil {
		return nil, err
	}
	return s.ListSessions(ctx, req)
}

// RecentSessions implements Store.
func (r *Router) RecentSessions(ctx context.Context, req protocol.SessionListRequest) ([]protocol.SessionInfo, error) {
	s, err := r.pick(ctx, req.Workspace)
	if err != nil {
		return nil, err
	}
	return s.RecentSessions(ctx, req)
}

// SessionDigests implements Store.
func (r *Router) SessionDigests(ctx context.Context, ws string, since time.Time) ([]protocol.SessionInfo, error) {
	s, err := r.pick(ctx, ws)
	if err != nil {
		return nil, err
	}
	return s.SessionDigests(ctx, ws, since)
}

// SearchSessions implements Store.
func (r *Router) SearchSessions(ctx context.Context, req protocol.SessionSearchRequest) ([]protocol.SessionSearchResult, error) {
	s, err := r.pick(ctx, req.Workspace)
	if err != nil {
		return nil, err
	}
	return s.SearchSessions(ctx, req)
}

// ExportSession implements Store.
func (r *Router) ExportSession(ctx context.Context, ref protocol.SessionRef) (string, error) {
	s, err := r.pick(ctx, ref.Workspace)
	if err != nil {
		return "", err
	}
	return s.ExportSession(ctx, ref)
}

// SessionTimeline implements Store.
func (r *Router) SessionTimeline(ctx context.Context, ref protocol.SessionRef) (json.RawMessage, error) {
	s, err := r.pick(ctx, ref.Workspace)
	if err != nil {
		return nil, err
	}
	return s.SessionTimeline(ctx, ref)
}

// CreateSession implements Store.
func (r *Router) CreateSession(ctx context.Context, req protocol.SessionCreateRequest) (protocol.SessionInfo, error) {
	s, err := r.pick(ctx, req.Workspace)
	if err != nil {
		return protocol.SessionInfo{}, err
	}
	return s.CreateSession(ctx, req)
}

// LocateSession implements Store: without a workspace, the first
// workspace in name order over both stores wins.
func (r *Router) LocateSession(ctx context.Context, loc protocol.SessionLocator) (protocol.SessionRef, error) {
	if loc.Workspace != "" {
		s, err := r.pick(ctx, loc.Workspace)
		if err != nil {
			return protocol.SessionRef{}, err
		}
		return s.LocateSession(ctx, loc)
	}
	var best protocol.SessionRef
	for _, s := range r.stores() {
		ref, err := s.LocateSession(ctx, loc)
		if errors.Is(err, sessions.ErrSessionNotFound) {
			continue
		}
		if err != nil {
			return protocol.SessionRef{}, err
		}
		if best.Workspace == "" || ref.Workspace < best.Workspace {
			best = ref
		}
	}
	if best.Workspace == "" {
		return protocol.SessionRef{}, sessions.ErrSessionNotFound
	}
	return best, nil
}

// RenameSession implements Store.
func (r *Router) RenameSession(ctx context.Context, ref protocol.SessionRef, title string) error {
	s, err := r.pick(ctx, ref.Workspace)
	if err != nil {
		return err
	}
	return s.RenameSession(ctx, ref, title)
}

// DeleteSession implements Store.
func (r *Router) DeleteSession(ctx context.Context, ref protocol.SessionRef) error {
	s, err := r.pick(ctx, ref.Workspace)
	if err != nil {
		return err
	}
	return s.DeleteSession(ctx, ref)
}

// SessionSummary implements Store.
func (r *Router) SessionSummary(ctx context.Context, ref protocol.SessionRef) (protocol.SessionSummary, error) {
	s, err := r.pick(ctx, ref.Workspace)
	if err != nil {
		return protocol.SessionSummary{}, err
	}
	return s.SessionSummary(ctx, ref)
}

// History implements Store.
func (r *Router) History(ctx context.Context, req protocol.HistoryRequest) (protocol.HistoryReply, error) {
	s, err := r.pick(ctx, req.Workspace)
	if err != nil {
		return protocol.HistoryReply{}, err
	}
	return s.History(ctx, req)
}

// Append implements Store.
func (r *Router) Append(ctx context.Context, req protocol.AppendRequest) (protocol.AppendReply, error) {
	s, err := r.pick(ctx, req.Workspace)
	if err != nil {
		return protocol.AppendReply{}, err
	}
	return s.Append(ctx, req)
}
