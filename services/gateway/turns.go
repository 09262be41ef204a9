package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/sse"
	"github.com/waggle-os/core/services/gateway/internal/httpx"
)

var errTurnNotFound = &protocol.Error{Status: http.StatusNotFound, Message: "Turn not found"}

// turnID reads and checks the {turnId} URL parameter.
func turnID(r *http.Request) (string, error) {
	id := chi.URLParam(r, "turnId")
	if err := httpx.CheckSegment("turnId", id); err != nil {
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
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	return err == nil, err
}

// turnEvents is GET /api/chat/turns/{turnId}/events: replay what the client
// missed (after Last-Event-ID or ?after=) and follow the live turn, on any
// gateway. Any number of clients may follow one turn.
func (s *Service) turnEvents(w http.ResponseWriter, r *http.Request) {
	id, err := turnID(r)
	if err != nil {
		httpx.WriteError(w, s.log, err)
		return
	}
	after, _, err := sse.LastEventID(r)
	if err != nil {
		httpx.WriteError(w, s.log, protocol.Errorf(http.StatusBadRequest, "Last-Event-ID must be a decimal event id"))
		return
	}
	ok, err := s.turnExists(r.Context(), id)
	if err != nil {
		httpx.WriteError(w, s.log, err)
		return
	}
	if !ok {
		httpx.WriteError(w, s.log, errTurnNotFound)
		return
	}
	s.relay(w, r, id, relaySource{after: after}, false)
}

// cancelTurnRoute is POST /api/chat/turns/{turnId}/cancel: stop a turn from
// anywhere. The turn persists what it produced and ends with an error event.
func (s *Service) cancelTurnRoute(w http.ResponseWriter, r *http.Request) {
	id, err := turnID(r)
	if err != nil {
		httpx.WriteError(w, s.log, err)
		return
	}
	ok, err := s.turnExists(r.Context(), id)
	if err != nil {
		httpx.WriteError(w, s.log, err)
		return
	}
	if !ok {
		httpx.WriteError(w, s.log, errTurnNotFound)
		return
	}
	s.cancelTurn(id, "user")
	httpx.WriteJSON(w, http.StatusOK, struct {
		OK     bool   `json:"ok"`
		TurnID string `json:"turnId"`
	}{true, id})
}

// abort is POST /api/agent/abort {workspaceId}: cancel every running turn
// of a workspace (the original web client calls it; the original server
// had no such route).
func (s *Service) abort(w http.ResponseWriter, r *http.Request) {
	f, err := httpx.DecodeBody(w, r, s.cfg.BodyLimit)
	if err != nil {
		httpx.WriteError(w, s.log, err)
		return
	}
	name, ws, err := aliased(f, "workspaceId", "workspace")
	if err != nil {
		httpx.WriteError(w, s.log, err)
		return
	}
	if name == "" {
		httpx.WriteError(w, s.log, protocol.Errorf(http.StatusBadRequest, "workspaceId is required"))
		return
	}
	if err := httpx.CheckSegment(name, ws); err != nil {
		httpx.WriteError(w, s.log, err)
		return
	}
	body, _ := json.Marshal(protocol.AbortWorkspace{Workspace: ws})
	if err := s.nc.Publish(protocol.SubjTurnAbortWorkspace, body); err != nil {
		httpx.WriteError(w, s.log, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, struct {
		OK          bool   `json:"ok"`
		WorkspaceID string `json:"workspaceId"`
	}{true, ws})
}
