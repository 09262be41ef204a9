package turn

import (
	"testing"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
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

func TestFinalContent(t *testing.T) {
	res := agent.Result{Content: "Revenue is reviewed monthly against the forecast.", ToolsUsed: []string{"read_file"}}
	want := res.Content + regulatedDisclaimers["finance-owner"] + scheduleHint
	if got := finalContent("finance-owner", res); got != want {
		t.Errorf("finalContent %q, want %q", got, want)
	}
	if got := finalContent("", agent.Result{Content: "done"}); got != "done" {
		t.Errorf("plain content changed: %q", got)
	}
}

func TestBudgetWarning(t *testing.T) {
	cases := []struct {
		spent, budget float64
		want          string
	}{
		{2.25, 2, "⚠️ Budget limit reached ($2.25 / $2.00). Responses may be limited."},
		{2, 2, "⚠️ Budget limit reached ($2.00 / $2.00). Responses may be limited."},
		{1.999, 2, ""},
		{5, 0, ""},
	}
	for _, tc := range cases {
		if got := BudgetWarning(tc.spent, tc.budget); got != tc.want {
			t.Errorf("BudgetWarning(%v, %v) = %q, want %q", tc.spent, tc.budget, got, tc.want)
		}
	}
}

func TestHasUserMessage(t *testing.T) {
	if hasUserMessage(nil) || hasUserMessage([]protocol.Message{{Role: protocol.RoleAssistant}}) ||
		!hasUserMessage([]protocol.Message{{Role: protocol.RoleAssistant}, {Role: protocol.RoleUser}}) {
		t.Error("hasUserMessage")
	}
}
