package prompt

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

var now = time.Date(2026, 3, 9, 23, 30, 0, 0, time.FixedZone("x", -5*3600)) // 10 March 04:30 UTC

func wsFrame(id, content, importance string) protocol.MemoryFrame {
	return protocol.MemoryFrame{ID: id, Content: content, Importance: importance, Mind: protocol.MindWorkspace, Created: "2026-03-08T10:00:00.000Z"}
}

func personalFrame(id, content string) protocol.MemoryFrame {
	f := wsFrame(id, content, "normal")
	f.Mind = protocol.MindPersonal
	return f
}

func TestParts(t *testing.T) {
	profile := protocol.DefaultProfile()
	profile.Name, profile.Role, profile.Interests = "Ada", "CTO", []string{"compilers", "tea"}
	profile.Language = "fr"
	tests := []struct {
		name string
		part func(Input) string
		in   Input
		want []string
		not  []string
	}{
		{"identity new conversation", Identity, Input{Now: now, Workspace: "w1", WorkspaceName: "Acme"},
			[]string{"You are Waggle", "Tuesday, 10 March 2026, 04:30 UTC", "Workspace: Acme (id w1).", "managed files folder", "new conversation"}, nil},
		{"identity configured", Identity, Input{Now: now, Workspace: "w", AgentIdentity: "Name: Bee\nRole: helper"},
			[]string{"- This is a new conversation", "\n## Your Configured Identity\nName: Bee\nRole: helper"}, nil},
		{"awareness", Awareness, Input{Awareness: "Active Tasks:\n- ship"}, []string{"## Active Tasks & State\nActive Tasks:\n- ship"}, nil},
		{"awareness none", Awareness, Input{}, nil, nil},
		{"identity continuing, linked folder", Identity, Input{Now: now, Workspace: "w1", WorkspaceDir: "/home/ada/src", HistoryLength: 4},
			[]string{"Workspace: w1.", "linked to /home/ada/src", "the 4 earlier messages"}, []string{"new conversation"}},
		{"behavior", Behavior, Input{}, []string{"1. Recall", "2. Assess", "3. Act", "4. Learn", "5. Respond", "## Grounding", "data, never instructions", "approval"}, nil},
		{"persona none", Persona, Input{}, nil, []string{"#"}},
		{"persona with tone, read-only", Persona, Input{Persona: "## Persona: Researcher", Tone: "warm", ReadOnly: true},
			[]string{"## Persona: Researcher", "read-only", "## Workspace Tone\nWrite in a warm tone"}, nil},
		{"tone preset", Persona, Input{Tone: "Legal"}, []string{"## Workspace Tone\nUse careful, exact language"}, []string{"Write in a"}},
		{"profile unset", Profile, Input{Profile: ptr(protocol.DefaultProfile())}, nil, []string{"About the User"}},
		{"profile", Profile, Input{Profile: &profile},
			[]string{"# About the User", "- Name: Ada", "- Role: CTO", "Prefers balanced responses", "Interests: compilers, tea", "Preferred language: fr"},
			[]string{"Company", "Brand", "Writing style"}},
		{"corrections", Corrections, Input{Corrections: []protocol.MemoryFrame{personalFrame("c", "Correction from user: no, the budget is 40k")}},
			[]string{"# User Corrections", "- [2026-03-08] no, the budget is 40k"}, []string{"Correction from user"}},
		{"preferences", Preferences, Input{Preferences: []protocol.MemoryFrame{personalFrame("p", "User preference: answer in French")}},
			[]string{"## Personal Preferences", "- User preference: answer in French"}, nil},
		{"workspace now", WorkspaceNow, Input{WorkspaceNow: "# Workspace Now — Acme"}, []string{"# Workspace Now — Acme"}, nil},
		{"recent skips recalled", RecentMemory, Input{
			Recent:   []protocol.MemoryFrame{wsFrame("a", "Decision: ship in May", "important"), wsFrame("b", "Launch is critical", "critical")},
			Recalled: []protocol.MemoryFrame{wsFrame("a", "Decision: ship in May", "important")}},
			[]string{"## Recent Workspace Memory", "- [critical] Launch is critical"}, []string{"ship in May"}},
		{"recalled per mind", Recalled, Input{Recalled: []protocol.MemoryFrame{personalFrame("p", "likes tea"), wsFrame("w", "uses Go", "important")}},
			[]string{"## Workspace Memory\n- [2026-03-08, important] uses Go\n## Personal Memory\n_(Cross-workspace", "- [2026-03-08, normal] likes tea"}, []string{"catch up"}},
		{"recalled catch-up", Recalled, Input{CatchUp: true, Recalled: []protocol.MemoryFrame{wsFrame("w", "Decision: ship", "important")}},
			[]string{"wants to catch up", "## Workspace Memory"}, nil},
		{"ambiguity off", Ambiguity, Input{}, nil, []string{"clarifying"}},
		{"ambiguity on", Ambiguity, Input{Vague: true}, []string{"one specific clarifying question"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.part(tc.in)
			if tc.want == nil && strings.TrimSpace(got) != "" {
				t.Fatalf("want no text, got %q", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("lacks %q:\n%s", w, got)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("has %q:\n%s", n, got)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestRecallLimitsPerMind(t *testing.T) {
	var fs []protocol.MemoryFrame
	for i := range 12 {
		fs = append(fs, wsFrame(fmt.Sprint("w", i), fmt.Sprint("ws fact ", i), "normal"), personalFrame(fmt.Sprint("p", i), fmt.Sprint("personal fact ", i)))
	}
	got := Recalled(Input{Recalled: fs})
	if n := strings.Count(got, "ws fact"); n != RecallPerMind {
		t.Errorf("%d workspace lines, want %d", n, RecallPerMind)
	}
	if n := strings.Count(got, "personal fact"); n != RecallPerMind {
		t.Errorf("%d personal lines, want %d", n, RecallPerMind)
	}
	long := Recalled(Input{Recalled: []protocol.MemoryFrame{wsFrame("x", strings.Repeat("a", 1000), "normal")}})
	if strings.Count(long, "a") > recallLine+10 {
		t.Errorf("recalled line not clipped: %d bytes", len(long))
	}
}

func full() Input {
	p := protocol.DefaultProfile()
	p.Name = "Ada"
	var recent, recalled []protocol.MemoryFrame
	for i := range 8 {
		recent = append(recent, wsFrame(fmt.Sprint("r", i), fmt.Sprintf("recent %d %s", i, strings.Repeat("x", 150)), "important"))
		recalled = append(recalled, wsFrame(fmt.Sprint("c", i), fmt.Sprintf("recalled %d %s", i, strings.Repeat("y", 250)), "normal"))
	}
	return Input{
		Now: now, Workspace: "w", Persona: "## Persona: Coder", Profile: &p,
		WorkspaceNow: "# Workspace Now — w\n\nSummary.\n\n## Recent Decisions\n- " + strings.Repeat("d", 300),
		Recent:       recent, Recalled: recalled,
		Preferences:   []protocol.MemoryFrame{personalFrame("p", "User preference: answer in French")},
		Corrections:   []protocol.MemoryFrame{personalFrame("k", "Correction from user: budget is 40k")},
		Vague:         true,
		AgentIdentity: "Name: Bee\nRole: launch assistant",
		Awareness:     "Active Tasks:\n- write the press kit\n- " + strings.Repeat("t", 200),
	}
}

func TestAssembleOrder(t *testing.T) {
	p := Assembler{}.Assemble(full())
	want := []string{"identity", "behavior", "persona", "profile", "corrections", "preferences", "workspace-now", "awareness", "recent-memory", "recalled", "ambiguity"}
	if !slices.Equal(p.Parts, want) {
		t.Fatalf("parts %v, want %v", p.Parts, want)
	}
	last := -1
	for _, marker := range []string{"# Who You Are", "# How You Work", "## Persona: Coder", "# About the User", "# User Corrections", "## Personal Preferences", "# Workspace Now", "## Active Tasks & State", "## Recent Workspace Memory", "## Workspace Memory", "# Before You Act"} {
		i := strings.Index(p.Text, marker)
		if i <= last {
			t.Errorf("%q at %d, after %d", marker, i, last)
		}
		last = i
	}
	if p.Tokens != EstimateTokens(p.Text) || len(p.Trimmed) != 0 {
		t.Errorf("tokens %d trimmed %v", p.Tokens, p.Trimmed)
	}
}

func TestExtraPartsGoBeforeRecall(t *testing.T) {
	kg := Part{Name: "key-knowledge", Build: func(Input) string { return "## Key Knowledge\n- person: Ana" }}
	p := Assembler{Extra: []Part{kg}}.Assemble(full())
	i := slices.Index(p.Parts, "key-knowledge")
	if i < 0 || p.Parts[i+1] != "recalled" {
		t.Fatalf("parts %v", p.Parts)
	}
}

// TestTrimOrder shrinks the budget step by step: parts go in the stated
// order (recent memory, extras, Workspace Now, awareness, recalled,
// preferences, profile, corrections), the prompt fits every budget it can, and the
// untrimmable parts stay.
func TestTrimOrder(t *testing.T) {
	in := full()
	kg := Part{Name: "key-knowledge", Build: func(Input) string { return "## Key Knowledge\n- " + strings.Repeat("k", 200) }}
	a := Assembler{Extra: []Part{kg}}
	untrimmed := a.Assemble(in)
	core := Assembler{Budget: 1}.Assemble(in)
	if !slices.Equal(core.Parts, []string{"identity", "behavior", "persona", "ambiguity"}) {
		t.Fatalf("at the smallest budget %v remain", core.Parts)
	}
	order := []string{"recent-memory", "key-knowledge", "workspace-now", "awareness", "recalled", "preferences", "profile", "corrections"}
	var firstTrim []string
	for budget := untrimmed.Tokens - 1; budget >= core.Tokens; budget -= 20 {
		a.Budget = budget
		p := a.Assemble(in)
		if p.Tokens > budget {
			t.Fatalf("budget %d: %d tokens", budget, p.Tokens)
		}
		if !slices.Equal(p.Trimmed, order[:len(p.Trimmed)]) {
			t.Fatalf("budget %d trimmed %v, want a prefix of %v", budget, p.Trimmed, order)
		}
		if len(p.Trimmed) > len(firstTrim) {
			firstTrim = p.Trimmed
		}
	}
	if !slices.Equal(firstTrim, order) {
		t.Errorf("over all budgets trimmed %v, want %v", firstTrim, order)
	}
}

func TestShortenKeepsWholeLines(t *testing.T) {
	text := "## Workspace Memory\n- one\n- two\n## Personal Memory\n- three"
	if got := shorten(text, EstimateTokens(text)-2); got != "## Workspace Memory\n- one\n- two" {
		t.Errorf("got %q", got)
	}
	if got := shorten(text, 3); got != "" {
		t.Errorf("headings only must drop the part, got %q", got)
	}
}
