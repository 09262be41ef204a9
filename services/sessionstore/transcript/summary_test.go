package transcript

import (
	"testing"
	"time"
)

func TestSessionSummary(t *testing.T) {
	mtime := time.Date(2026, 3, 20, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		lines []string
		want  string
	}{
		{"counts from tool events",
			[]string{`{"type":"meta","title":"Work","summary":"Did things","created":"2026-03-19T10:00:00.000Z"}`,
				msg("user", "go", ""),
				toolLine("c1", "save_memory", `{}`, "Saved", "success", "", false, 0),
				toolLine("c2", "save_memory", `{}`, "Error: db", "error", "", true, 0),
				toolLine("c3", "generate_docx", `{}`, "ok", "success", "", false, 0),
				toolLine("c4", "generate_docx", `{}`, "Denied", "denied", "", false, 0),
				toolLine("c5", "web_search", `{}`, "ok", "success", "", false, 0),
				// Text patterns are ignored once real events exist.
				msg("assistant", "Saving to memory and Generating document: x...", ""),
				`{"role":"user"}`,
				"{torn"},
			`{"sessionId":"s1","title":"Work","messageCount":4,"userMessages":2,"assistantMessages":1,"toolsUsed":4,"memoriesSaved":1,"documentsCreated":1,"summary":"Did things","lastActive":"2026-03-20T09:00:00.000Z","created":"2026-03-19T10:00:00.000Z"}`},
		{"heuristics without tool events",
			[]string{metaLine,
				msg("user", "hello", ""),
				msg("assistant", `saving to memory, Searching the web for "x" and Generating document: r.docx...`, ""),
				msg("assistant", "Checking git status", ""),
				`{"role":"assistant"}`},
			`{"sessionId":"s1","title":"hello","messageCount":4,"userMessages":1,"assistantMessages":3,"toolsUsed":3,"memoriesSaved":1,"documentsCreated":1,"summary":"No summary available","lastActive":"2026-03-20T09:00:00.000Z","created":"2026-03-19T10:00:00.000Z"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Parse(jsonl(tt.lines...))
			got := mustJSON(t, SessionSummary("s1", f, SessionInfo("s1", f, mtime)))
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}
