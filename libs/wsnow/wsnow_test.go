package wsnow

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

var now = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

func frame(content, importance, created string) protocol.MemoryFrame {
	return protocol.MemoryFrame{Content: content, Importance: importance, Created: created, Mind: protocol.MindWorkspace}
}

func TestEmptyWorkspaceHasOnboardingAndNoPromptBlock(t *testing.T) {
	n := Build(Input{Workspace: protocol.Workspace{ID: "w", Name: "Acme"}, Now: now})
	if !strings.Contains(n.Summary, "Everything you discuss in Acme") {
		t.Errorf("summary %q", n.Summary)
	}
	if len(n.SuggestedPrompts) != 3 || n.SuggestedPrompts[0] != "Tell me about this project so I can remember it" {
		t.Errorf("prompts %q", n.SuggestedPrompts)
	}
	if n.RecentThreads == nil || n.RecentDecisions == nil || n.PendingTasks == nil || n.NextActions == nil {
		t.Error("empty lists must encode as [] for the web app")
	}
	if got := Format(n); got != "" {
		t.Errorf("format of an empty workspace %q", got)
	}
}

func TestBriefingFromSessionsAndFrames(t *testing.T) {
	in := Input{
		Workspace: protocol.Workspace{ID: "w", Name: "Acme", Persona: "researcher"},
		Sessions: []protocol.SessionInfo{
			{ID: "s2", Title: "Pricing review", MessageCount: 4, LastActive: "2026-03-10T09:00:00.000Z"},
			{ID: "s1", Title: nil, MessageCount: 2, LastActive: "2026-03-09T09:00:00.000Z"},
			{ID: "s0", MessageCount: 0},
		},
		Frames: []protocol.MemoryFrame{
			frame("Task: draft the Q2 pricing memo", "normal", "2026-03-10T10:00:00.000Z"),
			frame("Decision: we go with usage-based pricing. Reviewed by Ana.", "important", "2026-03-10T09:30:00.000Z"),
			frame("Blocker: legal has not approved the terms", "normal", "2026-03-09T10:00:00.000Z"),
			frame("scratch note", "temporary", "2026-03-09T08:00:00.000Z"),
			frame("old idea", "deprecated", "2026-03-08T08:00:00.000Z"),
		},
		MemoryCount: 5, Now: now,
	}
	n := Build(in)
	if n.Workspace.PersonaID != "researcher" || n.Stats.SessionCount != 3 || n.Stats.MemoryCount != 5 {
		t.Errorf("workspace %+v stats %+v", n.Workspace, n.Stats)
	}
	if len(n.RecentThreads) != 2 || n.RecentThreads[0].Title != "Pricing review" || n.RecentThreads[1].Title != "s1" {
		t.Errorf("threads %+v", n.RecentThreads)
	}
	if len(n.RecentDecisions) != 1 || n.RecentDecisions[0] != (protocol.DatedText{Content: "Decision: we go with usage-based pricing. Reviewed by Ana", Date: "2026-03-10"}) {
		t.Errorf("decisions %+v", n.RecentDecisions)
	}
	if len(n.RecentMemories) != 3 || n.RecentMemories[0].Importance != "important" {
		t.Errorf("memories (temporary and deprecated left out, important first) %+v", n.RecentMemories)
	}
	if !slices.Equal(n.PendingTasks, []string{"draft the Q2 pricing memo", "legal has not approved the terms"}) {
		t.Errorf("pending %q", n.PendingTasks)
	}
	if !slices.Equal(n.NextActions, []string{"Resolve: legal has not approved the terms", "Continue: draft the Q2 pricing memo"}) {
		t.Errorf("next %q", n.NextActions)
	}
	if !strings.HasPrefix(n.Summary, "Decision: we go with usage-based pricing") || !strings.Contains(n.Summary, "Active today with 5 memories across 3 sessions.") {
		t.Errorf("summary %q", n.Summary)
	}
	if n.SuggestedPrompts[0] != "Continue: Pricing review" || !slices.Contains(n.SuggestedPrompts, "What's blocking us right now?") {
		t.Errorf("prompts %q", n.SuggestedPrompts)
	}
	if n.LastActive != "2026-03-10T09:00:00.000Z" {
		t.Errorf("last active %q", n.LastActive)
	}
	text := Format(n)
	for _, want := range []string{"# Workspace Now — Acme", "## Recent Decisions\n- Decision: we go with usage-based pricing", "## Active Threads\n- Pricing review (last active 2026-03-10)", "## Progress\n- task: draft the Q2 pricing memo", "## Likely Next Actions\n- Resolve: legal"} {
		if !strings.Contains(text, want) {
			t.Errorf("format lacks %q:\n%s", want, text)
		}
	}
}

func TestGreetingAfterAWeekAway(t *testing.T) {
	n := Build(Input{
		Workspace:   protocol.Workspace{ID: "w", Name: "Acme"},
		Sessions:    []protocol.SessionInfo{{ID: "s", Title: "t", MessageCount: 2, LastActive: "2026-03-03T12:00:00Z"}},
		Frames:      []protocol.MemoryFrame{frame("The Acme project ships in May", "normal", "2026-03-03T12:00:00Z")},
		MemoryCount: 1, Now: now,
	})
	if n.Greeting != "You've been away 7 days. Here's what happened:" {
		t.Errorf("greeting %q", n.Greeting)
	}
	if !strings.Contains(n.Summary, "Last active 7 days ago. 1 memory across 1 session.") {
		t.Errorf("summary %q", n.Summary)
	}
}
