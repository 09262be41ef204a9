package personas

import (
	"slices"
	"strings"
	"testing"
)

func TestAllows(t *testing.T) {
	hr, _ := Get("hr-manager")
	coder, _ := Get("coder")
	open := Persona{ID: "custom"}
	planner, _ := Get("planner")
	general, _ := Get(Default)
	coord, _ := Get("coordinator")
	cases := []struct {
		p    Persona
		tool string
		want bool
	}{
		{hr, "read_file", true},
		{hr, "save_memory", true},
		{hr, "search_memory", true},
		{hr, "bash", false},          // denied
		{hr, "edit_file", false},     // not on the allowlist
		{hr, "list_files", false},    // not on the allowlist
		{coder, "bash", true},        // allowed
		{coder, "save_memory", true}, // always available
		{coder, "generate_docx", false},
		{open, "bash", true}, // no lists: everything
		// Read-only: only the read-only allowlist, not even memory writes.
		{planner, "read_file", true},
		{planner, "web_search", true},
		{planner, "save_memory", false},
		{planner, "write_file", false},
		{planner, "bash", false},
		{planner, "github__create_issue", false}, // an MCP tool
		// The coordinator delegates: spawn_agent, memory, knowledge and
		// plans, nothing that touches files, commands or the web.
		{coord, "spawn_agent", true},
		{coord, "search_memory", true},
		{coord, "save_memory", true},
		{coord, "query_knowledge", true},
		{coord, "get_awareness", true},
		{coord, "execute_step", true},
		{coord, "read_file", false},
		{coord, "write_file", false},
		{coord, "bash", false},
		{coord, "web_fetch", false},
		{coord, "generate_xlsx", false},
		{coord, "correct_knowledge", false},
		{coord, "git_branch", false},
		{coord, "github__create_issue", false},
		{general, "bash", true},
		{general, "github__create_issue", true},
	}
	for _, tc := range cases {
		if got := tc.p.Allows(tc.tool); got != tc.want {
			t.Errorf("%s allows %s = %v, want %v", tc.p.ID, tc.tool, got, tc.want)
		}
	}
}

func TestCatalogue(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range List() {
		if seen[p.ID] || p.Name == "" || p.SystemPrompt == "" || p.Description == "" {
			t.Errorf("persona %+v: duplicate or incomplete", p)
		}
		seen[p.ID] = true
	}
	// The original's built-ins, in its order.
	want := []string{"researcher", "writer", "analyst", "coder", "project-manager", "executive-assistant",
		"sales-rep", "marketer", "product-manager-senior", "hr-manager", "legal-professional", "finance-owner",
		"consultant", Default, "planner", "verifier", "coordinator", "support-agent", "ops-manager", "data-engineer",
		"recruiter", "creative-director"}
	var got []string
	for _, p := range List() {
		got = append(got, p.ID)
	}
	if !slices.Equal(got, want) {
		t.Errorf("catalogue\n got %v\nwant %v", got, want)
	}
	for _, p := range List() {
		if !strings.HasPrefix(p.SystemPrompt, "## Persona: "+p.Name+"\n") || p.Tagline == "" || len(p.BestFor) == 0 || p.WontDo == "" || p.Icon == "" {
			t.Errorf("persona %s: prompt must open with its heading, and every picker field is set", p.ID)
		}
		// A delegating persona's sub-agents may get more than it has: it
		// must not be read-only, whose limit binds its sub-agents too.
		if p.Delegates && (p.ReadOnly || !p.Allows("spawn_agent")) {
			t.Errorf("persona %s delegates but is read-only or cannot spawn", p.ID)
		}
		// An allowlist never takes memory search away (AlwaysAvailable).
		if len(p.Tools) > 0 && !p.Allows("search_memory") {
			t.Errorf("persona %s cannot search memory", p.ID)
		}
	}
	if p, ok := Get(Default); !ok || p.ReadOnly {
		t.Errorf("default persona %q: %+v", Default, p)
	}
	if _, ok := Get("nobody"); ok {
		t.Error("unknown persona found")
	}
}
