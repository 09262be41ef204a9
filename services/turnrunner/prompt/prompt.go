// Package prompt assembles the agent's system prompt from named parts, in
// a fixed order and under a token budget that trims parts in a stated
// order (docs/agent.md shows an assembled prompt).
package prompt

import (
	"slices"
	"strings"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

// DefaultBudget is the system prompt's budget in estimated tokens when the
// runner names none: about a tenth of a small (128k) model context, so the
// conversation keeps the rest.
const DefaultBudget = 12000

// Input is everything a turn knows when its prompt is built.
type Input struct {
	Now time.Time
	// Workspace is the workspace's id and Name its display name.
	Workspace, WorkspaceName string
	// WorkspaceDir is the folder the file tools work in ("" for the
	// workspace's managed files folder).
	WorkspaceDir string
	// Persona is the resolved persona's prompt section ("" for none);
	// Tone the workspace's tone.
	Persona, Tone string
	// ReadOnly says the persona may not change files or run commands.
	ReadOnly bool
	// AgentIdentity is the identity configured for the agent (the
	// workspace's, else the user's; "" for none), Awareness its live
	// awareness items as text.
	AgentIdentity, Awareness string
	// Profile is the user's profile (nil: none could be read).
	Profile *protocol.Profile
	// WorkspaceNow is the formatted briefing ("" for none).
	WorkspaceNow string
	// Recent are frames preloaded every turn: the workspace's important
	// ones. Preferences are the last preference and style frames and
	// Corrections the last correction frames (newest first).
	Recent, Preferences, Corrections []protocol.MemoryFrame
	// Recalled are this turn's recalled frames, best first, each with its
	// Mind.
	Recalled []protocol.MemoryFrame
	// CatchUp says the message asked to be caught up (recall by
	// importance and recency).
	CatchUp bool
	// Vague says the turn's message is a vague first message that GEPA did
	// not expand: the ambiguity guard applies.
	Vague bool
	// HistoryLength is how many earlier messages the model sees.
	HistoryLength int
}

// Part is one named section of the prompt. Build returns its text ("" to
// leave it out). Trim, when set, is the part's place in the trim order
// (1 is trimmed first); 0 parts are never trimmed.
type Part struct {
	Name  string
	Build func(Input) string
	Trim  int
}

// Parts are the prompt's sections in prompt order. Extra parts (key
// knowledge from the knowledge graph, later) go through Assembler.Extra,
// placed before the recalled memories.
func Parts() []Part {
	return []Part{
		{Name: "identity", Build: Identity},
		{Name: "behavior", Build: Behavior},
		{Name: "persona", Build: Persona},
		{Name: "profile", Build: Profile, Trim: 7},
		{Name: "corrections", Build: Corrections, Trim: 8},
		{Name: "preferences", Build: Preferences, Trim: 6},
		{Name: "workspace-now", Build: WorkspaceNow, Trim: 3},
		{Name: "awareness", Build: Awareness, Trim: 4},
		{Name: "recent-memory", Build: RecentMemory, Trim: 1},
		{Name: "recalled", Build: Recalled, Trim: 5},
		{Name: "ambiguity", Build: Ambiguity},
	}
}

// Assembler builds prompts; its zero value uses Parts and DefaultBudget.
type Assembler struct {
	// Budget is the most estimated tokens the prompt may have; 0 is
	// DefaultBudget. Untrimmable parts are always kept, even over it.
	Budget int
	// Extra are parts added by other features (key knowledge), inserted
	// before "recalled"; give them a Trim rank (they default to 2: after
	// the recent memory, before Workspace Now).
	Extra []Part
}

// Prompt is an assembled prompt.
type Prompt struct {
	Text string
	// Tokens is the estimate of Text's size.
	Tokens int
	// Parts are the names of the parts it holds, in order; Trimmed those
	// shortened or dropped to fit the budget.
	Parts, Trimmed []string
}

// EstimateTokens is the size estimate used for the budget: a token per 4
// bytes, rounded up (the original's estimate; it errs high for English).
func EstimateTokens(s string) int { return (len(s) + 3) / 4 }

const sep = "\n\n"

type built struct {
	name string
	text string
	trim int
}

// Assemble builds the prompt for in.
func (a Assembler) Assemble(in Input) Prompt {
	budget := a.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	parts := Parts()
	if len(a.Extra) > 0 {
		i := slices.IndexFunc(parts, func(p Part) bool { return p.Name == "recalled" })
		extra := slices.Clone(a.Extra)
		for j := range extra {
			if extra[j].Trim == 0 {
				extra[j].Trim = 2
			}
		}
		parts = slices.Insert(parts, i, extra...)
	}
	var bs []built
	for _, p := range parts {
		if text := strings.TrimSpace(p.Build(in)); text != "" {
			bs = append(bs, built{p.Name, text, p.Trim})
		}
	}
	var trimmed []string
	order := slices.Clone(bs)
	slices.SortStableFunc(order, func(x, y built) int { return x.trim - y.trim })
	for _, victim := range order {
		if victim.trim == 0 || size(bs) <= budget {
			continue
		}
		i := slices.IndexFunc(bs, func(b built) bool { return b.name == victim.name })
		trimmed = append(trimmed, victim.name)
		bs[i].text = shorten(bs[i].text, EstimateTokens(bs[i].text)-(size(bs)-budget))
		if bs[i].text == "" {
			bs = slices.Delete(bs, i, i+1)
		}
	}
	out := Prompt{Trimmed: trimmed}
	texts := make([]string, 0, len(bs))
	for _, b := range bs {
		texts = append(texts, b.text)
		out.Parts = append(out.Parts, b.name)
	}
	out.Text = strings.Join(texts, sep)
	out.Tokens = EstimateTokens(out.Text)
	return out
}

func size(bs []built) int {
	n := 0
	for i, b := range bs {
		if i > 0 {
			n += len(sep)
		}
		n += len(b.text)
	}
	return (n + 3) / 4
}

// shorten drops a part's last lines until it fits in tokens, then any
// heading left without lines; a part with nothing left is dropped ("").
func shorten(text string, tokens int) string {
	lines := strings.Split(text, "\n")
	for len(lines) > 0 && EstimateTokens(strings.Join(lines, "\n")) > tokens {
		lines = lines[:len(lines)-1]
	}
	// A heading whose lines were all cut goes too.
	for len(lines) > 0 && isHeading(lines[len(lines)-1]) {
		lines = lines[:len(lines)-1]
	}
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n")
}

func isHeading(line string) bool {
	l := strings.TrimSpace(line)
	return l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "_")
}
