package transcript

import (
	"encoding/json"
	"strings"
	"testing"
)

// jsonl joins lines into a session file.
func jsonl(lines ...string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }

// msg is one message line.
func msg(role, content, ts string) string {
	m := map[string]string{"role": role, "content": content}
	if ts != "" {
		m["timestamp"] = ts
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return string(b)
}

const metaLine = `{"type":"meta","title":null,"created":"2026-03-19T10:00:00.000Z"}`

// q2Lines are the six messages of the original workspace-api summary test.
var q2Lines = []string{
	msg("user", "Help me plan the Q2 marketing campaign", "2026-03-09T10:00:00Z"),
	msg("assistant", "I can help with that. Let me search for context about your marketing goals.", "2026-03-09T10:01:00Z"),
	msg("user", "We decided to focus on social media this quarter", "2026-03-09T10:02:00Z"),
	msg("assistant", "Good decision. Social media aligns well with your budget constraints.", "2026-03-09T10:03:00Z"),
	msg("user", "Can you draft an outline?", "2026-03-09T10:04:00Z"),
	msg("assistant", "Here is a draft marketing plan outline with 5 key initiatives.", "2026-03-09T10:05:00Z"),
}
