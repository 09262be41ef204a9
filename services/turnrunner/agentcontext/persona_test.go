package agentcontext

import (
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
)

func TestPersonaHooks(t *testing.T) {
	hr, _ := BuiltInPersona("hr-manager")
	if hr.Allows("bash") || !hr.Allows("read_file") || !NamedPersona("custom-x").Allows("bash") {
		t.Error("persona tool filter")
	}
	if got := NamedPersona("custom-x"); got.Prompt != "## Persona\nRespond as the \"custom-x\" persona: its expertise, tone and priorities." || got.ID != "custom-x" {
		t.Errorf("unknown persona: %+v", got)
	}
	if got, _ := BuiltInPersona("coder"); !strings.HasPrefix(got.Prompt, "## Persona: Coder\nYo") {
		t.Errorf("coder prompt %q", got.Prompt)
	}
	c := CustomPersona(protocol.CustomPersona{ID: "critic", Name: "Critic", SystemPrompt: "Find flaws.", Tools: []string{"read_file"}, IsReadOnly: true})
	if c.Prompt != "## Persona: Critic\nFind flaws." || !c.ReadOnly || !c.Allows("read_file") || c.Allows("write_file") || c.Allows("save_memory") {
		t.Errorf("custom persona %+v", c)
	}
}
