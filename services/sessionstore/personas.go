package sessionstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/waggle-os/core/libs/personas"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/userdocs"
	"github.com/waggle-os/core/services/sessionstore/workspaces"
)

// Custom personas: one JSON array per owner (the local desktop's
// <data-dir>/personas.json, one per user on a team server), kept with the
// profile in userdocs; a team's shared set is one more owner (PostgreSQL
// on team servers, like the user's).

// personasKey is the set a request acts on: team's shared one when team is
// set, else user's own.
func personasKey(user, team string) userdocs.Key {
	switch {
	case team != "":
		return userdocs.Key{Kind: "personas", Scope: "teams", Owner: team}
	case user != "":
		return userdocs.Key{Kind: "personas", Scope: "users", Owner: user}
	}
	return userdocs.Key{Kind: "personas"}
}

func decodePersonas(doc []byte, found bool) ([]protocol.CustomPersona, error) {
	ps := []protocol.CustomPersona{}
	if !found {
		return ps, nil
	}
	if err := json.Unmarshal(doc, &ps); err != nil {
		return nil, fmt.Errorf("sessionstore: custom personas: %w", err)
	}
	if ps == nil {
		ps = []protocol.CustomPersona{}
	}
	return ps, nil
}

func (h contextHandlers) personaList(ctx context.Context, req protocol.PersonasRequest) (protocol.CustomPersonaList, error) {
	doc, found, err := h.docs.Get(ctx, personasKey(req.User, req.Team))
	if err != nil {
		return protocol.CustomPersonaList{}, err
	}
	ps, err := decodePersonas(doc, found)
	return protocol.CustomPersonaList{Personas: ps}, err
}

// personaGet finds the persona in the set the request names; a turn's
// request (Workspace set) falls back to the workspace's team's set.
func (h contextHandlers) personaGet(ctx context.Context, req protocol.PersonaRequest) (protocol.CustomPersona, error) {
	p, err := h.personaIn(ctx, req.User, req.Team, req.ID)
	if protocol.KindOf(err) != protocol.NotFound || req.Team != "" || req.Workspace == "" {
		return p, err
	}
	if !protocol.ValidID(req.Workspace) {
		return p, err
	}
	doc, werr := h.s.getWorkspace(ctx, req.Workspace)
	if werr != nil {
		return p, err
	}
	if team := doc.Workspace().TeamID; team != "" {
		return h.personaIn(ctx, "", team, req.ID)
	}
	return p, err
}

// personaIn reads persona id from one set.
func (h contextHandlers) personaIn(ctx context.Context, user, team, id string) (protocol.CustomPersona, error) {
	list, err := h.personaList(ctx, protocol.PersonasRequest{User: user, Team: team})
	if err != nil {
		return protocol.CustomPersona{}, err
	}
	i := slices.IndexFunc(list.Personas, func(p protocol.CustomPersona) bool { return p.ID == id })
	if i < 0 {
		return protocol.CustomPersona{}, protocol.Errorf(protocol.NotFound, "Custom persona not found")
	}
	return list.Personas[i], nil
}

// modifyPersonas runs fn on the set's personas under the document's lock.
func (h contextHandlers) modifyPersonas(ctx context.Context, user, team string, fn func([]protocol.CustomPersona) ([]protocol.CustomPersona, error)) error {
	return h.docs.Update(ctx, personasKey(user, team), func(old []byte, found bool) ([]byte, error) {
		ps, err := decodePersonas(old, found)
		if err != nil {
			return nil, err
		}
		if ps, err = fn(ps); err != nil {
			return nil, err
		}
		return json.MarshalIndent(ps, "", "  ")
	})
}

// personaCreate stores a new custom persona, replacing one of the same id
// (as the original); a built-in id is a conflict.
func (h contextHandlers) personaCreate(ctx context.Context, req protocol.PersonaWriteRequest) (protocol.CustomPersona, error) {
	p, err := req.Write.Apply(protocol.CustomPersona{Icon: "🤖", ModelPreference: "claude-sonnet-4-6"})
	if err != nil {
		return p, err
	}
	p.ID = workspaces.Slug(p.Name)
	if req.Write.ID != nil {
		p.ID = *req.Write.ID
	}
	if !protocol.ValidID(p.ID) {
		return p, protocol.Errorf(protocol.Invalid, "Invalid id: contains illegal characters")
	}
	if _, builtIn := personas.Get(p.ID); builtIn {
		return p, protocol.Errorf(protocol.Conflict, "A built-in persona with this ID already exists")
	}
	err = h.modifyPersonas(ctx, req.User, req.Team, func(ps []protocol.CustomPersona) ([]protocol.CustomPersona, error) {
		if i := slices.IndexFunc(ps, func(o protocol.CustomPersona) bool { return o.ID == p.ID }); i >= 0 {
			ps[i] = p
			return ps, nil
		}
		if len(ps) >= protocol.MaxCustomPersonas {
			return nil, protocol.Errorf(protocol.Conflict, "at most %d custom personas", protocol.MaxCustomPersonas)
		}
		return append(ps, p), nil
	})
	return p, err
}

func (h contextHandlers) personaUpdate(ctx context.Context, req protocol.PersonaWriteRequest) (protocol.CustomPersona, error) {
	if _, builtIn := personas.Get(req.ID); builtIn {
		return protocol.CustomPersona{}, protocol.Errorf(protocol.Forbidden, "Cannot modify built-in persona")
	}
	var out protocol.CustomPersona
	err := h.modifyPersonas(ctx, req.User, req.Team, func(ps []protocol.CustomPersona) ([]protocol.CustomPersona, error) {
		i := slices.IndexFunc(ps, func(o protocol.CustomPersona) bool { return o.ID == req.ID })
		if i < 0 {
			return nil, protocol.Errorf(protocol.NotFound, "Custom persona not found")
		}
		w := req.Write
		w.ID = nil // the id names the persona; it is not renamed
		p, err := w.Apply(ps[i])
		if err != nil {
			return nil, err
		}
		ps[i], out = p, p
		return ps, nil
	})
	return out, err
}

func (h contextHandlers) personaDelete(ctx context.Context, req protocol.PersonaRequest) (protocol.CustomPersona, error) {
	if _, builtIn := personas.Get(req.ID); builtIn {
		return protocol.CustomPersona{}, protocol.Errorf(protocol.Forbidden, "Cannot delete built-in persona")
	}
	var out protocol.CustomPersona
	err := h.modifyPersonas(ctx, req.User, req.Team, func(ps []protocol.CustomPersona) ([]protocol.CustomPersona, error) {
		i := slices.IndexFunc(ps, func(o protocol.CustomPersona) bool { return o.ID == req.ID })
		if i < 0 {
			return nil, protocol.Errorf(protocol.NotFound, "Persona not found")
		}
		out = ps[i]
		return slices.Delete(ps, i, i+1), nil
	})
	return out, err
}
