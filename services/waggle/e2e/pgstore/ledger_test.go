package pgstore

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/ledger"
	"github.com/waggle-os/core/services/sessionstore/ledger/ledgertest"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// spent is workspace ws's usage since the last reset, from the store.
func spent(t *testing.T, nc *nats.Conn, ws string) protocol.UsageSummary {
	t.Helper()
	return waggletest.Operate(t, nc, protocol.SummarizeUsage, protocol.UsageSummaryRequest{Workspace: ws})
}

// cost is GET /api/agent/cost: every workspace's usage since the reset.
func (e *env) cost(t *testing.T) (turns int, dollars float64) {
	t.Helper()
	var out struct {
		Turns         int     `json:"turns"`
		EstimatedCost float64 `json:"estimatedCost"`
	}
	if st := e.srv.JSON(http.MethodGet, "/api/agent/cost", nil, &out); st != 200 {
		t.Fatalf("agent cost: %d", st)
	}
	return out.Turns, out.EstimatedCost
}

// TestPersonalUsageStaysOutOfPostgres: with team workspaces in PostgreSQL
// and personal ones in the data dir, a personal workspace's usage is a
// line of the data dir's usage.jsonl and a team workspace's a row of
// PostgreSQL; the server's totals add both and a reset restarts both;
// losing the data dir keeps the team's usage and loses the personal one
// (it never was in PostgreSQL).
func TestPersonalUsageStaysOutOfPostgres(t *testing.T) {
	e := start(t, "")
	team := e.createWorkspace(t, map[string]any{"name": "Alpha", "teamId": "team-1"})
	personal := e.createWorkspace(t, map[string]any{"name": "Alpha"})
	nc := e.srv.DialNATS()
	defer nc.Close()
	for ws, cost := range map[string]float64{team: 1, personal: 0.5} {
		waggletest.Operate(t, nc, protocol.RecordUsage, protocol.UsageRecord{Workspace: ws, Session: "s", Model: "m", InputTokens: 10, OutputTokens: 2, Cost: cost})
	}
	data, err := os.ReadFile(filepath.Join(e.dataDir, ledger.UsageFile))
	if err != nil {
		t.Fatalf("the personal usage is not in the data dir: %v", err)
	}
	if !strings.Contains(string(data), `"workspace":"`+personal+`"`) || strings.Contains(string(data), `"workspace":"`+team+`"`) {
		t.Errorf("usage.jsonl holds %s, want the personal workspace's line only", data)
	}
	if n, c := e.cost(t); n != 2 || c != 1.5 {
		t.Errorf("agent cost: %d turns $%v, want 2 $1.5", n, c)
	}
	if s := spent(t, nc, personal); s.Turns != 1 || s.EstimatedCost != 0.5 {
		t.Errorf("personal spend %+v", s)
	}

	e.stopStore(t)
	e.startStore(t, "", t.TempDir())
	if s := spent(t, nc, team); s.Turns != 1 || s.EstimatedCost != 1 {
		t.Errorf("team spend after losing the data dir: %+v, want 1 turn $1", s)
	}
	if again := e.createWorkspace(t, map[string]any{"name": "Alpha"}); again != personal {
		t.Fatalf("recreated personal workspace id = %s, want %s", again, personal)
	}
	if s := spent(t, nc, personal); s.Turns != 0 {
		t.Errorf("a personal workspace's usage was in PostgreSQL: %+v", s)
	}
	if n, c := e.cost(t); n != 1 || c != 1 {
		t.Errorf("agent cost after losing the data dir: %d turns $%v, want 1 $1", n, c)
	}
	if st := e.srv.JSON(http.MethodPost, "/api/agent/cost/reset", map[string]any{}, nil); st != 200 {
		t.Fatalf("reset: %d", st)
	}
	waggletest.Operate(t, nc, protocol.RecordUsage, protocol.UsageRecord{Workspace: personal, Model: "m", InputTokens: 1, Cost: 0.25})
	if n, c := e.cost(t); n != 1 || c != 0.25 {
		t.Errorf("agent cost after a reset: %d turns $%v, want 1 $0.25", n, c)
	}
}

// TestPersonalUsageMovesOutOfPostgres: usage lines an older version kept
// in PostgreSQL for a personal workspace (it kept every line there; here
// written as it did by ledgertest.Legacy) move to the data
// dir when the store starts: the totals are unchanged, the file holds
// them, and a store on a fresh data dir no longer finds them.
func TestPersonalUsageMovesOutOfPostgres(t *testing.T) {
	e := start(t, "")
	team := e.createWorkspace(t, map[string]any{"name": "Alpha", "teamId": "team-1"})
	personal := e.createWorkspace(t, map[string]any{"name": "Alpha"})
	e.stopStore(t)

	old := ledgertest.Legacy(t, e.pgURL)
	for ws, cost := range map[string]float64{team: 1, personal: 0.5} {
		if err := old.Record(protocol.UsageRecord{Workspace: ws, Model: "m", InputTokens: 10, Cost: cost}); err != nil {
			t.Fatal(err)
		}
	}

	dir := e.dataDir
	e.startStore(t, "", dir)
	nc := e.srv.DialNATS()
	defer nc.Close()
	if n, c := e.cost(t); n != 2 || c != 1.5 {
		t.Errorf("agent cost after the move: %d turns $%v, want 2 $1.5", n, c)
	}
	if s := spent(t, nc, personal); s.Turns != 1 || s.EstimatedCost != 0.5 {
		t.Errorf("personal spend after the move: %+v", s)
	}
	if data, err := os.ReadFile(filepath.Join(dir, ledger.UsageFile)); err != nil || !strings.Contains(string(data), `"workspace":"`+personal+`"`) {
		t.Errorf("the personal line was not written to the data dir: %q %v", data, err)
	}
	if rows := ledgertest.Rows(t, e.pgURL, personal); rows != 0 {
		t.Errorf("personal rows left in PostgreSQL: %d", rows)
	}
	if rows := ledgertest.Rows(t, e.pgURL, team); rows != 1 {
		t.Errorf("team rows in PostgreSQL: %d, want 1", rows)
	}
	// A second start reads the file; nothing is counted twice.
	e.stopStore(t)
	e.startStore(t, "", dir)
	if n, c := e.cost(t); n != 2 || c != 1.5 {
		t.Errorf("agent cost after a second start: %d turns $%v, want 2 $1.5", n, c)
	}
}
