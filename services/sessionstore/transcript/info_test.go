package transcript

import (
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

func TestSessionInfoTitle(t *testing.T) {
	const id = "session-1"
	long := "This is a fairly long first message that exceeds the fifty character limit"
	tests := []struct {
		name string
		data []byte
		want any
	}{
		{"meta title wins", jsonl(`{"type":"meta","title":"My First Chat","created":"x"}`, msg("user", "Hello there", "")), "My First Chat"},
		{"no meta title: short first message", jsonl(metaLine, msg("user", "  Hello there  ", "")), "Hello there"},
		{"50-char rule cuts at the last space", jsonl(metaLine, msg("user", long, "")), "This is a fairly long first message that exceeds..."},
		{"exactly 50 chars kept whole", jsonl(metaLine, msg("user", strings.Repeat("a", 50), "")), strings.Repeat("a", 50)},
		{"no space past index 20: cut at 50", jsonl(metaLine, msg("user", "short words "+strings.Repeat("x", 60), "")), "short words " + strings.Repeat("x", 38) + "..."},
		{"counted in UTF-16 units", jsonl(metaLine, msg("user", strings.Repeat("😀", 30), "")), strings.Repeat("😀", 25) + "..."},
		{"first line of any role", jsonl(metaLine, msg("assistant", "Welcome back", "")), "Welcome back"},
		{"first line without content keeps the id", jsonl(metaLine, `{"role":"user"}`, msg("user", "later", "")), id},
		{"malformed first line keeps the id", jsonl(metaLine, `{"role":`, msg("user", "later", "")), id},
		{"no messages keeps the id", jsonl(metaLine), id},
		{"empty meta title falls back", jsonl(`{"type":"meta","title":"","created":"x"}`, msg("user", "Hi", "")), "Hi"},
		{"meta title equal to the id falls back", jsonl(`{"type":"meta","title":"session-1","created":"x"}`, msg("user", "Hi", "")), "Hi"},
		{"whitespace content gives an empty title", jsonl(metaLine, msg("user", "   ", "")), ""},
		{"no meta line at all", jsonl(msg("user", "Quick question", "")), "Quick question"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SessionInfo(id, Parse(tt.data), time.Now()).Title
			if got != tt.want {
				t.Errorf("title = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestSessionInfoFields(t *testing.T) {
	mtime := time.Date(2026, 3, 20, 8, 30, 0, 123456789, time.FixedZone("", 3600))
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"created from meta, summary from meta",
			jsonl(`{"type":"meta","title":"T","summary":"Sum","created":"2026-03-19T10:00:00.000Z"}`, msg("user", "a", ""), "torn{"),
			`{"id":"s","title":"T","summary":"Sum","messageCount":2,"lastActive":"2026-03-20T07:30:00.123Z","created":"2026-03-19T10:00:00.000Z"}`},
		{"no meta: created falls back to mtime, summary null",
			jsonl(msg("user", "a", "")),
			`{"id":"s","title":"a","summary":null,"messageCount":1,"lastActive":"2026-03-20T07:30:00.123Z","created":"2026-03-20T07:30:00.123Z"}`},
		{"empty summary is null",
			jsonl(`{"type":"meta","title":"T","summary":"","created":"c"}`),
			`{"id":"s","title":"T","summary":null,"messageCount":0,"lastActive":"2026-03-20T07:30:00.123Z","created":"c"}`},
		{"non-string title passes through",
			jsonl(`{"type":"meta","title":42,"created":"c"}`),
			`{"id":"s","title":42,"summary":null,"messageCount":0,"lastActive":"2026-03-20T07:30:00.123Z","created":"c"}`},
		{"empty file",
			nil,
			`{"id":"s","title":"s","summary":null,"messageCount":0,"lastActive":"2026-03-20T07:30:00.123Z","created":"2026-03-20T07:30:00.123Z"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustJSON(t, SessionInfo("s", Parse(tt.data), mtime)); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestGenerateSummary(t *testing.T) {
	tool := `{"type":"tool","turnId":"t","callId":"c","name":"bash","input":{},"result":"","isError":false,"status":"success","timestamp":"x"}`
	long := strings.Repeat("word ", 110) // > 500 chars
	var thirtyFive []string
	for i := range 35 {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		thirtyFive = append(thirtyFive, msg(role, "Talk about the roadmap in detail", ""))
	}
	tests := []struct {
		name  string
		lines []string
		want  string // "" = no summary
	}{
		{"Q2 marketing data", append([]string{metaLine}, q2Lines...),
			"Help me plan the Q2 marketing campaign — 6 messages · decisions"},
		{"2 messages: none", []string{metaLine, msg("user", "Quick question", ""), msg("assistant", "Sure, what is it?", "")}, ""},
		{"4 lines but one message: none", []string{metaLine, msg("user", "Plan the quarterly roadmap", ""), "bad", "bad", "bad"}, ""},
		{"tool lines are not message lines", []string{metaLine, msg("user", "Plan the quarterly roadmap", ""), tool, tool, msg("assistant", "ok", ""), msg("user", "thanks", "")}, ""},
		{"malformed lines count toward the 4", []string{metaLine, msg("user", "Plan the quarterly roadmap", ""), "bad", "bad", msg("assistant", "Sure", "")},
			"Plan the quarterly roadmap — 2 messages"},
		{"greeting skipped for a substantive message; first sentence only",
			[]string{metaLine, msg("user", "hello there my good friend", ""), msg("assistant", "Hi", ""), msg("user", "Set up the CI pipeline! Then deploy.", ""), msg("assistant", "Sure", "")},
			"Set up the CI pipeline — 4 messages"},
		{"only greetings: bold terms from assistants",
			[]string{metaLine, msg("user", "hi", ""), msg("assistant", "Try **Budget Plan** and **Hiring** or **Roadmap**", ""), msg("user", "ok", ""), msg("assistant", "**Roadmap** and **Launch Date**", "")},
			"Budget Plan, Hiring, Roadmap — 4 messages"},
		{"only greetings and no terms: the greeting topic",
			[]string{metaLine, msg("user", "hi", ""), msg("assistant", "Hello", ""), msg("user", "ok", ""), msg("assistant", "Bye", "")},
			"hi — 4 messages"},
		{"topic over 80 units is cut to 77 + ...",
			[]string{metaLine, msg("user", strings.Repeat("abcdefghij", 9), ""), msg("assistant", "a", ""), msg("user", "b", ""), msg("assistant", "c", "")},
			strings.Repeat("abcdefghij", 7) + "abcdefg... — 4 messages"},
		{"files, research and drafting",
			[]string{metaLine, msg("user", "Write the launch announcement", ""), msg("assistant", "I searched the docs and created file notes.md", ""), msg("user", "now the draft", ""), msg("assistant", long, "")},
			"Write the launch announcement — 4 messages · files, research, drafting"},
		{"drafting needs a long assistant message",
			[]string{metaLine, msg("user", "Write the launch announcement", ""), msg("assistant", "Here is a draft", ""), msg("user", "ok", ""), msg("assistant", "done", "")},
			"Write the launch announcement — 4 messages"},
		{"let's proceed is a decision",
			[]string{metaLine, msg("user", "Choose the database engine", ""), msg("assistant", "Postgres fits", ""), msg("user", "Lets proceed", ""), msg("assistant", "ok", "")},
			"Choose the database engine — 4 messages · decisions"},
		{"only the first 30 lines are read", append([]string{metaLine}, thirtyFive...),
			"Talk about the roadmap in detail — 30 messages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := GenerateSummary(Parse(jsonl(tt.lines...)))
			if got != tt.want || ok != (tt.want != "") {
				t.Errorf("GenerateSummary = %q, %v; want %q", got, ok, tt.want)
			}
		})
	}
}

// TestSessionInfoBranchOf: a branch's meta line names its source; the
// listing (full parse and the fast path) says so, a rename keeps it, and a
// branchOf that is not a session id and an index is no branch.
func TestSessionInfoBranchOf(t *testing.T) {
	const id = "session-1"
	tests := []struct {
		name    string
		meta    string
		session string
		at      int
	}{
		{"branch", `{"type":"meta","title":null,"created":"x","branchOf":{"session":"session-0","at":2}}`, "session-0", 2},
		{"no branch", `{"type":"meta","title":null,"created":"x"}`, "", 0},
		{"not an object", `{"type":"meta","title":null,"created":"x","branchOf":"session-0"}`, "", 0},
		{"unsafe id", `{"type":"meta","title":null,"created":"x","branchOf":{"session":"../x","at":2}}`, "", 0},
		{"negative index", `{"type":"meta","title":null,"created":"x","branchOf":{"session":"session-0","at":-1}}`, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := jsonl(tt.meta, msg("user", "Hi", ""))
			renamed := WithTitle(data, "Renamed", time.Now())
			for name, got := range map[string]string{
				"parse":   branchSession(SessionInfo(id, Parse(data), time.Now())),
				"quick":   branchSession(QuickInfo(id, data, time.Now())),
				"renamed": branchSession(QuickInfo(id, renamed, time.Now())),
			} {
				if got != tt.session {
					t.Errorf("%s: branchOf session %q, want %q", name, got, tt.session)
				}
			}
			if b := QuickInfo(id, data, time.Now()).BranchOf; b != nil && b.At != tt.at {
				t.Errorf("branchOf at %d, want %d", b.At, tt.at)
			}
		})
	}
}

// branchSession is the session a listing entry says it branched from.
func branchSession(info protocol.SessionInfo) string {
	if info.BranchOf == nil {
		return ""
	}
	return info.BranchOf.Session
}
