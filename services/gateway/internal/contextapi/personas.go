package contextapi

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/personas"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/forward"
	"github.com/waggle-os/core/services/gateway/internal/input"
	"github.com/waggle-os/core/services/gateway/internal/respond"
	"github.com/waggle-os/core/services/gateway/internal/teamauth"
)

// personaList is the body of GET /api/personas (the original's shape:
// system prompts and tool lists are not listed).
type personaList struct {
	Personas []personas.Persona `json:"personas"`
}

// listed is a custom persona as the picker shows it.
func listed(c protocol.CustomPersona) personas.Persona {
	return personas.Persona{
		ID: c.ID, Name: c.Name, Description: c.Description, Icon: c.Icon,
		WorkspaceAffinity: forward.OrEmpty(c.WorkspaceAffinity), SuggestedCommands: forward.OrEmpty(c.SuggestedCommands),
		BestFor: []string{}, ReadOnly: c.IsReadOnly,
	}
}

// GET /api/personas[?workspace=] — the built-ins, then the caller's
// custom personas, then (with a team workspace named) its team's shared
// ones. The picker must work without the store: then only the built-ins
// show.
func (a api) listPersonas(w http.ResponseWriter, r *http.Request) {
	out := personaList{Personas: personas.List()}
	ctx, cancel := context.WithTimeout(r.Context(), a.d.Timeout)
	defer cancel()
	sc, _ := teamauth.ScopeFrom(r.Context())
	sets := []protocol.PersonasRequest{{User: sc.User}}
	if sc.Team != "" {
		// The authorization step resolved the workspace's team and
		// checked the caller may read it.
		sets = append(sets, protocol.PersonasRequest{Team: sc.Team})
	}
	for _, set := range sets {
		rep, err := bus.Call(ctx, a.d.NC, protocol.ListCustomPersonas, set)
		if err != nil {
			a.d.Log.Warn("custom personas unavailable; listing the others", "team", set.Team, "err", err)
		}
		for _, c := range rep.Personas {
			p := listed(c)
			p.TeamID = set.Team
			out.Personas = append(out.Personas, p)
		}
	}
	respond.JSON(w, http.StatusOK, out)
}

// POST /api/personas {name, systemPrompt, id?, description?, icon?, tools?, ...}
func (a api) createPersona(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, func(w http.ResponseWriter, r *http.Request) (protocol.PersonaWriteRequest, error) {
		req := protocol.PersonaWriteRequest{User: user(r)}
		return req, a.strict(w, r, "persona", &req.Write)
	}, protocol.CreateCustomPersona, http.StatusCreated, nil)
}

// PATCH /api/personas/{id} {fields to change}
func (a api) updatePersona(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, func(w http.ResponseWriter, r *http.Request) (protocol.PersonaWriteRequest, error) {
		req := protocol.PersonaWriteRequest{User: user(r), ID: chi.URLParam(r, "id")}
		if err := input.CheckSegment("id", req.ID); err != nil {
			return req, err
		}
		return req, a.strict(w, r, "persona", &req.Write)
	}, protocol.UpdateCustomPersona, http.StatusOK, nil)
}

// DELETE /api/personas/{id}
func (a api) deletePersona(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, func(_ http.ResponseWriter, r *http.Request) (protocol.PersonaRequest, error) {
		req := protocol.PersonaRequest{User: user(r), ID: chi.URLParam(r, "id")}
		return req, input.CheckSegment("id", req.ID)
	}, protocol.DeleteCustomPersona, http.StatusOK, deletedPersona)
}

// deletedPersona is the original's reply to a deleted persona.
func deletedPersona(p protocol.CustomPersona) any {
	return struct {
		Deleted bool   `json:"deleted"`
		ID      string `json:"id"`
	}{true, p.ID}
}

// Team personas: a team's shared set (team servers). The authorization
// step checked ?team= (members read, admins write) and resolved it; local
// mode has no teams.

// errNoTeam refuses the team persona routes without a team.
var errNoTeam = &respond.RequestError{Kind: protocol.Invalid, Message: "Shared personas belong to a team: name it with ?team= on a team server"}

// team is the team the authorization step resolved from ?team=.
func team(r *http.Request) (string, error) {
	sc, _ := teamauth.ScopeFrom(r.Context())
	if sc.Team == "" {
		return "", errNoTeam
	}
	return sc.Team, nil
}

// GET /api/team-personas?team= — the team's shared personas, whole (its
// members run them, so they may read their prompts).
func (a api) listTeamPersonas(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, func(_ http.ResponseWriter, r *http.Request) (protocol.PersonasRequest, error) {
		t, err := team(r)
		return protocol.PersonasRequest{Team: t}, err
	}, protocol.ListCustomPersonas, http.StatusOK, nil)
}

// POST /api/team-personas?team= {the custom persona's shape}
func (a api) createTeamPersona(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, func(w http.ResponseWriter, r *http.Request) (protocol.PersonaWriteRequest, error) {
		t, err := team(r)
		if err != nil {
			return protocol.PersonaWriteRequest{}, err
		}
		req := protocol.PersonaWriteRequest{Team: t}
		return req, a.strict(w, r, "persona", &req.Write)
	}, protocol.CreateCustomPersona, http.StatusCreated, nil)
}

// PATCH /api/team-personas/{id}?team= {fields to change}
func (a api) updateTeamPersona(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, func(w http.ResponseWriter, r *http.Request) (protocol.PersonaWriteRequest, error) {
		t, err := team(r)
		if err != nil {
			return protocol.PersonaWriteRequest{}, err
		}
		req := protocol.PersonaWriteRequest{Team: t, ID: chi.URLParam(r, "id")}
		if err := input.CheckSegment("id", req.ID); err != nil {
			return req, err
		}
		return req, a.strict(w, r, "persona", &req.Write)
	}, protocol.UpdateCustomPersona, http.StatusOK, nil)
}

// DELETE /api/team-personas/{id}?team=
func (a api) deleteTeamPersona(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, func(_ http.ResponseWriter, r *http.Request) (protocol.PersonaRequest, error) {
		t, err := team(r)
		if err != nil {
			return protocol.PersonaRequest{}, err
		}
		req := protocol.PersonaRequest{Team: t, ID: chi.URLParam(r, "id")}
		return req, input.CheckSegment("id", req.ID)
	}, protocol.DeleteCustomPersona, http.StatusOK, deletedPersona)
}
