package turnrunner

import (
	"fmt"

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
}

// resolvePersona looks id up among the built-in personas; the model is
// asked to play any other persona by its name.
func resolvePersona(id string) personaInfo {
	if id == "" {
		return personaInfo{}
	}
	p, ok := personas.Get(id)
	if !ok {
		return personaInfo{id: id, prompt: fmt.Sprintf("## Persona\nRespond as the %q persona: its expertise, tone and priorities.", id)}
	}
	return personaInfo{id: id, prompt: p.SystemPrompt, readOnly: p.ReadOnly}
}

// vague reports whether message is a vague first message (the ambiguity
// guard's case; GEPA may still expand it).
func (t *turn) vague(message string, history []protocol.Message) bool {
	return message == t.req.Message && !protocol.IsSlashCommand(message) && !hasUserMessage(history) && agent.IsVague(message)
}
