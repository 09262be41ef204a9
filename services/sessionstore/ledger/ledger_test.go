package ledger

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
)

func open(t *testing.T, dir string) *Ledger {
	t.Helper()
	l, err := Open(Config{DataDir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// implementations runs fn once per storage: the files under a data
// directory and a PostgreSQL database. reopen opens the ledger again on
// the same storage, as a restarted store would.
func implementations(t *testing.T, fn func(t *testing.T, reopen func() *Ledger)) {
	t.Run("files", func(t *testing.T) {
		dir := t.TempDir()
		fn(t, func() *Ledger { return open(t, dir) })
	})
	t.Run("postgres", func(t *testing.T) {
		pool := pgPool(t)
		fn(t, func() *Ledger {
			t.Helper()
			l, err := Open(Config{Pool: pool}, nil)
			if err != nil {
				t.Fatal(err)
			}
			return l
		})
	})
}

func pgPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	url := pgtest.URL(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func summary(t *testing.T, l *Ledger, since string) protocol.UsageSummary {
	t.Helper()
	s, err := l.Summary(since)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLedgerSumsSurviveRestartAndReset(t *testing.T) {
	implementations(t, testSumsSurviveRestartAndReset)
}

func testSumsSurviveRestartAndReset(t *testing.T, reopen func() *Ledger) {
	l := reopen()
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
	l = reopen()
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
	l = reopen()
	check("reset survives restart", summary(t, l, ""), afterReset)
	// Since ignores resets: all four records are in range.
	if s := summary(t, l, "2000-01-01T00:00:00Z"); s.Turns != 4 || s.TotalInputTokens != 118 {
		t.Fatalf("since 2000: %+v", s)
	}
	if s := summary(t, l, time.Now().Add(time.Hour).UTC().Format(time.RFC3339)); s.Turns != 0 {
		t.Fatalf("since future: %+v", s)
	}
}

func TestLedgerRejects(t *testing.T) {
	implementations(t, func(t *testing.T, reopen func() *Ledger) { testRejects(t, reopen()) })
}

func testRejects(t *testing.T, l *Ledger) {
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

func TestLedgerTornTailRepaired(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir)
	if err := l.Record(protocol.UsageRecord{Model: "m", InputTokens: 4, OutputTokens: 1}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, UsageFile)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"type":"usage","model":"m","inputTok`)
	f.Close()
	l = open(t, dir)
	if err := l.Record(protocol.UsageRecord{Model: "m", InputTokens: 6, OutputTokens: 1}); err != nil {
		t.Fatal(err)
	}
	l = open(t, dir)
	if s := summary(t, l, ""); s.Turns != 2 || s.TotalInputTokens != 10 {
		t.Fatalf("after torn tail: %+v", s)
	}
}

func TestLedgerConcurrentRecordsAllCounted(t *testing.T) {
	implementations(t, testConcurrentRecordsAllCounted)
}

func testConcurrentRecordsAllCounted(t *testing.T, reopen func() *Ledger) {
	l := reopen()
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
	if s := summary(t, reopen(), ""); s.Turns != n || s.TotalInputTokens != 2*n {
		t.Fatalf("reloaded: %+v", s)
	}
}

func TestModelPersisted(t *testing.T) {
	implementations(t, testModelPersisted)
}

func TestDamagedStateIsTheDefaultModel(t *testing.T) {
	dir := t.TempDir()
	if _, err := open(t, dir).SetModel("gpt-5"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, StateFile), []byte("{not json"), 0o644)
	if m := open(t, dir).Model(); m != "claude-sonnet-4-6" {
		t.Fatalf("model with damaged state %q", m)
	}
}

func testModelPersisted(t *testing.T, reopen func() *Ledger) {
	l := reopen()
	if m := l.Model(); m != "claude-sonnet-4-6" {
		t.Fatalf("default model %q", m)
	}
	if _, err := l.SetModel(""); protocol.KindOf(err) != protocol.Invalid {
		t.Fatalf("SetModel(\"\") = %v", err)
	}
	if _, err := l.SetModel("gpt-5"); err != nil {
		t.Fatal(err)
	}
	if m := reopen().Model(); m != "gpt-5" {
		t.Fatalf("model after restart %q", m)
	}
	if _, err := l.SetModel("gpt-6"); err != nil {
		t.Fatal(err)
	}
	if m := reopen().Model(); m != "gpt-6" {
		t.Fatalf("model after second set and restart %q", m)
	}
}

func TestLedgerWorkspaceSummary(t *testing.T) {
	implementations(t, func(t *testing.T, reopen func() *Ledger) {
		l := reopen()
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
			for _, l := range []*Ledger{l, reopen()} {
				s, err := l.SummaryFor("", tc.workspace)
				if err != nil {
					t.Fatal(err)
				}
				if s.Turns != tc.turns || s.EstimatedCost != tc.cost {
					t.Errorf("workspace %q: %d turns $%v, want %d $%v", tc.workspace, s.Turns, s.EstimatedCost, tc.turns, tc.cost)
				}
			}
		}
	})
}
