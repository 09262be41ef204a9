package notices

import "testing"

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

func TestShorten(t *testing.T) {
	if got := shorten("héllo wörld", 6); got != "héllo…" {
		t.Errorf("shorten = %q", got)
	}
	if got := shorten("short", 6); got != "short" {
		t.Errorf("shorten = %q", got)
	}
}
