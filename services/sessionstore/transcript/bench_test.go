package transcript

import (
	"fmt"
	"strings"
	"testing"
)

// realisticFile is a 200-line session: a meta line, then turns of a user
// question, a few tool events and a longer assistant answer.
func realisticFile() []byte {
	lines := []string{`{"type":"meta","title":"Quarterly planning","created":"2026-03-19T10:00:00.000Z","summary":"Plan the Q2 roadmap — 120 messages · decisions"}`}
	answer := strings.Repeat("Here is the **plan** we agreed on, with owners and dates for each milestone. ", 8)
	for i := 0; len(lines) < 200; i++ {
		ts := fmt.Sprintf("2026-03-19T10:%02d:%02d.000Z", (i/60)%60, i%60)
		lines = append(lines, msg("user", fmt.Sprintf("Question %d: what about the database migration for service %d?", i, i), ts))
		lines = append(lines, toolLine(fmt.Sprintf("c%d", i), "web_search", `{"query":"database migration"}`, strings.Repeat("result ", 40), "success", "", false, 250))
		lines = append(lines, msg("assistant", answer, ts))
	}
	return jsonl(lines[:200]...)
}

func BenchmarkParse(b *testing.B) {
	data := realisticFile()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		Parse(data)
	}
}

func BenchmarkSearch(b *testing.B) {
	f := Parse(realisticFile())
	for b.Loop() {
		Search(f, "Migration")
	}
}
