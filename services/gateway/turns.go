package gateway

import (
	"context"
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/sse"
	"github.com/waggle-os/core/services/gateway/internal/input"
	"github.com/waggle-os/core/services/gateway/internal/respond"
	"github.com/waggle-os/core/services/gateway/internal/teamauth"
)

var errTurnNotFound = &protocol.Error{Kind: protocol.NotFound, Message: "Turn not found"}

// turnID reads and checks the {turnId} URL parameter.
func turnID(r *http.Request) (string, error) {
	id := chi.URLParam(r, "turnId")
	if err := input.CheckSegment("turnId", id); err != nil {
		return "", err
	}
	return id, nil
}

// lookUpTurn asks the turn runners about turn id (protocol.LookupTurn):
// whether it exists, and its workspace. The runners own the turn's lease
// and read its events; the gateway reads neither.
func (s *Service) lookUpTurn(ctx context.Context, id string) (protocol.TurnInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	info, err := bus.Call(ctx, s.nc, protocol.LookupTurn, protocol.TurnInfoRequest{TurnID: id})
	if errors.Is(err, protocol.ErrUnavailable) {
		return info, errNoRunner
	}
	return info, err
}

// errNoRunner answers a question about a turn when no turn runner is up
// to answer it.
var errNoRunner = (&protocol.Error{Kind: protocol.Unavailable, Message: "No turn runner is available. Try again in a moment."}).WithCode("NO_RUNNER")

// authorizeTurn checks, on a team server, that the request's user may take
// action on the turn's workspace (read to follow, write to cancel).
// Another team's turn, or one whose workspace is not known, is 404.
func (s *Service) authorizeTurn(r *http.Request, workspace, action string) error {
	u, ok := teamauth.UserFrom(r.Context())
	if !ok {
		return nil
	}
	if workspace == "" {
		return errTurnNotFound
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	_, err := bus.Call(ctx, s.nc, protocol.Authorize,
		protocol.AuthorizeRequest{User: u.ID, Workspace: workspace, Action: action})
	return err
}

// turnEvents is GET /api/chat/turns/{turnId}/events: replay what the client
// missed (after Last-Event-ID or ?after=) and follow the live turn, on any
// gateway. Any number of clients may follow one turn.
func (s *Service) turnEvents(w http.ResponseWriter, r *http.Request) {
	id, err := turnID(r)
	if err != nil {
		respond.Error(w, s.log, err)
		return
	}
	after, _, err := sse.LastEventID(r)
	if err != nil {
		respond.Error(w, s.log, protocol.Errorf(protocol.Invalid, "Last-Event-ID must be a decimal event id"))
		return
	}
	if err := s.reachTurn(r, id, protocol.ActionRead); err != nil {
		respond.Error(w, s.log, err)
		return
	}
	s.relay(w, r, id, relaySource{after: after}, false)
}

// reachTurn checks that turn id exists and that the request may act on it.
func (s *Service) reachTurn(r *http.Request, id, action string) error {
	info, err := s.lookUpTurn(r.Context(), id)
	if err != nil {
		return err
	}
	if info.State == protocol.TurnUnknown {
		return errTurnNotFound
	}
	return s.authorizeTurn(r, info.Workspace, action)
}

// cancelTurnRoute is POST /api/chat/turns/{turnId}/cancel: stop a turn from
// anywhere. The turn persists what it produced and ends with an error event.
func (s *Service) cancelTurnRoute(w http.ResponseWriter, r *http.Request) {
	id, err := turnID(r)
	if err != nil {
		respond.Error(w, s.log, err)
		return
	}
	if err := s.reachTurn(r, id, protocol.ActionWrite); err != nil {
		respond.Error(w, s.log, err)
		return
	}
	s.cancelTurn(id, "user")
	respond.JSON(w, http.StatusOK, struct {
		OK     bool   `json:"ok"`
		TurnID string `json:"turnId"`
	}{true, id})
}

// abort is POST /api/agent/abort {workspaceId}: cancel every running turn
// of a workspace (the original web client calls it; the original server
// had no such route).
func (s *Service) abort(w http.ResponseWriter, r *http.Request) {
	// The body is decoded for its errors (malformed, too large); the
	// workspace is the one the authorization step resolved.
	if _, err := input.Decode(w, r, s.cfg.BodyLimit); err != nil {
		respond.Error(w, s.log, err)
		return
	}
	sc, _ := teamauth.ScopeFrom(r.Context())
	name, ws := sc.Field, sc.Workspace
	if name == "" {
		respond.Error(w, s.log, protocol.Errorf(protocol.Invalid, "workspaceId is required"))
		return
	}
	if err := input.CheckSegment(name, ws); err != nil {
		respond.Error(w, s.log, err)
		return
	}
	if err := bus.Publish(s.nc, protocol.WorkspaceAborts, protocol.AbortWorkspace{Workspace: ws}); err != nil {
		respond.Error(w, s.log, err)
		return
	}
	respond.JSON(w, http.StatusOK, struct {
		OK          bool   `json:"ok"`
		WorkspaceID string `json:"workspaceId"`
	}{true, ws})
}
