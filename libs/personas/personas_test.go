package personas

import "testing"

func TestAllows(t *testing.T) {
	hr, _ := Get("hr-manager")
	coder, _ := Get("coder")
	open := Persona{ID: "custom"}
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
	for _, id := range []string{"hr-manager", "legal-professional", "finance-owner"} {
		if _, ok := Get(id); !ok {
			t.Errorf("regulated persona %s missing", id)
		}
	}
	if _, ok := Get("nobody"); ok {
		t.Error("unknown persona found")
	}
}
