// Package workflows is workflow capture: it notices when the same
// sequence of tool calls (at least 3) recurs across the turns of a
// workspace and names it as a pattern, once, so the user can be offered to
// turn it into a reusable command.
//
// The rule (the original's shouldSuggestCapture, applied to turns of a
// workspace rather than to sessions): a turn's sequence of model tool
// calls, if it has at least MinSteps calls, is compared with the
// workspace's earlier recorded sequences (the newest KeepSequences); an
// earlier sequence of at least MinSteps calls matches when
// Similarity ≥ MinSimilarity. With at least MinMatches earlier matches
// (so 3 occurrences in all) the sequence is a pattern, named after its
// first three distinct tools joined by "-then-". A pattern name is
// reported once per workspace, ever.
//
// The session store keeps the state: `<data-dir>/workspaces/<ws>/workflows.json`
// with files, a row of workflow_state per workspace with PostgreSQL
// (Config.Pool). The runner reports each turn's tools over
// protocol.ObserveWorkflow.Subject; /skills lists the patterns over
// protocol.ListWorkflows.Subject.
package workflows

import (
	"fmt"
	"strings"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

// Rule constants.
const (
	MinSteps      = 3
	MinMatches    = 2
	MinSimilarity = 0.6
	KeepSequences = 50
)

// Sequence is one recorded turn's tool calls.
type Sequence struct {
	Session string   `json:"session"`
	Tools   []string `json:"tools"`
	At      string   `json:"at"`
}

// state is the workflows.json document.
type state struct {
	Sequences []Sequence                  `json:"sequences"`
	Patterns  []protocol.CapturedWorkflow `json:"patterns"`
}

// Similarity of two tool sequences, 0–1: 0.4 × the Jaccard index of their
// tool sets + 0.6 × their longest common subsequence over the longer length.
func Similarity(a, b []string) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	setA, setB := map[string]bool{}, map[string]bool{}
	for _, x := range a {
		setA[x] = true
	}
	for _, x := range b {
		setB[x] = true
	}
	inter := 0
	for x := range setA {
		if setB[x] {
			inter++
		}
	}
	union := len(setA) + len(setB) - inter
	return float64(inter)/float64(union)*0.4 + float64(lcs(a, b))/float64(max(len(a), len(b)))*0.6
}

func lcs(a, b []string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			if a[i-1] == b[j-1] {
				cur[j] = prev[j-1] + 1
			} else {
				cur[j] = max(prev[j], cur[j-1])
			}
		}
		prev, cur = cur, prev
		clear(cur)
	}
	return prev[len(b)]
}

// Detect applies the rule to a turn's sequence against earlier ones and
// returns the pattern and the number of occurrences (earlier matches + 1).
func Detect(seq []string, earlier [][]string) (protocol.WorkflowPattern, int, bool) {
	if len(seq) < MinSteps {
		return protocol.WorkflowPattern{}, 0, false
	}
	matches := 0
	for _, e := range earlier {
		if len(e) >= MinSteps && Similarity(seq, e) >= MinSimilarity {
			matches++
		}
	}
	if matches < MinMatches {
		return protocol.WorkflowPattern{}, 0, false
	}
	return NewPattern(seq), matches + 1, true
}

// NewPattern is the template of a sequence: named after its first three
// distinct tools, one step per call.
func NewPattern(seq []string) protocol.WorkflowPattern {
	var unique []string
	seen := map[string]bool{}
	for _, t := range seq {
		if !seen[t] {
			seen[t] = true
			unique = append(unique, t)
		}
	}
	steps := make([]string, len(seq))
	for i, t := range seq {
		steps[i] = fmt.Sprintf("Step %d: Use %s", i+1, t)
	}
	return protocol.WorkflowPattern{
		Name:            strings.Join(unique[:min(3, len(unique))], "-then-"),
		Description:     "Repeated workflow using: " + strings.Join(unique, ", "),
		TriggerPatterns: []string{},
		Steps:           steps,
		Tools:           unique,
		Category:        category(unique),
	}
}

// category is the original's inferCategoryFromTools.
func category(tools []string) string {
	j := strings.ToLower(strings.Join(tools, " "))
	switch {
	case strings.Contains(j, "web_search") || strings.Contains(j, "web_fetch"):
		return "research"
	case strings.Contains(j, "git_") || strings.Contains(j, "edit_file") || strings.Contains(j, "code"):
		return "coding"
	case strings.Contains(j, "memory"):
		return "knowledge"
	case strings.Contains(j, "draft") || strings.Contains(j, "write") || strings.Contains(j, "docx"):
		return "writing"
	case strings.Contains(j, "plan") || strings.Contains(j, "task"):
		return "planning"
	}
	return "general"
}

// observe applies a turn's sequence to st: the sequence is recorded (the
// newest KeepSequences kept) and the pattern it completes is returned when
// the workspace has not seen that pattern before.
func (st *state) observe(session string, seq []string, now time.Time) (protocol.WorkflowPattern, bool) {
	earlier := make([][]string, len(st.Sequences))
	for i, q := range st.Sequences {
		earlier[i] = q.Tools
	}
	p, n, found := Detect(seq, earlier)
	stamp := protocol.Timestamp(now)
	st.Sequences = append(st.Sequences, Sequence{Session: session, Tools: append([]string(nil), seq...), At: stamp})
	if len(st.Sequences) > KeepSequences {
		st.Sequences = st.Sequences[len(st.Sequences)-KeepSequences:]
	}
	if !found {
		return p, false
	}
	for _, c := range st.Patterns {
		if c.Name == p.Name {
			return p, false
		}
	}
	st.Patterns = append(st.Patterns, protocol.CapturedWorkflow{WorkflowPattern: p, DetectedAt: stamp, Occurrences: n})
	return p, true
}
