package protocol

import (
	"fmt"
	"regexp"
	"strings"
)

// WorkflowPattern is a repeated tool sequence offered as a reusable skill
// (the original's SkillTemplate shape, sent in the workflow_captured
// notification).
type WorkflowPattern struct {
	Name            string   `json:"name"`
	Description     string   `json:"description"`
	TriggerPatterns []string `json:"triggerPatterns"`
	Steps           []string `json:"steps"`
	Tools           []string `json:"tools"`
	Category        string   `json:"category"`
}

// SkillMarkdown is the pattern as a skill file (the original's SKILL.md
// layout: front matter with a kebab-case name and the description, then
// the title, trigger patterns, numbered steps, tools and category). Its
// length is what GET /api/mind/skills reports of a skill.
func (p WorkflowPattern) SkillMarkdown() string {
	kebab := strings.Trim(nonAlnum.ReplaceAllString(strings.ToLower(p.Name), "-"), "-")
	var b strings.Builder
	fmt.Fprintf(&b, "---\nname: %s\ndescription: %s\n---\n\n# %s\n\n%s\n\n", kebab, p.Description, p.Name, p.Description)
	if len(p.TriggerPatterns) > 0 {
		fmt.Fprintf(&b, "## Trigger Patterns\n\nActivate this skill when the user asks about: %s\n\n", strings.Join(p.TriggerPatterns, ", "))
	}
	b.WriteString("## Steps\n\n")
	for i, s := range p.Steps {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%d. %s", i+1, s)
	}
	b.WriteString("\n\n")
	if len(p.Tools) > 0 {
		b.WriteString("## Tools Used\n\n")
		for _, t := range p.Tools {
			b.WriteString("- " + t + "\n")
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "## Category\n\n%s\n", p.Category)
	return b.String()
}

var nonAlnum = regexp.MustCompile(`[^a-z0-9]+`)

// CapturedWorkflow is a stored pattern: when it was found and how often
// its sequence had occurred by then.
type CapturedWorkflow struct {
	WorkflowPattern
	DetectedAt  string `json:"detectedAt"`
	Occurrences int    `json:"occurrences"`
}

// WorkflowObserveRequest is one finished turn's model tool calls, in order.
type WorkflowObserveRequest struct {
	Workspace string   `json:"workspace"`
	Session   string   `json:"session"`
	Tools     []string `json:"tools"`
}

// WorkflowObserveReply carries the pattern the turn completed, when it is
// new to the workspace (nil otherwise).
type WorkflowObserveReply struct {
	Pattern *WorkflowPattern `json:"pattern,omitempty"`
}

// WorkflowList is a workspace's captured patterns.
type WorkflowList struct {
	Workflows []CapturedWorkflow `json:"workflows"`
}
