package tools

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
)

type fakeMind struct {
	identity, awareness string
	err                 error
	added               []string
	priorities          []int
}

func (m *fakeMind) Identity(context.Context) (string, error)  { return m.identity, m.err }
func (m *fakeMind) Awareness(context.Context) (string, error) { return m.awareness, m.err }
func (m *fakeMind) AddTask(_ context.Context, content string, priority int) (string, int, error) {
	if m.err != nil {
		return "", 0, m.err
	}
	m.added, m.priorities = append(m.added, content), append(m.priorities, priority)
	return content, priority, nil
}

func callTool(t *testing.T, tool Tool, env Env, input string) (string, error) {
	t.Helper()
	c, err := tool.Decode(json.RawMessage(input))
	if err != nil {
		return "", err
	}
	return c.run(context.Background(), env)
}

func TestMindTools(t *testing.T) {
	m := &fakeMind{awareness: "Active Tasks:\n- ship it"}
	env := Env{Mind: m}
	tests := []struct {
		name  string
		tool  Tool
		input string
		want  string
		bad   bool
	}{
		{"identity unset", getIdentityTool{}, `{}`, "No identity configured yet.", false},
		{"awareness", getAwarenessTool{}, `{}`, "Active Tasks:\n- ship it", false},
		{"identity takes no arguments", getIdentityTool{}, `{"who":"me"}`, "", true},
		{"task default priority", addTaskTool{}, `{"content":" write the memo "}`, `Task added: "write the memo" (priority: 5)`, false},
		{"task priority", addTaskTool{}, `{"content":"call Ana","priority":9}`, `Task added: "call Ana" (priority: 9)`, false},
		{"task without content", addTaskTool{}, `{"content":"  "}`, "", true},
		{"task priority out of range", addTaskTool{}, `{"content":"x","priority":11}`, "", true},
		{"task priority not a number", addTaskTool{}, `{"content":"x","priority":"high"}`, "", true},
		{"task unknown key", addTaskTool{}, `{"content":"x","Priority":1}`, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := callTool(t, tc.tool, env, tc.input)
			if tc.bad {
				if err == nil {
					t.Fatalf("accepted %s: %q", tc.input, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if len(m.added) != 2 {
		t.Errorf("tasks added %q", m.added)
	}
	if _, err := callTool(t, getAwarenessTool{}, Env{Mind: &fakeMind{err: errors.New("store down")}}, `{}`); err == nil {
		t.Error("a failing store is not an error")
	}
	for _, tool := range []Availability{getIdentityTool{}, getAwarenessTool{}, addTaskTool{}} {
		if tool.Available(Env{}) {
			t.Errorf("%T available without a mind", tool)
		}
	}
}
