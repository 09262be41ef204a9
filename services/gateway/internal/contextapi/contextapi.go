// Package contextapi serves what the agent knows about the user and a
// workspace (docs/agent.md) with the original's shapes: the profile
// (GET/PUT /api/profile) and the workspace briefing
// (GET /api/workspaces/{id}/context), by asking the session store.
package contextapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/forward"
	"github.com/waggle-os/core/services/gateway/internal/input"
	"github.com/waggle-os/core/services/gateway/internal/respond"
	"github.com/waggle-os/core/services/gateway/internal/teamauth"
)

type api struct{ d forward.Deps }

// Mount adds the routes to r (mounted at /api).
func Mount(r chi.Router, d forward.Deps) {
	a := api{d}
	r.Get("/profile", a.getProfile)
	r.Put("/profile", a.putProfile)
	r.Get("/workspaces/{id}/context", a.workspaceContext)
}

// user is whose profile a request reaches: the signed-in user on a team
// server, the one local profile otherwise. Nobody names another's.
func user(r *http.Request) string {
	sc, _ := teamauth.ScopeFrom(r.Context())
	return sc.User
}

// GET /api/profile
func (a api) getProfile(w http.ResponseWriter, r *http.Request) {
	forward.Reply(a.d, w, r, http.StatusOK, protocol.GetProfile, protocol.ProfileRequest{User: user(r)})
}

// PUT /api/profile {partial profile}
func (a api) putProfile(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, a.readUpdate, protocol.UpdateProfile, http.StatusOK, nil)
}

// readUpdate decodes the body once, strictly: unknown keys and values of
// the wrong type are refused with a 400 naming them.
func (a api) readUpdate(w http.ResponseWriter, r *http.Request) (protocol.ProfileUpdateRequest, error) {
	req := protocol.ProfileUpdateRequest{User: user(r)}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.d.BodyLimit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return req, &respond.RequestError{Kind: protocol.TooLarge, Code: "FST_ERR_CTP_BODY_TOO_LARGE", Message: "Request body is too large"}
		}
		return req, &respond.RequestError{Kind: protocol.Invalid, Message: "Could not read the request body"}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return req, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req.Update); err != nil {
		return req, &respond.RequestError{Kind: protocol.Invalid, Message: "Invalid profile: " + err.Error()}
	}
	if dec.More() {
		return req, &respond.RequestError{Kind: protocol.Invalid, Message: "Invalid profile: one JSON object expected"}
	}
	return req, nil
}

// GET /api/workspaces/{id}/context — the authorization step resolved the
// workspace from {id} and checked the user may read it.
func (a api) workspaceContext(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if sc, ok := teamauth.ScopeFrom(r.Context()); ok && sc.Workspace != "" {
		id = sc.Workspace
	}
	if err := input.CheckSegment("id", id); err != nil {
		respond.Error(w, a.d.Log, err)
		return
	}
	forward.Reply(a.d, w, r, http.StatusOK, protocol.GetWorkspaceNow, protocol.WorkspaceNowRequest{Workspace: id})
}
