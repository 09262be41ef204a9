package agentcontext

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/waggle-os/core/libs/personas"
	"github.com/waggle-os/core/libs/protocol"
)

// Persona is the persona a turn runs as.
type Persona struct {
	ID string
	// Prompt is the persona's system-prompt section ("" for none).
	Prompt string
	// ReadOnly: the persona may not write files or run commands.
	ReadOnly bool
	// Delegates: the persona only hands work to sub-agents (see
	// personas.Persona.Delegates).
	Delegates bool
	// rules filters the tools (nil: every tool).
	rules *personas.Persona
}

// Allows applies the persona's tool filter.
func (p Persona) Allows(tool string) bool { return p.rules == nil || p.rules.Allows(tool) }

// Persona looks id up among the built-in personas, then among the user's
// custom personas and the shared ones of the workspace's team; the model
// is asked to play any other persona by its name.
func (l Loader) Persona(ctx context.Context, id string) Persona {
	if p, ok := BuiltInPersona(id); ok || id == "" {
		return p
	}
	c, err := read(ctx, l.Store, protocol.GetCustomPersona, protocol.PersonaRequest{User: l.Req.User, Workspace: l.Req.Workspace, ID: id})
	if err != nil {
		if !errors.Is(err, protocol.ErrUnavailable) && protocol.KindOf(err) != protocol.NotFound && ctx.Err() == nil {
			l.Log.Warn("custom persona unavailable; named only", "persona", id, "err", err)
		}
		return NamedPersona(id)
	}
	return CustomPersona(c)
}

// personaOf is persona id as the turn's context found it: a built-in one,
// the custom one the store found, or one known by its name only.
func personaOf(id string, custom *protocol.CustomPersona) Persona {
	if p, ok := BuiltInPersona(id); ok || id == "" {
		return p
	}
	if custom != nil && custom.ID == id {
		return CustomPersona(*custom)
	}
	return NamedPersona(id)
}

// BuiltInPersona is the built-in id ("" is no persona).
func BuiltInPersona(id string) (Persona, bool) {
	if id == "" {
		return Persona{}, false
	}
	p, ok := personas.Get(id)
	if !ok {
		return Persona{}, false
	}
	return Persona{ID: id, Prompt: p.SystemPrompt, ReadOnly: p.ReadOnly, Delegates: p.Delegates, rules: &p}, true
}

// NamedPersona is a persona this server knows nothing of but its name.
func NamedPersona(id string) Persona {
	return Persona{ID: id, Prompt: fmt.Sprintf("## Persona\nRespond as the %q persona: its expertise, tone and priorities.", id)}
}

// CustomPersona is the user's own persona: its prompt under its name, its
// tool list as an allowlist, read-only when it says so.
func CustomPersona(c protocol.CustomPersona) Persona {
	rules := personas.Persona{ID: c.ID, Tools: slices.Clone(c.Tools), ReadOnly: c.IsReadOnly}
	return Persona{ID: c.ID, Prompt: fmt.Sprintf("## Persona: %s\n%s", c.Name, c.SystemPrompt), ReadOnly: c.IsReadOnly, rules: &rules}
}
