package subagent

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/agentcontext"
	"github.com/waggle-os/core/services/turnrunner/tools"
)

// namedTool is an agent.Tool with a name only.
type namedTool string

func (n namedTool) Name() string                                        { return string(n) }
func (namedTool) Description() string                                   { return "" }
func (namedTool) Schema() json.RawMessage                               { return nil }
func (namedTool) Call(context.Context, json.RawMessage) (string, error) { return "", nil }

// TestSubsetNeverGrantsMore: what a model can make spawn_agent hand a
// sub-agent. A custom list naming a tool the turn does not offer (or
// spawn_agent itself: the depth stays one) is refused; a role preset
// just lacks what the turn lacks; a persona's filter and duplicates
// narrow the list further.
func TestSubsetNeverGrantsMore(t *testing.T) {
	s := &Spawner{Offered: []agent.Tool{namedTool("read_file"), namedTool("write_file"), namedTool("spawn_agent")}}
	planner, ok := agentcontext.BuiltInPersona("planner") // read-only
	if !ok {
		t.Fatal("no planner persona")
	}
	cases := []struct {
		name    string
		req     tools.SpawnRequest
		persona agentcontext.Persona
		want    []string
		refused string
	}{
		{"custom within the turn's tools", tools.SpawnRequest{Role: tools.RoleCustom, Tools: []string{"read_file", "read_file", "write_file"}}, agentcontext.Persona{}, []string{"read_file", "write_file"}, ""},
		{"custom asks for bash", tools.SpawnRequest{Role: tools.RoleCustom, Tools: []string{"read_file", "bash"}}, agentcontext.Persona{}, nil, "bash"},
		{"custom asks for spawn_agent", tools.SpawnRequest{Role: tools.RoleCustom, Tools: []string{"spawn_agent"}}, agentcontext.Persona{}, nil, "spawn_agent"},
		{"preset lacks what the turn lacks", tools.SpawnRequest{Role: "coder", Tools: []string{"read_file", "bash", "spawn_agent"}}, agentcontext.Persona{}, []string{"read_file"}, ""},
		{"read-only persona", tools.SpawnRequest{Role: tools.RoleCustom, Tools: []string{"read_file", "write_file"}}, planner, []string{"read_file"}, ""},
	}
	for _, tc := range cases {
		got, err := subset(s.Offered, tc.req, tc.persona)
		if tc.refused != "" {
			if err == nil || !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("%s: got %v, %v; want a refusal naming %s", tc.name, names(got), err, tc.refused)
			}
			continue
		}
		if err != nil || !slices.Equal(names(got), tc.want) {
			t.Errorf("%s: got %v, %v; want %v", tc.name, names(got), err, tc.want)
		}
	}
}

func names(ts []agent.Tool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name())
	}
	return out
}
