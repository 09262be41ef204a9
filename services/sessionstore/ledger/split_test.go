package ledger_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/ledger"
)

func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// rowWorkspaces is the workspace of every usage row in PostgreSQL, in
// order.
func rowWorkspaces(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT workspace FROM ledger_lines WHERE kind = 'usage' ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	wss, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return wss
}

// fileWorkspaces is the workspace of every usage line of the file.
func fileWorkspaces(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, ledger.UsageFile))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, raw := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ln struct {
			Type      string `json:"type"`
			Workspace string `json:"workspace"`
		}
		if raw == "" {
			continue
		}
		if err := json.Unmarshal([]byte(raw), &ln); err != nil {
			t.Fatalf("file line %q: %v", raw, err)
		}
		if ln.Type == "usage" {
			out = append(out, ln.Workspace)
		}
	}
	return out
}

func record(t *testing.T, l *ledger.Ledger, ws string, cost float64) {
	t.Helper()
	if err := l.Record(protocol.UsageRecord{Workspace: ws, Model: "m", InputTokens: 10, OutputTokens: 1, Cost: cost}); err != nil {
		t.Fatal(err)
	}
}

func totals(t *testing.T, l *ledger.Ledger, since, ws string) (int, float64) {
	t.Helper()
	s, err := l.SummaryFor(since, ws)
	if err != nil {
		t.Fatal(err)
	}
	return s.Turns, s.EstimatedCost
}

// TestSplitKeepsPersonalLinesOutOfPostgres: split, a team workspace's
// usage is a row of PostgreSQL and nothing else is, a personal
// workspace's (and a line of no workspace) is a line of the file; the
// totals add both, each workspace's reads its side, and a reset restarts
// both sides.
func TestSplitKeepsPersonalLinesOutOfPostgres(t *testing.T) {
	pool := newPool(t)
	dir := t.TempDir()
	isTeam := func(_ context.Context, ws string) (bool, error) { return ws == "ours", nil }
	l := open(t, ledger.Config{DataDir: dir, Pool: pool, IsTeam: isTeam})
	record(t, l, "ours", 1)
	record(t, l, "mine", 0.5)
	record(t, l, "", 0.25)
	if got := strings.Join(rowWorkspaces(t, pool), ","); got != "ours" {
		t.Errorf("PostgreSQL rows of %q, want only the team workspace's", got)
	}
	if got := strings.Join(fileWorkspaces(t, dir), ","); got != "mine," {
		t.Errorf("file lines of %q, want the personal workspace's and the one of none", got)
	}
	for _, tc := range []struct {
		ws    string
		turns int
		cost  float64
	}{{"", 3, 1.75}, {"ours", 1, 1}, {"mine", 1, 0.5}, {"other", 0, 0}} {
		if n, c := totals(t, open(t, ledger.Config{DataDir: dir, Pool: pool, IsTeam: isTeam}), "", tc.ws); n != tc.turns || c != tc.cost {
			t.Errorf("workspace %q: %d turns $%v, want %d $%v", tc.ws, n, c, tc.turns, tc.cost)
		}
	}
	if _, err := l.Reset(); err != nil {
		t.Fatal(err)
	}
	record(t, l, "mine", 0.125)
	l = open(t, ledger.Config{DataDir: dir, Pool: pool, IsTeam: isTeam})
	if n, c := totals(t, l, "", ""); n != 1 || c != 0.125 {
		t.Errorf("after a reset: %d turns $%v, want 1 $0.125", n, c)
	}
	if n, _ := totals(t, l, "2000-01-01T00:00:00Z", ""); n != 4 {
		t.Errorf("since 2000: %d turns, want 4", n)
	}
}

// TestPersonalLinesMoveOutOfPostgres: the lines an older version kept in
// PostgreSQL for every workspace move at open: a personal workspace's go
// to the file and their rows are deleted; a team workspace's, a deleted
// workspace's and those of no workspace stay. Totals (since the last
// reset, and since a time) are what they were. A crash after the file was
// written but before the rows were deleted (the rows put back with their
// seqs) repeats the move without counting a line twice.
func TestPersonalLinesMoveOutOfPostgres(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	old := open(t, ledger.Config{Pool: pool})
	record(t, old, "mine", 1) // reset below: not counted since the reset
	record(t, old, "ours", 2) // likewise
	if _, err := old.Reset(); err != nil {
		t.Fatal(err)
	}
	record(t, old, "mine", 0.5)
	record(t, old, "ours", 0.25)
	record(t, old, "gone", 0.125)
	record(t, old, "", 0.0625)
	const since = "2000-01-01T00:00:00Z"
	wantTurns, wantCost := totals(t, old, "", "")
	if wantTurns != 4 || wantCost != 0.9375 {
		t.Fatalf("old totals %d $%v", wantTurns, wantCost)
	}

	dir := t.TempDir()
	isTeam := func(_ context.Context, ws string) (bool, error) { return ws == "ours", nil }
	personal := func(_ context.Context, ws string) (bool, error) { return ws == "mine", nil }
	cfg := ledger.Config{DataDir: dir, Pool: pool, IsTeam: isTeam, Personal: personal}
	check := func(when string) {
		t.Helper()
		l := open(t, cfg)
		if n, c := totals(t, l, "", ""); n != wantTurns || c != wantCost {
			t.Errorf("%s: since the reset %d turns $%v, want %d $%v", when, n, c, wantTurns, wantCost)
		}
		if n, c := totals(t, l, since, ""); n != 6 || c != 3.9375 {
			t.Errorf("%s: since 2000 %d turns $%v, want 6 $3.9375", when, n, c)
		}
		if n, c := totals(t, l, "", "mine"); n != 1 || c != 0.5 {
			t.Errorf("%s: mine since the reset %d turns $%v, want 1 $0.5", when, n, c)
		}
		if n, c := totals(t, l, since, "mine"); n != 2 || c != 1.5 {
			t.Errorf("%s: mine since 2000 %d turns $%v, want 2 $1.5", when, n, c)
		}
		if got := strings.Join(rowWorkspaces(t, pool), ","); got != "ours,ours,gone," {
			t.Errorf("%s: PostgreSQL rows of %q, want ours,ours,gone,", when, got)
		}
		if got := strings.Join(fileWorkspaces(t, dir), ","); got != "mine,mine" {
			t.Errorf("%s: file lines of %q, want mine,mine", when, got)
		}
	}

	// Note the rows that will move, to put them back as a crash would
	// have left them.
	rows, err := pool.Query(ctx, `SELECT seq, kind, at, model, input_tokens, output_tokens, cost, workspace FROM ledger_lines WHERE workspace = 'mine'`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Seq          int64
		Kind         string
		At           time.Time
		Model        string
		InputTokens  int64
		OutputTokens int64
		Cost         float64
		Workspace    string
	}
	moved, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil || len(moved) != 2 {
		t.Fatalf("rows to move: %v %v", moved, err)
	}

	check("after the move")
	check("after a second open")

	for _, r := range moved {
		if _, err := pool.Exec(ctx, `INSERT INTO ledger_lines (seq, kind, at, model, input_tokens, output_tokens, cost, workspace)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, r.Seq, r.Kind, r.At, r.Model, r.InputTokens, r.OutputTokens, r.Cost, r.Workspace); err != nil {
			t.Fatal(err)
		}
	}
	check("after a crash before the rows were deleted")

	// The split ledger keeps working: a new personal line counts.
	record(t, open(t, cfg), "mine", 1)
	if n, c := totals(t, open(t, cfg), "", "mine"); n != 2 || c != 1.5 {
		t.Errorf("mine after a new line: %d turns $%v, want 2 $1.5", n, c)
	}
}
