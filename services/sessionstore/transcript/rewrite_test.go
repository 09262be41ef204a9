package transcript

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// keptLines are lines a rewrite must carry over byte for byte: message
// lines (with HTML characters JSON.stringify would not escape), a malformed
// line, a tool line and a torn last line.
var keptLines = []string{
	msg("user", "Compare <a> & <b> please", "2026-03-19T09:00:00.000Z"),
	`{"role":"assistant",  "content":"spaced  json"}`,
	`not json at all`,
	toolLine("c1", "bash", `{"command":"ls"}`, "ok", "success", "", false, 5),
	`{"role":"user","content":"torn`,
}

func TestWithSummary(t *testing.T) {
	fallback := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	body := "\n" + keptLines[0] + "\n\n" + keptLines[1] + "\n  \n" + keptLines[2] + "\n" + keptLines[3] + "\n" + keptLines[4]
	tests := []struct {
		name string
		data string
		want string
	}{
		{"meta line gets the summary, key order kept",
			`{"type":"meta","title":null,"created":"2026-03-19T10:00:00.000Z","distilled":false}` + body,
			`{"type":"meta","title":null,"created":"2026-03-19T10:00:00.000Z","distilled":false,"summary":"New <sum> & \"q\""}` + "\n" + string(jsonl(keptLines...))},
		{"existing summary replaced in place",
			`{"type":"meta","summary":"old","title":"T","created":"c"}` + body,
			`{"type":"meta","summary":"New <sum> & \"q\"","title":"T","created":"c"}` + "\n" + string(jsonl(keptLines...))},
		{"no meta line: one is prepended with the derived title and first timestamp",
			body,
			`{"type":"meta","title":"Compare <a> & <b> please","summary":"New <sum> & \"q\"","created":"2026-03-19T09:00:00.000Z"}` + "\n" + string(jsonl(keptLines...))},
		{"no meta line, malformed first line: title null, fallback created",
			keptLines[2] + "\n" + keptLines[1],
			`{"type":"meta","title":null,"summary":"New <sum> & \"q\"","created":"2026-01-02T03:04:05.000Z"}` + "\n" + keptLines[2] + "\n" + keptLines[1] + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := WithSummary([]byte(tt.data), `New <sum> & "q"`, fallback)
			if string(got) != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
			f := Parse(got)
			if f.Meta == nil || f.Meta.Summary == nil || *f.Meta.Summary != `New <sum> & "q"` {
				t.Errorf("reparsed meta = %+v", f.Meta)
			}
		})
	}
}

func TestWithTitle(t *testing.T) {
	now := time.Date(2026, 3, 21, 12, 0, 0, 0, time.UTC)
	rest := string(jsonl(keptLines...))
	tests := []struct {
		name string
		data string
		want string
	}{
		{"meta line renamed, other keys untouched",
			`{"type":"meta","title":"Old","created":"2026-03-19T10:00:00.000Z","summary":"S","outcome":{"a":[1, 2]}}` + "\n\n" + rest,
			`{"type":"meta","title":"Renamed ✓","created":"2026-03-19T10:00:00.000Z","summary":"S","outcome":{"a":[1,2]}}` + "\n" + rest},
		{"first line not meta: meta prepended",
			rest,
			`{"type":"meta","title":"Renamed ✓","created":"2026-03-21T12:00:00.000Z"}` + "\n" + rest},
		{"first line not JSON: meta prepended",
			"garbage\n" + rest,
			`{"type":"meta","title":"Renamed ✓","created":"2026-03-21T12:00:00.000Z"}` + "\ngarbage\n" + rest},
		{"empty file: just the meta line",
			"",
			`{"type":"meta","title":"Renamed ✓","created":"2026-03-21T12:00:00.000Z"}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := WithTitle([]byte(tt.data), "Renamed ✓", now)
			if string(got) != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
			info := SessionInfo("s", Parse(got), now)
			if info.Title != "Renamed ✓" {
				t.Errorf("title after rename = %#v", info.Title)
			}
		})
	}
}

func TestRewritesKeepEveryMessage(t *testing.T) {
	data := jsonl(append([]string{metaLine}, append(q2Lines, keptLines...)...)...)
	before := Parse(data)
	for name, out := range map[string][]byte{
		"WithSummary": WithSummary(data, "s", time.Now()),
		"WithTitle":   WithTitle(data, "t", time.Now()),
	} {
		after := Parse(out)
		if after.Count != before.Count || len(after.Tools) != len(before.Tools) {
			t.Errorf("%s: count %d→%d, tools %d→%d", name, before.Count, after.Count, len(before.Tools), len(after.Tools))
		}
		bm, _ := json.Marshal(before.Messages)
		am, _ := json.Marshal(after.Messages)
		if !bytes.Equal(bm, am) {
			t.Errorf("%s: messages changed:\n%s\n%s", name, bm, am)
		}
		for i := range before.Lines {
			if !bytes.Equal(before.Lines[i], after.Lines[i]) {
				t.Errorf("%s: line %d changed: %q → %q", name, i, before.Lines[i], after.Lines[i])
			}
		}
	}
}
