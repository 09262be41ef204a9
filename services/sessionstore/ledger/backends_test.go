package ledger_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/services/sessionstore/ledger"
	"github.com/waggle-os/core/services/sessionstore/ledger/ledgertest"
)

func open(t *testing.T, cfg ledger.Config) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestFileConformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledgertest.Backend {
		dir := t.TempDir()
		return ledgertest.Backend{Open: func(t *testing.T) *ledger.Ledger { return open(t, ledger.Config{DataDir: dir}) }}
	})
}

func TestPostgresConformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledgertest.Backend {
		pool, err := pgxpool.New(context.Background(), pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return ledgertest.Backend{Open: func(t *testing.T) *ledger.Ledger { return open(t, ledger.Config{Pool: pool}) }}
	})
}

// TestSplitConformance: split as a team server with personal workspaces
// splits it ("ops" a team workspace in PostgreSQL, every other line in the
// file), the ledger counts, resets and remembers the model as either
// backend alone.
func TestSplitConformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) ledgertest.Backend {
		pool, err := pgxpool.New(context.Background(), pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		dir := t.TempDir()
		isTeam := func(_ context.Context, ws string) (bool, error) { return ws == "ops", nil }
		return ledgertest.Backend{Open: func(t *testing.T) *ledger.Ledger {
			return open(t, ledger.Config{DataDir: dir, Pool: pool, IsTeam: isTeam})
		}}
	})
}
