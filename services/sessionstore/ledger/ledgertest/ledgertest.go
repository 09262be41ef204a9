// Package ledgertest is the one conformance suite both usage-ledger
// backends pass: the same tests run against the ledger files and
// PostgreSQL, so the two count, reset and remember the model alike. Run it
// from a backend's tests with a constructor giving fresh, empty storage per
// call.
package ledgertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/ledger"
)

// Backend is one place a ledger is kept.
type Backend struct {
	// Open opens the ledger on this storage, as often as a test likes (a
	// restarted store process), failing t when it cannot.
	Open func(t *testing.T) *ledger.Ledger
}

// Run runs every conformance test, each on a fresh, empty Backend made by
// newBackend.
func Run(t *testing.T, newBackend func(t *testing.T) Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, st Backend)
	}{
		{"SumsSurviveRestartAndReset", testSumsSurviveRestartAndReset},
		{"Rejects", testRejects},
		{"ConcurrentRecordsAllCounted", testConcurrentRecordsAllCounted},
		{"ModelPersisted", testModelPersisted},
		{"WorkspaceSummary", testWorkspaceSummary},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newBackend(t))
		})
	}
}

func summary(t *testing.T, l *ledger.Ledger, since string) protocol.UsageSummary {
	t.Helper()
	s, err := l.Summary(since)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testSumsSurviveRestartAndReset(t *testing.T, st Backend) {
	l := st.Open(t)
	if s := summary(t, l, ""); s.Turns != 0 || s.ByModel == nil || len(s.ByModel) != 0 {
		t.Fatalf("empty ledger summary = %+v", s)
	}
	recs := []protocol.UsageRecord{
		{Model: "m1", InputTokens: 10, OutputTokens: 5, Cost: 0.25},
		{Model: "m1", InputTokens: 1, OutputTokens: 2, Cost: 0.5},
		{Model: "m2", InputTokens: 100, OutputTokens: 50, Cost: 1},
	}
	for _, r := range recs {
		if err := l.Record(r); err != nil {
			t.Fatal(err)
		}
	}
	want := protocol.UsageSummary{TotalInputTokens: 111, TotalOutputTokens: 57, EstimatedCost: 1.75, Turns: 3,
		ByModel: map[string]protocol.ModelUsage{"m1": {Input: 11, Output: 7, Cost: 0.75}, "m2": {Input: 100, Output: 50, Cost: 1}}}
	check := func(when string, got, want protocol.UsageSummary) {
		t.Helper()
		if got.TotalInputTokens != want.TotalInputTokens || got.TotalOutputTokens != want.TotalOutputTokens ||
			got.EstimatedCost != want.EstimatedCost || got.Turns != want.Turns || len(got.ByModel) != len(want.ByModel) {
			t.Fatalf("%s: summary = %+v, want %+v", when, got, want)
		}
		for k, v := range want.ByModel {
			if got.ByModel[k] != v {
				t.Fatalf("%s: byModel[%s] = %+v, want %+v", when, k, got.ByModel[k], v)
			}
		}
	}
	check("before restart", summary(t, l, ""), want)
	l = st.Open(t)
	check("after restart", summary(t, l, ""), want)

	if _, err := l.Reset(); err != nil {
		t.Fatal(err)
	}
	zero := protocol.UsageSummary{ByModel: map[string]protocol.ModelUsage{}}
	check("after reset", summary(t, l, ""), zero)
	if err := l.Record(protocol.UsageRecord{Model: "m2", InputTokens: 7, OutputTokens: 3, Cost: 0.125}); err != nil {
		t.Fatal(err)
	}
	afterReset := protocol.UsageSummary{TotalInputTokens: 7, TotalOutputTokens: 3, EstimatedCost: 0.125, Turns: 1,
		ByModel: map[string]protocol.ModelUsage{"m2": {Input: 7, Output: 3, Cost: 0.125}}}
	check("record after reset", summary(t, l, ""), afterReset)
	l = st.Open(t)
	check("reset survives restart", summary(t, l, ""), afterReset)
	// Since ignores resets: all four records are in range.
	if s := summary(t, l, "2000-01-01T00:00:00Z"); s.Turns != 4 || s.TotalInputTokens != 118 {
		t.Fatalf("since 2000: %+v", s)
	}
	if s := summary(t, l, time.Now().Add(time.Hour).UTC().Format(time.RFC3339)); s.Turns != 0 {
		t.Fatalf("since future: %+v", s)
	}
}

func testRejects(t *testing.T, st Backend) {
	l := st.Open(t)
	for _, r := range []protocol.UsageRecord{{InputTokens: -1}, {OutputTokens: -1}, {Cost: -0.1}} {
		if err := l.Record(r); protocol.KindOf(err) != protocol.Invalid {
			t.Errorf("Record(%+v) = %v, want 400", r, err)
		}
	}
	if _, err := l.Summary("yesterday"); protocol.KindOf(err) != protocol.Invalid {
		t.Errorf("Summary(yesterday) = %v, want 400", err)
	}
	if s := summary(t, l, ""); s.Turns != 0 {
		t.Errorf("rejected records counted: %+v", s)
	}
}

func testConcurrentRecordsAllCounted(t *testing.T, st Backend) {
	l := st.Open(t)
	const n = 50
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Record(protocol.UsageRecord{Model: "m", InputTokens: 2, OutputTokens: 1}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if s := summary(t, st.Open(t), ""); s.Turns != n || s.TotalInputTokens != 2*n {
		t.Fatalf("reloaded: %+v", s)
	}
}

func testModelPersisted(t *testing.T, st Backend) {
	l := st.Open(t)
	if m := l.Model(); m != "claude-sonnet-4-6" {
		t.Fatalf("default model %q", m)
	}
	if _, err := l.SetModel(""); protocol.KindOf(err) != protocol.Invalid {
		t.Fatalf("SetModel(\"\") = %v", err)
	}
	if _, err := l.SetModel("gpt-5"); err != nil {
		t.Fatal(err)
	}
	if m := st.Open(t).Model(); m != "gpt-5" {
		t.Fatalf("model after restart %q", m)
	}
	if _, err := l.SetModel("gpt-6"); err != nil {
		t.Fatal(err)
	}
	if m := st.Open(t).Model(); m != "gpt-6" {
		t.Fatalf("model after second set and restart %q", m)
	}
}

func testWorkspaceSummary(t *testing.T, st Backend) {
	l := st.Open(t)
	for _, r := range []protocol.UsageRecord{
		{Workspace: "ops", Model: "m", InputTokens: 10, OutputTokens: 1, Cost: 0.5},
		{Workspace: "sales", Model: "m", InputTokens: 20, OutputTokens: 2, Cost: 0.25},
		{Workspace: "ops", Model: "n", InputTokens: 30, OutputTokens: 3, Cost: 1},
	} {
		if err := l.Record(r); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		workspace string
		turns     int
		cost      float64
	}{{"ops", 2, 1.5}, {"sales", 1, 0.25}, {"none", 0, 0}, {"", 3, 1.75}} {
		for _, l := range []*ledger.Ledger{l, st.Open(t)} {
			s, err := l.SummaryFor("", tc.workspace)
			if err != nil {
				t.Fatal(err)
			}
			if s.Turns != tc.turns || s.EstimatedCost != tc.cost {
				t.Errorf("workspace %q: %d turns $%v, want %d $%v", tc.workspace, s.Turns, s.EstimatedCost, tc.turns, tc.cost)
			}
		}
	}
}

// Legacy opens the ledger as versions before the split kept it on a team
// server — every line in the PostgreSQL at url, personal ones included —
// so black-box tests can leave what an older version left.
func Legacy(t *testing.T, url string) *ledger.Ledger {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	l, err := ledger.Open(ledger.Config{Pool: pool}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Rows counts the ledger rows of workspace in the PostgreSQL at url.
func Rows(t *testing.T, url, workspace string) int {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM ledger_lines WHERE workspace = $1`, workspace).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
