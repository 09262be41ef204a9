package turntools

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/agentcontext"
)

// namedTool is an agent.Tool with a name only.
type namedTool string

func (n namedTool) Name() string                                        { return string(n) }
func (namedTool) Description() string                                   { return "" }
func (namedTool) Schema() json.RawMessage                               { return nil }
func (namedTool) Call(context.Context, json.RawMessage) (string, error) { return "", nil }

// TestPersonaTools: what a turn is offered and what its sub-agents draw
// from, per persona. The coordinator is offered only its delegation tools
// (no MCP tool: it does no work itself) while its workers draw from the
// whole pool; a read-only persona binds its workers too; an allowlist
// persona keeps MCP tools as before.
func TestPersonaTools(t *testing.T) {
	pool := []agent.Tool{namedTool("read_file"), namedTool("write_file"), namedTool("bash"),
		namedTool("save_memory"), namedTool("search_memory"), namedTool("create_plan"), namedTool("spawn_agent"),
		namedTool("mcp__gh__create_issue")}
	const nBuiltIn = 7
	coord, _ := agentcontext.BuiltInPersona("coordinator")
	planner, _ := agentcontext.BuiltInPersona("planner")
	writer, _ := agentcontext.BuiltInPersona("writer")
	critic := agentcontext.CustomPersona(protocol.CustomPersona{ID: "critic", Name: "Critic", SystemPrompt: "x", Tools: []string{"spawn_agent", "read_file"}})
	all := toolNames(pool)
	cases := []struct {
		name            string
		p               agentcontext.Persona
		offered, worker []string
	}{
		{"none", agentcontext.Persona{}, all, all},
		{"coordinator", coord, []string{"save_memory", "search_memory", "create_plan", "spawn_agent"}, all},
		{"read-only", planner, []string{"read_file", "search_memory"}, []string{"read_file", "search_memory"}},
		{"allowlist keeps MCP", writer, []string{"read_file", "write_file", "save_memory", "search_memory", "mcp__gh__create_issue"},
			[]string{"read_file", "write_file", "save_memory", "search_memory", "mcp__gh__create_issue"}},
		{"custom cannot delegate", critic, []string{"read_file", "save_memory", "search_memory", "spawn_agent", "mcp__gh__create_issue"},
			[]string{"read_file", "save_memory", "search_memory", "spawn_agent", "mcp__gh__create_issue"}},
	}
	for _, tc := range cases {
		offered, workers := PersonaTools(pool, nBuiltIn, tc.p)
		if got := toolNames(offered); !slices.Equal(got, tc.offered) {
			t.Errorf("%s: offered %v, want %v", tc.name, got, tc.offered)
		}
		if got := toolNames(workers); !slices.Equal(got, tc.worker) {
			t.Errorf("%s: workers draw from %v, want %v", tc.name, got, tc.worker)
		}
	}
}

func toolNames(ts []agent.Tool) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name()
	}
	return out
}
