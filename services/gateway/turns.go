package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/nats-io/nats.go/jetstream"

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

// turnExists reports whether the turn stream holds any event of the turn
// (events stay replayable for the stream's MaxAge).
func (s *Service) turnExists(ctx context.Context, id string) (bool, error) {
	st, err := s.js.Stream(ctx, protocol.StreamTurns)
	if err != nil {
		return false, err
	}
	_, err = st.GetLastMsgForSubject(ctx, protocol.TurnEvents(id))
	if !errors.Is(err, jetstream.ErrMsgNotFound) {
		return err == nil, err
	}
	// No event (yet, or any more): a turn with a lease still runs or will
	// be taken over — after a full restart its events before the crash are
	// gone, and a runner resumes it within seconds.
	kv, err := s.js.KeyValue(ctx, protocol.BucketTurnLeases)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	_, err = kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}

// authorizeTurn checks, on a team server, that the request's user may take
// action on the turn's workspace (read to follow, write to cancel); the
// workspace is in the turn's start marker. Another team's turn is 404.
func (s *Service) authorizeTurn(r *http.Request, id, action string) error {
	u, ok := teamauth.UserFrom(r.Context())
	if !ok {
		return nil
	}
	st, err := s.js.Stream(r.Context(), protocol.StreamTurns)
	if err != nil {
		return err
	}
	m, err := st.GetMsg(r.Context(), 1, jetstream.WithGetMsgSubject(protocol.TurnEvents(id)))
	if err != nil {
		return errTurnNotFound
	}
	var start protocol.StartMarker
	if m.Header.Get(protocol.HeaderEvent) != protocol.EventStart || json.Unmarshal(m.Data, &start) != nil || start.Workspace == "" {
		return errTurnNotFound
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	_, err = bus.Call(ctx, s.nc, protocol.Authorize,
		protocol.AuthorizeRequest{User: u.ID, Workspace: start.Workspace, Action: action})
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
	ok, err := s.turnExists(r.Context(), id)
	if err != nil {
		return err
	}
	if !ok {
		return errTurnNotFound
	}
	return s.authorizeTurn(r, id, action)
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
