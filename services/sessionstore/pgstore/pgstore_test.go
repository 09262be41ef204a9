package pgstore_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore"
	"github.com/waggle-os/core/services/sessionstore/pgstore"
	"github.com/waggle-os/core/services/sessionstore/storetest"
)

func open(t *testing.T, url string) *pgstore.Store {
	t.Helper()
	s := pgstore.New(pgstore.Config{URL: url, Logger: slog.New(slog.DiscardHandler)})
	if err := s.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestConformance runs the store conformance suite on PostgreSQL.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) sessionstore.Store { return open(t, pgtest.URL(t)) })
}

// TestMigrationsTwiceHarmless opens a store on a database twice (and
// migrates concurrently): the second run applies nothing and keeps the
// data.
func TestMigrationsTwiceHarmless(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	first := open(t, url)
	m := protocol.Message{Role: "user", Content: "kept across restarts"}
	if _, err := first.Append(ctx, protocol.AppendRequest{SessionRef: protocol.SessionRef{Workspace: "w", Session: "s"}, Message: &m}); err != nil {
		t.Fatal(err)
	}
	first.Close()
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			s := pgstore.New(pgstore.Config{URL: url})
			err := s.Open(ctx)
			s.Close()
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatalf("second migration: %v", err)
		}
	}
	again := open(t, url)
	h, err := again.History(ctx, protocol.HistoryRequest{SessionRef: protocol.SessionRef{Workspace: "w", Session: "s"}})
	if err != nil || len(h.Messages) != 1 || h.Messages[0].Content != "kept across restarts" {
		t.Fatalf("history after re-migration = %+v, %v", h, err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var applied int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+pgstore.SchemaTable+` WHERE version_id > 0`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations: %v %v", files, err)
	}
	if applied != len(files) {
		t.Errorf("%d migration rows, want %d (each migration applied once)", applied, len(files))
	}
}

// TestSearchUsesIndex checks search is answered through the trigram index,
// not a sequential scan, on a table large enough for the planner to care.
func TestSearchUsesIndex(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	open(t, url)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		`INSERT INTO sessions (workspace, id, meta, message_count, line_count, last_active)
			SELECT 'w', 's' || g, '{"type":"meta","title":null,"created":"2026-01-01T00:00:00.000Z"}', 10, 10, now() FROM generate_series(1, 2000) g`,
		`INSERT INTO session_lines (workspace, session, seq, mline, lcontent, line)
			SELECT 'w', 's' || (g / 10 + 1), g % 10 + 1, g % 10 + 1, 'message number ' || g || ' about topic ' || (g % 97),
				'{"role":"user","content":"x"}' FROM generate_series(0, 19999) g`,
		`ANALYZE`,
		// A table this small may be scanned; the point is that the query
		// shape can use the index at all (a parameterised mline bound, for
		// one, could not).
		`SET enable_seqscan = off`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var plan string
	rows, err := conn.Query(ctx, `EXPLAIN SELECT session, count(*) FROM session_lines WHERE workspace = 'w' AND mline <= 50 AND lcontent LIKE '%number 1234 %' GROUP BY session`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan += line + "\n"
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if !strings.Contains(plan, "session_lines_search_trgm") {
		t.Errorf("search does not use the trigram index:\n%s", plan)
	}
}
