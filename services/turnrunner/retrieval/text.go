package retrieval

import (
	"fmt"
	"regexp"
	"strings"
)

// Passage is one retrieval hit.
type Passage struct {
	// Source says where the passage came from (e.g. "memory:<id>" or
	// "session:<id>"); it is for logs and is not shown to the model.
	Source string
	// Content is the passage text given to the model.
	Content string
	// Score is the passage's relevance, higher is better (0..1 for the
	// runner's searcher).
	Score float64
}

// NoResults is the retrieve tool's result when a search found nothing.
const NoResults = "No results found for this query."

// resultSeparator joins formatted passages (reference §5.4).
const resultSeparator = "\n\n---\n\n"

// FormatResults renders passages for the model as
// "[result <i>, score <x.xxx>]\n<content>" (i from 1), joined by
// "\n\n---\n\n"; no passages give NoResults.
func FormatResults(ps []Passage) string {
	if len(ps) == 0 {
		return NoResults
	}
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = fmt.Sprintf("[result %d, score %.3f]\n%s", i+1, p.Score, p.Content)
	}
	return strings.Join(parts, resultSeparator)
}

var (
	thinkBlock = regexp.MustCompile(`(?is)<think>.*?</think>`)
	thinkOpen  = regexp.MustCompile(`(?i)<think>`)
	thinkClose = regexp.MustCompile(`(?i)</think>`)
)

// Normalize is the user-facing form of a model answer: every
// <think>…</think> block removed, then — for models whose template opens
// the block in the prompt — everything up to a stray </think>, and — for
// an answer cut off while thinking — everything from an unclosed <think>;
// the rest trimmed of surrounding space.
func Normalize(raw string) string {
	s := thinkBlock.ReplaceAllString(raw, "")
	if locs := thinkClose.FindAllStringIndex(s, -1); len(locs) > 0 {
		s = s[locs[len(locs)-1][1]:]
	}
	if loc := thinkOpen.FindStringIndex(s); loc != nil {
		s = s[:loc[0]]
	}
	return strings.TrimSpace(s)
}
