package tools

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// fakeSubAgents records the sub-agents asked for and answers "done".
type fakeSubAgents struct{ got []SpawnRequest }

func (f *fakeSubAgents) Spawn(_ context.Context, req SpawnRequest) (string, error) {
	f.got = append(f.got, req)
	return "done: " + req.Task, nil
}

func TestSpawnAgentOnlyWhereSubAgentsCanRun(t *testing.T) {
	r := NewRegistry(DefaultConfig())
	has := func(env Env) bool {
		return slices.ContainsFunc(r.Bind(env, nil), func(b Bound) bool { return b.Name() == "spawn_agent" })
	}
	if has(Env{FilesDir: "/x"}) {
		t.Error("spawn_agent offered without sub-agents (a sub-agent's own env)")
	}
	if !has(Env{FilesDir: "/x", SubAgents: &fakeSubAgents{}}) {
		t.Error("spawn_agent not offered to a turn that can run sub-agents")
	}
}

func TestSpawnAgentDecodesRoleAndTools(t *testing.T) {
	subs := &fakeSubAgents{}
	r := NewRegistry(DefaultConfig())
	var spawn Bound
	for _, b := range r.Bind(Env{FilesDir: "/x", SubAgents: subs}, nil) {
		if b.Name() == "spawn_agent" {
			spawn = b
		}
	}
	// Defaults are filled before approval and events see the input.
	input, run, err := spawn.Decode(json.RawMessage(`{"task":"  look it up  "}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(input) != `{"name":"analyst","role":"analyst","task":"look it up"}` {
		t.Errorf("canonical input = %s", input)
	}
	if out, err := run(context.Background()); err != nil || out != "done: look it up" {
		t.Fatalf("run = %q, %v", out, err)
	}
	if got := subs.got[0]; !slices.Equal(got.Tools, RoleTools("analyst")) {
		t.Errorf("tools of the default role = %v", got.Tools)
	}
	// A list of tools makes the role custom: Spawn decides what it gets.
	if _, run, err = spawn.Decode(json.RawMessage(`{"task":"t","role":"coder","tools":["read_file","bash"]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := subs.got[1]; got.Role != RoleCustom || !slices.Equal(got.Tools, []string{"read_file", "bash"}) {
		t.Errorf("custom request = %+v", got)
	}

	for _, bad := range []string{
		`{}`, `{"task":"  "}`, `{"task":"t","role":"hacker"}`, `{"task":"t","Task":"u"}`,
		`{"task":"t","autonomy":"autonomous"}`, `{"task":"` + strings.Repeat("x", maxSpawnTask+1) + `"}`,
	} {
		if _, _, err := spawn.Decode(json.RawMessage(bad)); err == nil {
			t.Errorf("Decode(%.60s) accepted", bad)
		}
	}
}
