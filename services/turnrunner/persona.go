package turnrunner

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/personas"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
)

// personaInfo is the persona a turn runs as.
type personaInfo struct {
	id string
	// prompt is the persona's system-prompt section ("" for none).
	prompt string
	// readOnly: the persona may not write files or run commands.
	readOnly bool
	// delegates: the persona only hands work to sub-agents (see
	// personas.Persona.Delegates).
	delegates bool
	// rules filters the tools (nil: every tool).
	rules *personas.Persona
}

// allows applies the persona's tool filter.
func (p personaInfo) allows(tool string) bool { return p.rules == nil || p.rules.Allows(tool) }

// resolvePersona looks id up among the built-in personas, then among the
// user's custom personas and the shared ones of the workspace's team; the
// model is asked to play any other persona by its name.
func (t *turn) resolvePersona(ctx context.Context, id string) personaInfo {
	if p, ok := builtInPersona(id); ok || id == "" {
		return p
	}
	c, err := bus.Call(ctx, t.svc.nc, protocol.GetCustomPersona, protocol.PersonaRequest{User: t.req.User, Workspace: t.req.Workspace, ID: id}, bus.Within(t.svc.cfg.StoreTimeout))
	if err != nil {
		if !errors.Is(err, protocol.ErrUnavailable) && protocol.KindOf(err) != protocol.NotFound && ctx.Err() == nil {
			t.logger().Warn("custom persona unavailable; named only", "persona", id, "err", err)
		}
		return namedPersona(id)
	}
	return customPersona(c)
}

// builtInPersona is the built-in id ("" is no persona).
func builtInPersona(id string) (personaInfo, bool) {
	if id == "" {
		return personaInfo{}, false
	}
	p, ok := personas.Get(id)
	if !ok {
		return personaInfo{}, false
	}
	return personaInfo{id: id, prompt: p.SystemPrompt, readOnly: p.ReadOnly, delegates: p.Delegates, rules: &p}, true
}

// namedPersona is a persona this server knows nothing of but its name.
func namedPersona(id string) personaInfo {
	return personaInfo{id: id, prompt: fmt.Sprintf("## Persona\nRespond as the %q persona: its expertise, tone and priorities.", id)}
}

// customPersona is the user's own persona: its prompt under its name, its
// tool list as an allowlist, read-only when it says so.
func customPersona(c protocol.CustomPersona) personaInfo {
	rules := personas.Persona{ID: c.ID, Tools: slices.Clone(c.Tools), ReadOnly: c.IsReadOnly}
	return personaInfo{id: c.ID, prompt: fmt.Sprintf("## Persona: %s\n%s", c.Name, c.SystemPrompt), readOnly: c.IsReadOnly, rules: &rules}
}

// vague reports whether message is a vague first message (the ambiguity
// guard's case; GEPA may still expand it).
func (t *turn) vague(message string, history []protocol.Message) bool {
	return message == t.req.Message && !protocol.IsSlashCommand(message) && !hasUserMessage(history) && agent.IsVague(message)
}
