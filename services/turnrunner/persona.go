package turnrunner

import (
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

// resolvePersona looks id up among the built-in personas; an unknown id
// (a custom persona this runner does not know) has no prompt.
func resolvePersona(id string) personaInfo {
	p, ok := personas.Get(id)
	if !ok {
		return personaInfo{id: id}
	}
	return personaInfo{id: id, prompt: p.SystemPrompt}
}

// vague reports whether message is a vague first message (the ambiguity
// guard's case; GEPA may still expand it).
func (t *turn) vague(message string, history []protocol.Message) bool {
	return message == t.req.Message && !protocol.IsSlashCommand(message) && !hasUserMessage(history) && agent.IsVague(message)
}
