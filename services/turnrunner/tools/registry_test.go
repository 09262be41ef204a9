package tools

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

type stubTool struct {
	name string
	run  func(ctx context.Context, env Env, input json.RawMessage) (string, error)
}

func (s stubTool) Name() string        { return s.name }
func (s stubTool) Description() string { return "stub " + s.name }
func (s stubTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{}}`)
}
func (s stubTool) Decode(input json.RawMessage) (Call, error) {
	return Call{Input: input, run: func(ctx context.Context, env Env) (string, error) { return s.run(ctx, env, input) }}, nil
}

func TestNewRegistryBuiltins(t *testing.T) {
	all := []string{"read_file", "write_file", "edit_file", "list_files", "search_files", "search_content",
		"bash", "save_memory", "search_memory", "generate_docx", "web_fetch",
		"git_status", "git_diff", "git_log", "git_commit", "git_branch", "web_search",
		"read_document", "generate_xlsx", "create_plan", "add_plan_step", "execute_step", "show_plan",
		"query_knowledge", "correct_knowledge", "get_identity", "get_awareness", "add_task", "spawn_agent"}
	if got := NewRegistry(DefaultConfig()).Names(); !slices.Equal(got, all) {
		t.Errorf("Names() with bash = %v, want %v", got, all)
	}
	noBash := slices.DeleteFunc(slices.Clone(all), func(n string) bool { return n == "bash" })
	r := NewRegistry(Config{})
	if got := r.Names(); !slices.Equal(got, noBash) {
		t.Errorf("Names() without bash = %v, want %v", got, noBash)
	}
	if _, ok := r.Get("bash"); ok {
		t.Error("bash registered although EnableBash is false")
	}
}

func TestSchemasAreValid(t *testing.T) {
	r := NewRegistry(DefaultConfig())
	for _, name := range r.Names() {
		tool, _ := r.Get(name)
		var s struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(tool.Schema(), &s); err != nil {
			t.Errorf("%s: schema is not valid JSON: %v", name, err)
			continue
		}
		if s.Type != "object" || s.Properties == nil || s.Required == nil {
			t.Errorf("%s: schema lacks type object/properties/required: %s", name, tool.Schema())
		}
		for _, req := range s.Required {
			if _, ok := s.Properties[req]; !ok {
				t.Errorf("%s: required %q not among properties", name, req)
			}
		}
		if len(tool.Description()) < 40 {
			t.Errorf("%s: description too thin: %q", name, tool.Description())
		}
	}
}

func TestRegisterDuplicate(t *testing.T) {
	r := NewRegistry(Config{})
	err := r.Register(stubTool{name: "read_file"})
	if !errors.Is(err, ErrDuplicateTool) {
		t.Fatalf("Register duplicate: err = %v, want ErrDuplicateTool", err)
	}
	if err := r.Register(stubTool{name: ""}); err == nil {
		t.Error("Register with empty name succeeded")
	}
	if err := r.Register(stubTool{name: "custom"}); err != nil {
		t.Fatalf("Register custom: %v", err)
	}
	if names := r.Names(); names[len(names)-1] != "custom" {
		t.Errorf("custom tool not last in Names(): %v", names)
	}
}

func TestBind(t *testing.T) {
	r := NewRegistry(DefaultConfig())
	var gotEnv Env
	_ = r.Register(stubTool{name: "probe", run: func(_ context.Context, env Env, in json.RawMessage) (string, error) {
		gotEnv = env
		return "got " + string(in), nil
	}})
	// Every optional dependency present: all tools are available.
	env := Env{FilesDir: "/x", Workspace: "w", Memory: &fakeMemory{},
		WebSearch: WebSearchConfig{Provider: SearchSearXNG, URL: "http://127.0.0.1:1"}, Plan: &Plan{}, Knowledge: &fakeKnowledge{}, Mind: &fakeMind{},
		SubAgents: &fakeSubAgents{}}

	blocked := map[string]bool{"bash": true, "write_file": true}
	bound := r.Bind(env, func(n string) bool { return !blocked[n] })
	var names []string
	for _, b := range bound {
		names = append(names, b.Name())
	}
	for n := range blocked {
		if slices.Contains(names, n) {
			t.Errorf("Bind exposed blocked tool %s", n)
		}
	}
	if !slices.Contains(names, "read_file") || !slices.Contains(names, "save_memory") {
		t.Errorf("Bind hid allowed tools: %v", names)
	}

	probe := bound[len(bound)-1]
	if probe.Name() != "probe" || probe.Description() != "stub probe" || len(probe.Schema()) == 0 {
		t.Fatalf("last bound tool = %s, want probe with its description and schema", probe.Name())
	}
	out, err := probe.Call(context.Background(), json.RawMessage(`{"a":1}`))
	if err != nil || out != `got {"a":1}` {
		t.Errorf("Call = %q, %v", out, err)
	}
	if gotEnv.Workspace != "w" || gotEnv.FilesDir != "/x" {
		t.Errorf("tool ran with env %+v, want the bound env", gotEnv)
	}

	if all := r.Bind(env, nil); len(all) != len(r.Names()) {
		t.Errorf("Bind(nil allow) = %d tools, want all %d", len(all), len(r.Names()))
	}
}

func TestBindHidesMemoryToolsWithoutMemory(t *testing.T) {
	bound := NewRegistry(DefaultConfig()).Bind(Env{FilesDir: "/x"}, nil)
	for _, b := range bound {
		if b.Name() == "save_memory" || b.Name() == "search_memory" {
			t.Errorf("%s bound although Env.Memory is nil", b.Name())
		}
	}
}

func TestBoundCallRecoversPanic(t *testing.T) {
	r := NewRegistry(Config{})
	_ = r.Register(stubTool{name: "boom", run: func(context.Context, Env, json.RawMessage) (string, error) {
		panic("kaput")
	}})
	bound := r.Bind(Env{}, func(n string) bool { return n == "boom" })
	if len(bound) != 1 {
		t.Fatalf("Bind = %d tools, want 1", len(bound))
	}
	_, err := bound[0].Call(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "kaput") {
		t.Errorf("Call of panicking tool: err = %v, want error mentioning the panic", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"zero", Config{}, false},
		{"defaults", DefaultConfig(), false},
		{"negative read limit", Config{ReadLimit: -1}, true},
		{"timeout above max", Config{BashTimeout: 20 * 60e9, BashMaxTimeout: 60e9}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); (err != nil) != tt.wantErr {
				t.Errorf("Validate() = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

// agentTool mirrors the agent loop's interface; Bound must satisfy it.
type agentTool interface {
	Name() string
	Description() string
	Schema() json.RawMessage
	Call(ctx context.Context, input json.RawMessage) (string, error)
}

var _ agentTool = Bound{}
