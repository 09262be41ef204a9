package protocol

import (
	"strings"
	"testing"
)

// TestSkillMarkdown: a captured pattern renders as the original's
// SKILL.md layout.
func TestSkillMarkdown(t *testing.T) {
	p := WorkflowPattern{Name: "web_search-then-save_memory", Description: "Repeated workflow using: web_search, save_memory",
		TriggerPatterns: []string{}, Steps: []string{"Step 1: Use web_search", "Step 2: Use save_memory"},
		Tools: []string{"web_search", "save_memory"}, Category: "research"}
	want := "---\nname: web-search-then-save-memory\ndescription: Repeated workflow using: web_search, save_memory\n---\n\n" +
		"# web_search-then-save_memory\n\nRepeated workflow using: web_search, save_memory\n\n" +
		"## Steps\n\n1. Step 1: Use web_search\n2. Step 2: Use save_memory\n\n" +
		"## Tools Used\n\n- web_search\n- save_memory\n\n## Category\n\nresearch\n"
	if got := p.SkillMarkdown(); got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	p.TriggerPatterns = []string{"find and keep"}
	if got := p.SkillMarkdown(); !strings.Contains(got, "## Trigger Patterns\n\nActivate this skill when the user asks about: find and keep\n\n## Steps") {
		t.Errorf("trigger patterns missing:\n%s", got)
	}
}
