// Package teamsapi is the teams admin API (/api/teams, /api/tokens): teams,
// members and roles, capability policies and the caller's own tokens. It
// forwards each request to the teams service with the authenticated user
// as the actor; the service decides what that user may do. Without an
// authenticated user (local mode, loopback trust) the caller acts as the
// operator.
package teamsapi

import (
	"encoding/json"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/forward"
	"github.com/waggle-os/core/services/gateway/internal/input"
	"github.com/waggle-os/core/services/gateway/internal/respond"
	"github.com/waggle-os/core/services/gateway/internal/teamauth"
)

// Mount adds the teams routes to r (mounted under /api).
func Mount(r chi.Router, d forward.Deps) {
	h := handlers{d: d}
	r.Get("/teams", h.list)
	r.Post("/teams", h.create)
	r.Get("/teams/{team}", h.get)
	r.Patch("/teams/{team}", h.update)
	r.Delete("/teams/{team}", h.remove)
	r.Put("/teams/{team}/members/{user}", h.putMember)
	r.Delete("/teams/{team}/members/{user}", h.removeMember)
	r.Get("/teams/{team}/capability-policies", h.policies)
	r.Put("/teams/{team}/capability-policies/{role}", h.setPolicy)
	r.Get("/tokens", h.tokens)
	r.Post("/tokens", h.createToken)
	r.Delete("/tokens/{id}", h.revokeToken)
}

type handlers struct{ d forward.Deps }

func actor(r *http.Request) string {
	if u, ok := teamauth.UserFrom(r.Context()); ok {
		return u.ID
	}
	return ""
}

func (h handlers) ref(r *http.Request) protocol.TeamRef {
	return protocol.TeamRef{Actor: actor(r), Team: chi.URLParam(r, "team")}
}

// body decodes a JSON object body into v with the gateway's body rules.
func (h handlers) body(w http.ResponseWriter, r *http.Request, v any) bool {
	f, err := input.Decode(w, r, h.d.BodyLimit)
	if err != nil {
		respond.Error(w, h.d.Log, err)
		return false
	}
	raw, _ := json.Marshal(f)
	if err := json.Unmarshal(raw, v); err != nil {
		respond.Error(w, h.d.Log, protocol.Errorf(protocol.Invalid, "invalid body: %s", fieldError(err)))
		return false
	}
	return true
}

func fieldError(err error) string {
	if te, ok := err.(*json.UnmarshalTypeError); ok && te.Field != "" {
		return te.Field + " has the wrong type"
	}
	return "wrong field types"
}

func (h handlers) list(w http.ResponseWriter, r *http.Request) {
	forward.Reply(h.d, w, r, http.StatusOK, protocol.ListTeams, protocol.TeamListRequest{Actor: actor(r)})
}

func (h handlers) create(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ID    string `json:"id"`
		Name  string `json:"name"`
		Owner string `json:"owner"`
	}
	if !h.body(w, r, &body) {
		return
	}
	forward.Reply(h.d, w, r, http.StatusCreated, protocol.CreateTeam,
		protocol.TeamCreateRequest{Actor: actor(r), ID: body.ID, Name: body.Name, Owner: body.Owner})
}

func (h handlers) get(w http.ResponseWriter, r *http.Request) {
	forward.Reply(h.d, w, r, http.StatusOK, protocol.GetTeam, h.ref(r))
}

func (h handlers) update(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name        *string `json:"name"`
		CodeTools   *bool   `json:"codeTools"`
		MaxAutonomy *string `json:"maxAutonomy"`
	}
	if !h.body(w, r, &body) {
		return
	}
	forward.Reply(h.d, w, r, http.StatusOK, protocol.UpdateTeam,
		protocol.TeamUpdateRequest{TeamRef: h.ref(r), Name: body.Name, CodeTools: body.CodeTools, MaxAutonomy: body.MaxAutonomy})
}

func (h handlers) remove(w http.ResponseWriter, r *http.Request) {
	forward.Reply(h.d, w, r, http.StatusOK, protocol.DeleteTeam, h.ref(r))
}

func (h handlers) putMember(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Role string `json:"role"`
	}
	if !h.body(w, r, &body) {
		return
	}
	forward.Reply(h.d, w, r, http.StatusOK, protocol.PutMember,
		protocol.MemberPutRequest{TeamRef: h.ref(r), User: chi.URLParam(r, "user"), Role: body.Role})
}

func (h handlers) removeMember(w http.ResponseWriter, r *http.Request) {
	forward.Reply(h.d, w, r, http.StatusOK, protocol.RemoveMember,
		protocol.MemberRef{TeamRef: h.ref(r), User: chi.URLParam(r, "user")})
}

// policies is GET /api/teams/{team}/capability-policies: the original's
// governance URL, answering [{role, blockedTools}].
func (h handlers) policies(w http.ResponseWriter, r *http.Request) {
	d, ok := forward.Call(h.d, w, r, protocol.GetTeam, h.ref(r))
	if !ok {
		return
	}
	if d.Policies == nil {
		d.Policies = []protocol.TeamPolicy{}
	}
	respond.JSON(w, http.StatusOK, d.Policies)
}

func (h handlers) setPolicy(w http.ResponseWriter, r *http.Request) {
	var body struct {
		BlockedTools []string `json:"blockedTools"`
	}
	if !h.body(w, r, &body) {
		return
	}
	forward.Reply(h.d, w, r, http.StatusOK, protocol.SetPolicy,
		protocol.PolicySetRequest{TeamRef: h.ref(r), Role: chi.URLParam(r, "role"), BlockedTools: body.BlockedTools})
}

func (h handlers) tokens(w http.ResponseWriter, r *http.Request) {
	forward.Reply(h.d, w, r, http.StatusOK, protocol.ListTokens,
		protocol.TokenListRequest{Actor: actor(r), User: r.URL.Query().Get("user")})
}

func (h handlers) createToken(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string `json:"name"`
		User string `json:"user"`
	}
	if !h.body(w, r, &body) {
		return
	}
	forward.Reply(h.d, w, r, http.StatusCreated, protocol.CreateToken,
		protocol.TokenCreateRequest{Actor: actor(r), User: body.User, Name: body.Name})
}

func (h handlers) revokeToken(w http.ResponseWriter, r *http.Request) {
	forward.Reply(h.d, w, r, http.StatusOK, protocol.RevokeToken,
		protocol.TokenRevokeRequest{Actor: actor(r), ID: chi.URLParam(r, "id")})
}
