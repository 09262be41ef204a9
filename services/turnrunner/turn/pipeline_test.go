package turn

import (
	"testing"

	"github.com/waggle-os/core/libs/protocol"
)

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
