package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Mind backs get_identity, get_awareness and add_task: the identity and
// awareness of the turn's workspace mind and the user's personal mind.
type Mind interface {
	// Identity is the agent's identity as text ("" when none is set).
	Identity(ctx context.Context) (string, error)
	// Awareness is the live awareness items as text.
	Awareness(ctx context.Context) (string, error)
	// AddTask adds a task to the workspace's awareness and returns its
	// stored content and priority.
	AddTask(ctx context.Context, content string, priority int) (string, int, error)
}

var errNoMind = errors.New("identity and awareness are not available in this session")

// maxTaskContent bounds a task's text (the original's).
const maxTaskContent = 2000

// ---- get_identity ----

type getIdentityTool struct{}

func (getIdentityTool) Name() string { return "get_identity" }

func (getIdentityTool) Description() string {
	return "Get the agent identity (who am I, what is my role)"
}

func (getIdentityTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{},"required":[]}`)
}

// Available hides the tool when the turn has no mind backend.
func (getIdentityTool) Available(env Env) bool { return env.Mind != nil }

type noInput struct{}

func (t getIdentityTool) Decode(input json.RawMessage) (Call, error) { return decodeCall(input, t.run) }

func (getIdentityTool) run(ctx context.Context, env Env, _ *noInput) (string, error) {
	if env.Mind == nil {
		return "", errNoMind
	}
	text, err := env.Mind.Identity(ctx)
	if err != nil {
		return "", fmt.Errorf("reading the identity failed: %v", err)
	}
	if text == "" {
		return "No identity configured yet.", nil
	}
	return text, nil
}

// ---- get_awareness ----

type getAwarenessTool struct{}

func (getAwarenessTool) Name() string { return "get_awareness" }

func (getAwarenessTool) Description() string {
	return "Get current awareness state (active tasks, recent actions, pending items, flags)"
}

func (getAwarenessTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{},"required":[]}`)
}

// Available hides the tool when the turn has no mind backend.
func (getAwarenessTool) Available(env Env) bool { return env.Mind != nil }

func (t getAwarenessTool) Decode(input json.RawMessage) (Call, error) {
	return decodeCall(input, t.run)
}

func (getAwarenessTool) run(ctx context.Context, env Env, _ *noInput) (string, error) {
	if env.Mind == nil {
		return "", errNoMind
	}
	text, err := env.Mind.Awareness(ctx)
	if err != nil {
		return "", fmt.Errorf("reading the awareness failed: %v", err)
	}
	return text, nil
}

// ---- add_task ----

type addTaskTool struct{}

func (addTaskTool) Name() string { return "add_task" }

func (addTaskTool) Description() string {
	return "Add a task to the awareness layer for tracking"
}

func (addTaskTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"content":{"type":"string","description":"Task description"},` +
		`"priority":{"type":"integer","minimum":0,"maximum":10,"description":"Priority (0-10, higher = more important); default 5"}` +
		`},"required":["content"]}`)
}

// Available hides the tool when the turn has no mind backend.
func (addTaskTool) Available(env Env) bool { return env.Mind != nil }

// addTaskInput is add_task's arguments.
type addTaskInput struct {
	Content  string `json:"content"`
	Priority *int   `json:"priority,omitempty"`
}

func (in *addTaskInput) validate() error {
	if strings.TrimSpace(in.Content) == "" {
		return errors.New("content is required")
	}
	if in.Priority != nil && (*in.Priority < 0 || *in.Priority > 10) {
		return errors.New("priority must be between 0 and 10")
	}
	return nil
}

func (t addTaskTool) Decode(input json.RawMessage) (Call, error) { return decodeCall(input, t.run) }

func (addTaskTool) run(ctx context.Context, env Env, in *addTaskInput) (string, error) {
	if env.Mind == nil {
		return "", errNoMind
	}
	content := strings.TrimSpace(in.Content)
	if len(content) > maxTaskContent {
		content = strings.ToValidUTF8(content[:maxTaskContent], "")
	}
	priority := 5
	if in.Priority != nil {
		priority = *in.Priority
	}
	stored, p, err := env.Mind.AddTask(ctx, content, priority)
	if err != nil {
		return "", fmt.Errorf("adding the task failed: %v", err)
	}
	return fmt.Sprintf("Task added: %q (priority: %d)", stored, p), nil
}
