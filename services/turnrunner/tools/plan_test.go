package tools

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
)

// planCall runs a plan tool on env and returns its result and, like the
// turn runner, the tool event it would persist.
func planCall(t *testing.T, env Env, name string, input any) (string, protocol.ToolEvent) {
	t.Helper()
	tool, _ := NewRegistry(Config{}).Get(name)
	raw, _ := json.Marshal(input)
	c, err := tool.Decode(raw)
	if err != nil {
		return "Error: " + err.Error(), protocol.ToolEvent{Name: name, Input: raw, Status: "error", IsError: true}
	}
	out, err := c.Run(t.Context(), env)
	if err != nil {
		return "Error: " + err.Error(), protocol.ToolEvent{Name: name, Input: c.Input, Status: "error", IsError: true}
	}
	return out, protocol.ToolEvent{Name: name, Input: c.Input, Result: out, Status: "success"}
}

// TestPlanReplaysFromTheLog: the plan a turn builds is rebuilt exactly by
// replaying the persisted tool events — which is how it survives a runner
// crash — and failed, denied or sub-agent calls change nothing.
func TestPlanReplaysFromTheLog(t *testing.T) {
	env := newEnv(t)
	env.Plan = ReplayPlan()
	if out, _ := planCall(t, env, "add_plan_step", map[string]any{"title": "too early"}); !strings.Contains(out, "use create_plan first") {
		t.Errorf("step before a plan: %q", out)
	}
	var log []protocol.ToolEvent
	for _, c := range []struct {
		name string
		in   map[string]any
	}{
		{"create_plan", map[string]any{"title": "Launch"}},
		{"add_plan_step", map[string]any{"title": "Write notes", "description": "release\nnotes"}},
		{"add_plan_step", map[string]any{"title": "Tag release", "command": "git tag v2"}},
		{"add_plan_step", map[string]any{"title": ""}}, // refused
		{"execute_step", map[string]any{"result": "notes.md written"}},
	} {
		_, ev := planCall(t, env, c.name, c.in)
		log = append(log, ev)
	}
	want := "Plan: Launch (1 of 2 steps done)\n✓ 1. Write notes [done]\n   release notes\n   result: notes.md written\n" +
		"○ 2. Tag release [pending]\n   command: git tag v2"
	if got, _ := planCall(t, env, "show_plan", nil); got != want {
		t.Errorf("show_plan:\n%s\nwant\n%s", got, want)
	}
	// A denied call and a sub-agent's call are in the log but never ran
	// against this plan.
	denied := protocol.ToolEvent{Name: "execute_step", Input: json.RawMessage(`{"result":"x"}`), Status: "denied"}
	sub := protocol.ToolEvent{Name: "create_plan", Input: json.RawMessage(`{"title":"sub"}`), Status: "success", Parent: "call_9"}
	replayed := Env{FilesDir: env.FilesDir, Plan: ReplayPlan(log[:2], append(log[2:], denied, sub))}
	if got, _ := planCall(t, replayed, "show_plan", nil); got != want {
		t.Errorf("replayed show_plan:\n%s\nwant\n%s", got, want)
	}
	planCall(t, replayed, "execute_step", map[string]any{"result": "tagged"})
	if out, _ := planCall(t, replayed, "execute_step", map[string]any{"result": "again"}); out != "All steps complete." {
		t.Errorf("execute_step past the end: %q", out)
	}
}

func TestPlanToolsNeedAPlanEnv(t *testing.T) {
	for _, b := range NewRegistry(Config{}).Bind(newEnv(t), nil) {
		if strings.Contains(b.Name(), "plan") || b.Name() == "execute_step" {
			t.Errorf("%s offered without Env.Plan", b.Name())
		}
	}
}
