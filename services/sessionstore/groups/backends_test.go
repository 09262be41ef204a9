package groups_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/services/sessionstore/groups"
	"github.com/waggle-os/core/services/sessionstore/groups/groupstest"
)

func open(t *testing.T, cfg groups.Config) *groups.Roster {
	t.Helper()
	s, err := groups.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestFileConformance(t *testing.T) {
	groupstest.Run(t, func(t *testing.T) groupstest.Backend {
		dir := t.TempDir()
		return groupstest.Backend{Open: func(t *testing.T) *groups.Roster { return open(t, groups.Config{DataDir: dir}) }}
	})
}

func TestPostgresConformance(t *testing.T) {
	groupstest.Run(t, func(t *testing.T) groupstest.Backend {
		pool, err := pgxpool.New(context.Background(), pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return groupstest.Backend{Open: func(t *testing.T) *groups.Roster { return open(t, groups.Config{Pool: pool}) }}
	})
}

// TestSplitConformance: split (teams' groups in PostgreSQL, the others in
// the file) the roster answers as either backend alone.
func TestSplitConformance(t *testing.T) {
	groupstest.Run(t, func(t *testing.T) groupstest.Backend {
		pool, err := pgxpool.New(context.Background(), pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		dir := t.TempDir()
		return groupstest.Backend{Open: func(t *testing.T) *groups.Roster {
			return open(t, groups.Config{DataDir: dir, Pool: pool, Split: true})
		}}
	})
}
