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

// GET /api/personas — the built-ins, then the caller's custom personas.
// The picker must work without the store: then only the built-ins show.
func (a api) listPersonas(w http.ResponseWriter, r *http.Request) {
	out := personaList{Personas: personas.List()}
	ctx, cancel := context.WithTimeout(r.Context(), a.d.Timeout)
	defer cancel()
	rep, err := bus.Call(ctx, a.d.NC, protocol.ListCustomPersonas, protocol.PersonasRequest{User: user(r)})
	if err != nil {
		a.d.Log.Warn("custom personas unavailable; listing the built-ins", "err", err)
	}
	for _, c := range rep.Personas {
		out.Personas = append(out.Personas, listed(c))
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
	}, protocol.DeleteCustomPersona, http.StatusOK, func(p protocol.CustomPersona) any {
		return struct {
			Deleted bool   `json:"deleted"`
			ID      string `json:"id"`
		}{true, p.ID}
	})
}
