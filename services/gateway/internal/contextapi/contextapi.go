// Package contextapi serves what the agent knows about the user and a
// workspace (docs/agent.md) with the original's shapes: the profile
// (GET/PUT /api/profile), the workspace briefing
// (GET /api/workspaces/{id}/context) and the personas (built-in and the
// caller's custom ones, /api/personas), by asking the session store.
package contextapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
	r.Get("/profile/style", a.profileStyle)
	r.Get("/profile/brand", a.profileBrand)
	r.Post("/profile/analyze-style", a.analyzeStyle)
	r.Post("/profile/analyze-brand", a.analyzeBrand)
	r.Post("/profile/research", a.research)
	r.Get("/workspaces/{id}/context", a.workspaceContext)
	r.Get("/personas", a.listPersonas)
	r.Post("/personas", a.createPersona)
	r.Patch("/personas/{id}", a.updatePersona)
	r.Delete("/personas/{id}", a.deletePersona)
	r.Get("/team-personas", a.listTeamPersonas)
	r.Post("/team-personas", a.createTeamPersona)
	r.Patch("/team-personas/{id}", a.updateTeamPersona)
	r.Delete("/team-personas/{id}", a.deleteTeamPersona)
	r.Get("/identity", a.getIdentity)
	r.Post("/identity", a.setIdentity)
	r.Get("/mind/identity", a.mindIdentity)
	r.Get("/mind/awareness", a.mindAwareness)
	r.Get("/mind/skills", a.mindSkills)
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

// GET /api/profile/style — the writing style with a one-line summary.
func (a api) profileStyle(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, profileReader, protocol.GetProfile, http.StatusOK, func(p protocol.Profile) any {
		s := p.WritingStyle
		return struct {
			Summary string `json:"summary"`
			protocol.WritingStyle
		}{fmt.Sprintf("Tone: %s. Sentences: %s. Vocabulary: %s. Structure: %s.", s.Tone, s.SentenceLength, s.Vocabulary, s.Structure), s}
	})
}

// GET /api/profile/brand — the brand, for document tools.
func (a api) profileBrand(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, profileReader, protocol.GetProfile, http.StatusOK, func(p protocol.Profile) any { return p.Brand })
}

func profileReader(_ http.ResponseWriter, r *http.Request) (protocol.ProfileRequest, error) {
	return protocol.ProfileRequest{User: user(r)}, nil
}

// PUT /api/profile {partial profile}
func (a api) putProfile(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, a.readUpdate, protocol.UpdateProfile, http.StatusOK, nil)
}

// readUpdate decodes the profile update.
func (a api) readUpdate(w http.ResponseWriter, r *http.Request) (protocol.ProfileUpdateRequest, error) {
	req := protocol.ProfileUpdateRequest{User: user(r)}
	return req, a.strict(w, r, "profile", &req.Update)
}

// strict decodes the body into v once, strictly: unknown keys, values of
// the wrong type and trailing data are refused with a 400 naming them. An
// empty body leaves v as it is.
func (a api) strict(w http.ResponseWriter, r *http.Request, what string, v any) error {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.d.BodyLimit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &respond.RequestError{Kind: protocol.TooLarge, Code: "FST_ERR_CTP_BODY_TOO_LARGE", Message: "Request body is too large"}
		}
		return &respond.RequestError{Kind: protocol.Invalid, Message: "Could not read the request body"}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &respond.RequestError{Kind: protocol.Invalid, Message: "Invalid " + what + ": " + err.Error()}
	}
	if dec.More() {
		return &respond.RequestError{Kind: protocol.Invalid, Message: "Invalid " + what + ": one JSON object expected"}
	}
	return nil
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
