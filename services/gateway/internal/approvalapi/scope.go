package approvalapi

import (
	"context"
	"net/http"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/teamauth"
)

// scope answers, on a team server, whether the request's user may act on
// a workspace's approvals. Locally (no user) everything is in scope. Pending
// approvals carry tool inputs, so another team's must stay invisible.
type scope struct {
	h     handlers
	r     *http.Request
	user  string
	cache map[string]error
}

func (h handlers) scope(r *http.Request) *scope {
	s := &scope{h: h, r: r, cache: map[string]error{}}
	if u, ok := teamauth.UserFrom(r.Context()); ok {
		s.user = u.ID
	}
	return s
}

// check returns nil when the user may take action on workspace, else the
// teams service's error (404 for another team's workspace, 403 for a
// viewer's write).
func (s *scope) check(workspace, action string) error {
	if s.user == "" {
		return nil
	}
	key := workspace + "\x00" + action
	if err, ok := s.cache[key]; ok {
		return err
	}
	ctx, cancel := context.WithTimeout(s.r.Context(), s.h.d.Timeout)
	defer cancel()
	_, err := bus.Call(ctx, s.h.d.NC, protocol.Authorize,
		protocol.AuthorizeRequest{User: s.user, Workspace: workspace, Action: action})
	s.cache[key] = err
	return err
}

// visible reports whether an item of workspace may be shown.
func (s *scope) visible(workspace string) bool { return s.check(workspace, protocol.ActionRead) == nil }

// findPending returns the pending approval id, or nil.
func (h handlers) findPending(r *http.Request, id string) (*protocol.PendingApproval, error) {
	ctx, cancel := context.WithTimeout(r.Context(), h.d.Timeout)
	defer cancel()
	rep, err := bus.Call(ctx, h.d.NC, protocol.ListPendingApprovals, protocol.Empty{})
	if err != nil {
		return nil, err
	}
	for i := range rep.Pending {
		if rep.Pending[i].RequestID == id {
			return &rep.Pending[i], nil
		}
	}
	return nil, nil
}
