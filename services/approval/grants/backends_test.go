package grants_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/services/approval/grants"
	"github.com/waggle-os/core/services/approval/grants/grantstest"
)

func TestFileConformance(t *testing.T) {
	grantstest.Run(t, func(t *testing.T) grantstest.Backend {
		dir := t.TempDir()
		return grantstest.Backend{
			Open: func(t *testing.T, now func() time.Time) *grants.Store {
				t.Helper()
				s, err := grants.Open(grants.Config{DataDir: dir, Now: now})
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				return s
			},
			Stored: func(t *testing.T) string {
				t.Helper()
				b, err := os.ReadFile(filepath.Join(dir, grants.FileName))
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			},
		}
	})
}

func TestPostgresConformance(t *testing.T) {
	grantstest.Run(t, func(t *testing.T) grantstest.Backend {
		pool, err := pgxpool.New(context.Background(), pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return grantstest.Backend{
			Open: func(t *testing.T, now func() time.Time) *grants.Store {
				t.Helper()
				s, err := grants.Open(grants.Config{Pool: pool, Now: now})
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				if s.Path() != "" {
					t.Fatalf("PostgreSQL store has a file path %q", s.Path())
				}
				return s
			},
			Stored: func(t *testing.T) string {
				t.Helper()
				var all string
				err := pool.QueryRow(context.Background(),
					`SELECT coalesce(string_agg(tool_name || ' ' || target_key, E'\n' ORDER BY seq), '') FROM approval_grants`).Scan(&all)
				if err != nil {
					t.Fatal(err)
				}
				return all
			},
		}
	})
}
