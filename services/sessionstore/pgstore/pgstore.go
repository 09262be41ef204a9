// Package pgstore keeps workspaces, sessions and memories in PostgreSQL
// (pgx/v5, pooled), behind the same store interface as the JSONL files and
// passing the same conformance suite (sessionstore/storetest).
//
// A session is one row of sessions (its meta line and the listing columns)
// plus one row per line in session_lines, each line kept as the exact JSON
// the JSONL store would write. Reads that need a whole session (history,
// export, timeline, summary) reassemble the JSONL bytes and run the same
// transcript algorithms, so both stores answer alike by construction. Listing
// reads only the sessions rows. Search matches lower-cased columns with
// LIKE through pg_trgm GIN indexes (the message index covers only the
// first 50 message lines of each session, the only ones searched), so it
// does not scan the table.
//
// Every request that writes more than one row runs in a transaction, and
// every write to a session locks its sessions row first, so appends,
// renames and summary write-backs serialise per session and never lose a
// line. Migrations are embedded and applied by Open (goose, own version
// table waggle_schema_sessions, under a PostgreSQL advisory lock so
// several store processes may start at once).
package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/pgmigrate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// SchemaTable is goose's version table for this package's migrations
// (0001–0049). Other packages keep their own tables.
const SchemaTable = "waggle_schema_sessions"

// migrationLockID is the advisory lock taken while migrating: its own, so
// other packages' migrations neither wait for nor clash with these.
const migrationLockID int64 = 0x5761676753657373 // "WaggSess"

// Config configures the store.
type Config struct {
	// URL is the PostgreSQL connection URL (WAGGLE_POSTGRES_URL). Required.
	URL string
	// MaxConns bounds the pool. Default 16.
	MaxConns int32
	// Location renders export dates. Default: time.Local.
	Location *time.Location
	// Logger reports failed lazy summary write-backs. Default: slog.Default().
	Logger *slog.Logger
}

// Validate checks c and fills defaults.
func (c *Config) Validate() error {
	if c.URL == "" {
		return errors.New("pgstore: URL is required")
	}
	if c.MaxConns <= 0 {
		c.MaxConns = 16
	}
	if c.Location == nil {
		c.Location = time.Local
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Store is the PostgreSQL store. It is inert until Open.
type Store struct {
	cfg  Config
	pool *pgxpool.Pool
	now  func() time.Time
}

// New returns an unopened store.
func New(cfg Config) *Store {
	return &Store{cfg: cfg, now: time.Now}
}

// Open connects, applies pending migrations and keeps the pool.
func (s *Store) Open(ctx context.Context) error {
	if err := s.cfg.Validate(); err != nil {
		return err
	}
	pcfg, err := pgxpool.ParseConfig(s.cfg.URL)
	if err != nil {
		return fmt.Errorf("pgstore: parse URL: %w", err)
	}
	pcfg.MaxConns = s.cfg.MaxConns
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("pgstore: connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return fmt.Errorf("pgstore: connect: %w", err)
	}
	if err := Migrate(ctx, pool); err != nil {
		pool.Close()
		return err
	}
	s.pool = pool
	return nil
}

// Pool is the open connection pool, shared with the teams package (which
// keeps its tables in the same database). Nil before Open.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool.
func (s *Store) Close() {
	if s.pool != nil {
		s.pool.Close()
	}
}

// Migrate applies this package's pending migrations on pool. Running it
// again (or from several processes at once) is harmless.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pgmigrate.Up(ctx, pool, pgmigrate.Set{FS: pgmigrate.Sub(migrations, "migrations"), Table: SchemaTable, LockID: migrationLockID}); err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	return nil
}

// inTx runs fn in a transaction, committing when it returns nil.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}
