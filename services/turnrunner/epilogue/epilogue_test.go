package epilogue

import (
	"strings"
	"testing"
)

func TestDisclaimer(t *testing.T) {
	hr := regulatedDisclaimers["hr-manager"]
	legal := regulatedDisclaimers["legal-professional"]
	finance := regulatedDisclaimers["finance-owner"]
	cases := []struct {
		persona, content, want string
	}{
		{"hr-manager", "Our POLICY on parental Leave.", hr},
		{"hr-manager", "Our policy is simple.", ""},                           // one keyword
		{"hr-manager", "The policy on leave is not legal advice.", ""},        // already disclaimed
		{"hr-manager", "Ask your Legal Team about this policy on leave.", ""}, // "legal team" counts as a disclaimer
		{"hr-manager", "", ""},
		{"legal-professional", "This agreement has a liability cap.", legal},
		{"legal-professional", "Contract, contract, contract.", ""}, // one keyword, three times
		{"finance-owner", "Cash flow and ROI look fine.", finance},
		{"finance-owner", "Profit and loss — talk to a financial advisor.", ""},
		{"finance-owner", "The roi and the tax.", finance},
		{"analyst", "budget revenue forecast", ""}, // not a regulated persona
		{"", "policy leave", ""},
	}
	for _, tc := range cases {
		if got := Disclaimer(tc.persona, tc.content); got != tc.want {
			t.Errorf("Disclaimer(%q, %q) = %q, want %q", tc.persona, tc.content, got, tc.want)
		}
	}
}

func TestScheduleHint(t *testing.T) {
	cases := []struct {
		content string
		tools   []string
		want    bool
	}{
		{"I'll do this every day.", nil, true},
		{"Run it every   morning", nil, true},
		{"a Weekly report", nil, true},
		{"it is scheduled", nil, true},
		{"schedule a call", nil, true},
		{"monthly", nil, true},
		{"regularly", []string{"read_file"}, true},
		{"regularly", []string{"create_schedule"}, false},
		{"regularly", []string{"cron_add"}, false},
		{"every dayx", nil, false}, // word boundary
		{"biweekly", nil, false},
		{"once", nil, false},
		{"", nil, false},
	}
	for _, tc := range cases {
		got := ScheduleHint(tc.content, tc.tools)
		if (got == scheduleHint) != tc.want || (got != "" && got != scheduleHint) {
			t.Errorf("ScheduleHint(%q, %v) = %q, want hint %v", tc.content, tc.tools, got, tc.want)
		}
	}
}

func TestFinal(t *testing.T) {
	content := "Revenue is reviewed monthly against the forecast."
	want := content + regulatedDisclaimers["finance-owner"] + scheduleHint
	if got := Final("finance-owner", content, []string{"read_file"}); got != want {
		t.Errorf("Final %q, want %q", got, want)
	}
	if got := Final("", "done", nil); got != "done" {
		t.Errorf("plain content changed: %q", got)
	}
}

// BenchmarkScheduleHintLongReply is the schedule hint's check of a
// 5,000-token reply that does not talk about recurring work (it runs on
// the turn's goroutine before done).
func BenchmarkScheduleHintLongReply(b *testing.B) {
	reply := strings.Repeat("The migration moves each table to the new cluster and checks the rows.\n", 400)
	for b.Loop() {
		if ScheduleHint(reply, nil) != "" {
			b.Fatal("hint on a reply without recurring work")
		}
	}
}
