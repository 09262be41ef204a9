// Package userdocs keeps small JSON documents that belong to a user or a
// team (a user's profile, a team's custom personas): in files under the
// data directory, or in PostgreSQL on team servers so every store process
// shares them.
package userdocs

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/pgmigrate"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/jsonl"
)

// Key names one document. Kind is the document ("profile"); Scope and
// Owner whose it is: both empty for the local (desktop) owner, else a
// scope such as "users" or "teams" and that user's or team's id.
type Key struct {
	Kind, Scope, Owner string
}

// check refuses keys that could leave their directory.
func (k Key) check() error {
	if !protocol.ValidID(k.Kind) {
		return fmt.Errorf("userdocs: invalid kind %q", k.Kind)
	}
	if (k.Scope == "") != (k.Owner == "") {
		return errors.New("userdocs: scope and owner go together")
	}
	if k.Owner != "" && (!protocol.ValidID(k.Scope) || !protocol.ValidID(k.Owner)) {
		return protocol.Errorf(protocol.Invalid, "invalid owner id")
	}
	return nil
}

// Store reads and updates documents.
type Store interface {
	// Get returns the document, or found false when there is none.
	Get(ctx context.Context, k Key) (doc []byte, found bool, err error)
	// Update replaces the document with fn's result, serialised with
	// other updates of the same document so none is lost.
	Update(ctx context.Context, k Key, fn func(old []byte, found bool) ([]byte, error)) error
	// Delete removes the document; one that does not exist is no error.
	Delete(ctx context.Context, k Key) error
}

// New returns the PostgreSQL store when pool is set (migrating its table),
// else the file store under dataDir.
func New(ctx context.Context, dataDir string, pool *pgxpool.Pool) (Store, error) {
	if pool != nil {
		if err := schema.Migrate(ctx, pool); err != nil {
			return nil, fmt.Errorf("userdocs: migrate: %w", err)
		}
		return &pgStore{pool: pool}, nil
	}
	if dataDir == "" {
		return nil, errors.New("userdocs: a data directory or a pool is required")
	}
	return &fileStore{dir: dataDir}, nil
}

// fileStore keeps <dir>/<kind>.json for the local owner and
// <dir>/<scope>/<owner>/<kind>.json for the others (the original's
// profile.json stays where it was).
type fileStore struct {
	dir string
	mu  sync.Mutex
}

func (f *fileStore) path(k Key) string {
	if k.Owner == "" {
		return filepath.Join(f.dir, k.Kind+".json")
	}
	return filepath.Join(f.dir, k.Scope, k.Owner, k.Kind+".json")
}

func (f *fileStore) Get(_ context.Context, k Key) ([]byte, bool, error) {
	if err := k.check(); err != nil {
		return nil, false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.read(k)
}

func (f *fileStore) read(k Key) ([]byte, bool, error) {
	data, err := os.ReadFile(f.path(k))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("userdocs: read %s: %w", k.Kind, err)
	}
	return data, true, nil
}

func (f *fileStore) Update(_ context.Context, k Key, fn func([]byte, bool) ([]byte, error)) error {
	if err := k.check(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	old, found, err := f.read(k)
	if err != nil {
		return err
	}
	doc, err := fn(old, found)
	if err != nil {
		return err
	}
	p := f.path(k)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("userdocs: %s: %w", k.Kind, err)
	}
	if err := jsonl.WriteFileAtomic(p, doc); err != nil {
		return fmt.Errorf("userdocs: write %s: %w", k.Kind, err)
	}
	return nil
}

func (f *fileStore) Delete(_ context.Context, k Key) error {
	if err := k.check(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := os.Remove(f.path(k)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("userdocs: delete %s: %w", k.Kind, err)
	}
	return nil
}

// pgStore keeps one row per document.
type pgStore struct {
	pool *pgxpool.Pool
}

// Keys lists the keys of the documents in PostgreSQL (pool, migrated) for
// which keep is true: a store that splits documents between PostgreSQL
// and files finds those an older version put on the wrong side.
func Keys(ctx context.Context, pool *pgxpool.Pool, keep func(Key) bool) ([]Key, error) {
	if err := schema.Migrate(ctx, pool); err != nil {
		return nil, fmt.Errorf("userdocs: migrate: %w", err)
	}
	rows, err := pool.Query(ctx, `SELECT kind, scope, owner FROM user_docs WHERE doc <> 'null' ORDER BY kind, scope, owner`)
	if err != nil {
		return nil, fmt.Errorf("userdocs: list: %w", err)
	}
	var (
		k   Key
		out []Key
	)
	_, err = pgx.ForEachRow(rows, []any{&k.Kind, &k.Scope, &k.Owner}, func() error {
		if keep(k) {
			out = append(out, k)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("userdocs: list: %w", err)
	}
	return out, nil
}

func (p *pgStore) Get(ctx context.Context, k Key) ([]byte, bool, error) {
	if err := k.check(); err != nil {
		return nil, false, err
	}
	var doc []byte
	err := p.pool.QueryRow(ctx, `SELECT doc FROM user_docs WHERE kind = $1 AND scope = $2 AND owner = $3`, k.Kind, k.Scope, k.Owner).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("userdocs: read %s: %w", k.Kind, err)
	}
	return doc, true, nil
}

func (p *pgStore) Update(ctx context.Context, k Key, fn func([]byte, bool) ([]byte, error)) error {
	if err := k.check(); err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		// Create the row first so FOR UPDATE has something to lock: two
		// first updates of one document then queue instead of racing.
		if _, err := tx.Exec(ctx, `INSERT INTO user_docs (kind, scope, owner, doc) VALUES ($1, $2, $3, 'null') ON CONFLICT DO NOTHING`, k.Kind, k.Scope, k.Owner); err != nil {
			return fmt.Errorf("userdocs: update %s: %w", k.Kind, err)
		}
		var old []byte
		if err := tx.QueryRow(ctx, `SELECT doc FROM user_docs WHERE kind = $1 AND scope = $2 AND owner = $3 FOR UPDATE`, k.Kind, k.Scope, k.Owner).Scan(&old); err != nil {
			return fmt.Errorf("userdocs: update %s: %w", k.Kind, err)
		}
		found := string(old) != "null"
		if !found {
			old = nil
		}
		doc, err := fn(old, found)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE user_docs SET doc = $4, updated = now() WHERE kind = $1 AND scope = $2 AND owner = $3`, k.Kind, k.Scope, k.Owner, doc); err != nil {
			return fmt.Errorf("userdocs: update %s: %w", k.Kind, err)
		}
		return nil
	})
}

func (p *pgStore) Delete(ctx context.Context, k Key) error {
	if err := k.check(); err != nil {
		return err
	}
	if _, err := p.pool.Exec(ctx, `DELETE FROM user_docs WHERE kind = $1 AND scope = $2 AND owner = $3`, k.Kind, k.Scope, k.Owner); err != nil {
		return fmt.Errorf("userdocs: delete %s: %w", k.Kind, err)
	}
	return nil
}

//go:embed migrations/*.sql
var migrations embed.FS

// schema is the documents' migrations, with their own version table and
// advisory lock ("WaggDocs").
var schema = pgmigrate.Set{Name: "userdocs", FS: pgmigrate.Sub(migrations, "migrations"), Table: "waggle_schema_userdocs", LockID: 0x57616767446f6373}
