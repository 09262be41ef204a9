package transcript

import (
	"testing"
)

func TestParse(t *testing.T) {
	tool := `{"type":"tool","turnId":"t1","callId":"c1","name":"web_search","input":{"query":"x"},"result":"ok","isError":false,"status":"success","timestamp":"2026-03-19T10:00:01.000Z"}`
	tests := []struct {
		name      string
		data      string
		meta      bool
		count     int
		lines     int
		messages  int
		tools     int
		firstRole string
	}{
		{name: "empty", data: ""},
		{name: "whitespace only", data: " \n\n\t\n"},
		{name: "meta only", data: metaLine + "\n", meta: true},
		{name: "meta and messages", data: string(jsonl(metaLine, msg("user", "hi", ""), msg("assistant", "hello", ""))),
			meta: true, count: 2, lines: 2, messages: 2, firstRole: "user"},
		{name: "no meta line: every line is a message line", data: string(jsonl(msg("user", "hi", ""), msg("assistant", "yo", ""))),
			count: 2, lines: 2, messages: 2, firstRole: "user"},
		{name: "blank lines skipped, meta is the first non-blank line", data: "\n\n" + metaLine + "\n\n" + msg("user", "a", "") + "\n   \n",
			meta: true, count: 1, lines: 1, messages: 1, firstRole: "user"},
		{name: "torn last line counts but is no message", data: string(jsonl(metaLine, msg("user", "hi", ""))) + `{"role":"assistant","cont`,
			meta: true, count: 2, lines: 2, messages: 1, firstRole: "user"},
		{name: "malformed middle line counts", data: string(jsonl(metaLine, msg("user", "a", ""), "not json", msg("assistant", "b", ""))),
			meta: true, count: 3, lines: 3, messages: 2, firstRole: "user"},
		{name: "tool lines are neither counted nor messages", data: string(jsonl(metaLine, msg("user", "a", ""), tool, msg("assistant", "b", ""))),
			meta: true, count: 2, lines: 3, messages: 2, tools: 1, firstRole: "user"},
		{name: "empty content is a message, missing role is not", data: string(jsonl(metaLine, `{"role":"assistant","content":""}`, `{"content":"x"}`)),
			meta: true, count: 2, lines: 2, messages: 1, firstRole: "assistant"},
		{name: "mistyped content is no message", data: string(jsonl(metaLine, `{"role":"user","content":5,"timestamp":"t"}`, `{"role":"user","content":"ok","turnId":7}`)),
			meta: true, count: 2, lines: 2, messages: 1, firstRole: "user"},
		{name: "mistyped tool line yields no event and no count", data: string(jsonl(metaLine, `{"type":"tool","callId":"c","name":"x","isError":"yes"}`)),
			meta: true, lines: 1},
		{name: "JSON values that are not objects", data: string(jsonl(metaLine, `null`, `[1,2]`, `"str"`, `42`)),
			meta: true, count: 4, lines: 4},
		{name: "non-meta JSON first line is a message line", data: string(jsonl(`{"type":"other"}`, msg("user", "a", ""))),
			count: 2, lines: 2, messages: 1, firstRole: "user"},
		{name: "CRLF lines still parse", data: metaLine + "\r\n" + msg("user", "a", "") + "\r\n",
			meta: true, count: 1, lines: 1, messages: 1, firstRole: "user"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Parse([]byte(tt.data))
			if (f.Meta != nil) != tt.meta {
				t.Errorf("meta = %v, want %v", f.Meta != nil, tt.meta)
			}
			if f.Count != tt.count {
				t.Errorf("Count = %d, want %d", f.Count, tt.count)
			}
			if len(f.Lines) != tt.lines {
				t.Errorf("len(Lines) = %d, want %d", len(f.Lines), tt.lines)
			}
			if len(f.Messages) != tt.messages {
				t.Errorf("len(Messages) = %d, want %d", len(f.Messages), tt.messages)
			}
			if len(f.Tools) != tt.tools {
				t.Errorf("len(Tools) = %d, want %d", len(f.Tools), tt.tools)
			}
			if tt.firstRole != "" && (len(f.Messages) == 0 || f.Messages[0].Role != tt.firstRole) {
				t.Errorf("first message = %+v, want role %q", f.Messages, tt.firstRole)
			}
		})
	}
}

func TestParseMetaAndMessageFields(t *testing.T) {
	data := jsonl(
		`{"type":"meta","title":"T","summary":"S","created":"2026-01-01T00:00:00.000Z","distilled":true,"outcome":{"whatChanged":"x"}}`,
		`{"role":"assistant","content":"partial","timestamp":"2026-01-01T00:00:01.000Z","turnId":"turn-1","error":"cancelled"}`,
		`{"type":"tool","turnId":"turn-1","callId":"c1","name":"bash","input":{"command":"ls"},"result":"Error: no","isError":true,"status":"error","durationMs":12,"parent":"c0","timestamp":"2026-01-01T00:00:02.000Z"}`,
	)
	f := Parse(data)
	if f.Meta == nil || *f.Meta.Title != "T" || *f.Meta.Summary != "S" || f.Meta.Created != "2026-01-01T00:00:00.000Z" || !f.Meta.Distilled || string(f.Meta.Outcome) != `{"whatChanged":"x"}` {
		t.Fatalf("meta = %+v", f.Meta)
	}
	m := f.Messages[0]
	if m.Role != "assistant" || m.Content != "partial" || m.TurnID != "turn-1" || m.Error != "cancelled" || m.Timestamp != "2026-01-01T00:00:01.000Z" {
		t.Errorf("message = %+v", m)
	}
	tl := f.Tools[0]
	if tl.Name != "bash" || !tl.IsError || tl.Status != "error" || tl.DurationMs == nil || *tl.DurationMs != 12 || tl.Parent != "c0" || string(tl.Input) != `{"command":"ls"}` {
		t.Errorf("tool = %+v", tl)
	}
}
