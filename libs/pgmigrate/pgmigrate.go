// Package pgmigrate applies a package's embedded SQL migrations with goose.
// Every store package that keeps tables in PostgreSQL (sessions, teams,
// ledger, groups, grants) owns its migrations and version table; this is
// the one way they are run.
package pgmigrate

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// Set is one package's migrations.
type Set struct {
	// Name is the owning package, the prefix of Migrate's errors.
	Name string
	// FS holds the .sql files at its root (fs.Sub an embed.FS down to them).
	FS fs.FS
	// Table is goose's version table for this set.
	Table string
	// LockID is the set's own PostgreSQL advisory lock, so replicas starting
	// together migrate once and sets never wait for each other.
	LockID int64
}

// Up applies the set's pending migrations on pool and returns the versions
// it applied. Running it again, or from several processes at once, is
// harmless.
func Up(ctx context.Context, pool *pgxpool.Pool, set Set) ([]int64, error) {
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(set.LockID))
	if err != nil {
		return nil, fmt.Errorf("pgmigrate %s: lock: %w", set.Table, err)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, set.FS,
		goose.WithTableName(set.Table), goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return nil, fmt.Errorf("pgmigrate %s: %w", set.Table, err)
	}
	res, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgmigrate %s: %w", set.Table, err)
	}
	applied := make([]int64, 0, len(res))
	for _, r := range res {
		applied = append(applied, r.Source.Version)
	}
	return applied, nil
}

// Migrate applies the set's pending migrations on pool, as Up does, for a
// store opening its PostgreSQL backend: its error names the set's owner.
func (s Set) Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := Up(ctx, pool, s); err != nil {
		return fmt.Errorf("%s: migrate: %w", s.Name, err)
	}
	return nil
}

// Sub returns the migrations directory of an embedded FS, panicking on a
// bad name: the name is a constant of the caller's own embed directive.
func Sub(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic("pgmigrate: " + err.Error())
	}
	return sub
}
