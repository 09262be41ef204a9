package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// SubAgents runs sub-agents for spawn_agent. The turn runner implements it
// per turn: the sub-agent is a nested agent run of that turn, offered only
// tools the turn itself offers, gated by the turn's approval gate, bounded
// in number, steps and time, and cancelled with the turn.
type SubAgents interface {
	// Spawn runs one sub-agent to its end and returns its reply. An error
	// is shown to the model as the tool's result; it must read well and
	// carry no internals.
	Spawn(ctx context.Context, req SpawnRequest) (string, error)
}

// SpawnRequest is one decoded spawn_agent call.
type SpawnRequest struct {
	// Name and Role are the sub-agent's label and role preset
	// (RoleTools); Role is "custom" when Tools was given.
	Name, Role string
	// Task is the sub-agent's first (user) message.
	Task string
	// Context is added to the sub-agent's system prompt.
	Context string
	// Persona, when set, is the persona the sub-agent plays: its prompt
	// and its tool filter.
	Persona string
	// Tools are the tool names asked for: the role preset's, or the
	// model's own list. Names the turn does not offer are refused by
	// Spawn, never added.
	Tools []string
}

// Limits of spawn_agent's arguments: a task is a message, not a document.
const (
	maxSpawnTask    = 16 << 10
	maxSpawnContext = 16 << 10
	maxSpawnName    = 80
	maxSpawnTools   = 64
)

// roleTools are the original's role presets (ROLE_TOOL_PRESETS): the tools
// a sub-agent of each role is offered when no list is given.
var roleTools = map[string][]string{
	"researcher": {"web_search", "web_fetch", "search_memory", "save_memory", "read_file", "search_files", "search_content"},
	"writer":     {"read_file", "write_file", "edit_file", "search_files", "search_memory", "save_memory", "generate_docx"},
	"coder":      {"bash", "read_file", "write_file", "edit_file", "search_files", "search_content", "git_status", "git_diff", "git_log", "git_commit"},
	"analyst":    {"bash", "read_file", "write_file", "search_files", "search_content", "web_search", "web_fetch", "search_memory"},
	"reviewer":   {"read_file", "search_files", "search_content", "git_status", "git_diff", "git_log", "search_memory"},
	"planner":    {"create_plan", "add_plan_step", "execute_step", "show_plan", "search_memory", "save_memory", "read_file", "search_files"},
}

// RoleCustom is the role of a sub-agent given its own tool list.
const RoleCustom = "custom"

// RoleTools is the preset tool list of role (nil for an unknown role).
func RoleTools(role string) []string { return slices.Clone(roleTools[role]) }

// ---- spawn_agent ----

type spawnAgentTool struct{}

func (spawnAgentTool) Name() string { return "spawn_agent" }

func (spawnAgentTool) Description() string {
	return "Spawn a specialist sub-agent to handle a specific task on its own: research, code review, " +
		"document writing, analysis. It runs with its own instructions and a subset of your tools (its " +
		"tool calls still need the same approvals), cannot spawn sub-agents itself, and returns its final answer."
}

func (spawnAgentTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"name":{"type":"string","description":"Agent name (e.g. \"Research Assistant\"); default: the role"},` +
		`"role":{"type":"string","description":"Role preset for tool selection: researcher, writer, coder, analyst, reviewer, planner; or custom with tools. Default analyst"},` +
		`"task":{"type":"string","description":"The specific task or question for the sub-agent"},` +
		`"context":{"type":"string","description":"Additional context for the sub-agent's instructions (project info, constraints)"},` +
		`"persona":{"type":"string","description":"Persona id the sub-agent plays (e.g. researcher, coder); optional"},` +
		`"tools":{"type":"array","items":{"type":"string"},"description":"Tool names to give the sub-agent (only your own tools); default: the role preset"}` +
		`},"required":["task"]}`)
}

// Available offers the tool only to a turn that can run sub-agents (not
// to a sub-agent: its env has none, which bounds the nesting depth).
func (spawnAgentTool) Available(env Env) bool { return env.SubAgents != nil }

// spawnInput is spawn_agent's arguments. validate fills the defaults, so
// the approval card, the step text and the run see the same name and role.
type spawnInput struct {
	Name    string   `json:"name"`
	Role    string   `json:"role"`
	Task    string   `json:"task"`
	Context string   `json:"context,omitempty"`
	Persona string   `json:"persona,omitempty"`
	Tools   []string `json:"tools,omitempty"`
}

func (in *spawnInput) validate() error {
	in.Task = strings.TrimSpace(in.Task)
	in.Name = strings.TrimSpace(in.Name)
	in.Role = strings.ToLower(strings.TrimSpace(in.Role))
	switch {
	case in.Task == "":
		return errors.New("task is required")
	case len(in.Task) > maxSpawnTask:
		return fmt.Errorf("task is longer than %d bytes", maxSpawnTask)
	case len(in.Context) > maxSpawnContext:
		return fmt.Errorf("context is longer than %d bytes", maxSpawnContext)
	case utf8.RuneCountInString(in.Name) > maxSpawnName:
		return fmt.Errorf("name is longer than %d characters", maxSpawnName)
	case len(in.Tools) > maxSpawnTools:
		return fmt.Errorf("at most %d tools", maxSpawnTools)
	}
	if len(in.Tools) > 0 {
		in.Role = RoleCustom
	} else if _, ok := roleTools[in.Role]; !ok {
		if in.Role != "" {
			return fmt.Errorf("unknown role %q (researcher, writer, coder, analyst, reviewer, planner, or custom with tools)", in.Role)
		}
		in.Role = "analyst"
	}
	if in.Name == "" {
		in.Name = in.Role
	}
	return nil
}

func (t spawnAgentTool) Decode(input json.RawMessage) (Call, error) { return decodeCall(input, t.run) }

func (spawnAgentTool) run(ctx context.Context, env Env, in *spawnInput) (string, error) {
	if env.SubAgents == nil {
		return "", errors.New("sub-agents are not available here")
	}
	names := in.Tools
	if len(names) == 0 {
		names = roleTools[in.Role]
	}
	return env.SubAgents.Spawn(ctx, SpawnRequest{
		Name: in.Name, Role: in.Role, Task: in.Task, Context: in.Context, Persona: in.Persona, Tools: slices.Clone(names),
	})
}
