package transcript

import (
	"strings"
	"testing"
	"time"
)

func TestExportMarkdown(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"reference example, byte for byte",
			jsonl(`{"type":"meta","title":"My Chat","created":"2026-03-19T10:00:00.000Z","summary":"Sum"}`,
				msg("user", "Hello", "2026-03-19T10:05:00.000Z"),
				msg("assistant", "Hi!\nThere", "")),
			"# My Chat\n\n*3/19/2026, 10:00:00 AM*\n\n> Sum\n\n### **You** *(10:05:00 AM)*\n\nHello\n\n### **Assistant**\n\nHi!\nThere\n"},
		{"blank file", []byte("  \n\n"), "# Session\n\n*Empty session*\n"},
		{"meta only, no created", jsonl(`{"type":"meta","title":"T"}`), "# T\n"},
		{"title from the first user message's first line",
			jsonl(metaLine, msg("assistant", "Welcome", ""), msg("user", "  Fix the login bug  \nDetails follow", "2026-03-19T15:30:00Z")),
			"# Fix the login bug\n\n*3/19/2026, 10:00:00 AM*\n\n### **Assistant**\n\nWelcome\n\n### **You** *(3:30:00 PM)*\n\n  Fix the login bug  \nDetails follow\n"},
		{"long first line cut to 77 + ...",
			jsonl(msg("user", strings.Repeat("z", 90), "")),
			"# " + strings.Repeat("z", 77) + "...\n\n### **You**\n\n" + strings.Repeat("z", 90) + "\n"},
		{"no user message: the id",
			jsonl(msg("assistant", "alone", "")),
			"# sess-9\n\n### **Assistant**\n\nalone\n"},
		{"later meta lines override; malformed, tool and empty lines skipped; other roles are Assistant",
			jsonl(`{"type":"meta","title":"Old","created":"2026-03-19T10:00:00.000Z"}`,
				"{torn",
				`{"type":"tool","callId":"c","name":"bash","result":"x","isError":false,"status":"success","timestamp":"t"}`,
				`{"role":"user","content":""}`,
				msg("system", "sys", "not a date"),
				`{"type":"meta","title":"New","summary":"S2"}`),
			"# New\n\n*3/19/2026, 10:00:00 AM*\n\n> S2\n\n### **Assistant** *(Invalid Date)*\n\nsys\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ExportMarkdown("sess-9", Parse(tt.data), time.UTC); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}
