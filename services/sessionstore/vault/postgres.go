package vault

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/pgmigrate"
)

// pgBackend keeps sealed entries in PostgreSQL, one row per secret, so
// every session store process of a team server shares the teams' vaults.
type pgBackend struct {
	pool *pgxpool.Pool
}

func (p *pgBackend) list(ctx context.Context, team string) (map[string]entry, error) {
	rows, err := p.pool.Query(ctx, `SELECT name, type, updated_at, sealed FROM vault_secrets WHERE team = $1`, team)
	if err != nil {
		return nil, fmt.Errorf("vault: list: %w", err)
	}
	out := map[string]entry{}
	var (
		name string
		e    entry
	)
	_, err = pgx.ForEachRow(rows, []any{&name, &e.Type, &e.UpdatedAt, &e.Sealed}, func() error {
		out[name] = entry{Type: e.Type, UpdatedAt: e.UpdatedAt.UTC(), Sealed: bytes.Clone(e.Sealed)}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("vault: list: %w", err)
	}
	return out, nil
}

func (p *pgBackend) get(ctx context.Context, team, name string) (entry, bool, error) {
	var e entry
	err := p.pool.QueryRow(ctx, `SELECT type, updated_at, sealed FROM vault_secrets WHERE team = $1 AND name = $2`, team, name).
		Scan(&e.Type, &e.UpdatedAt, &e.Sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return entry{}, false, nil
	}
	if err != nil {
		return entry{}, false, fmt.Errorf("vault: read %s: %w", name, err)
	}
	e.UpdatedAt = e.UpdatedAt.UTC()
	return e, true, nil
}

func (p *pgBackend) put(ctx context.Context, team, name string, e entry) error {
	return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		// The team's rows are locked for the count, so two saves of new
		// names cannot both pass the limit.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('waggle-vault:' || $1, 0))`, team); err != nil {
			return fmt.Errorf("vault: lock: %w", err)
		}
		var n int
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT count(*), bool_or(name = $2) IS TRUE FROM vault_secrets WHERE team = $1`, team, name).Scan(&n, &exists); err != nil {
			return fmt.Errorf("vault: count: %w", err)
		}
		if !exists && n >= maxEntries {
			return errFull
		}
		_, err := tx.Exec(ctx, `INSERT INTO vault_secrets (team, name, type, updated_at, sealed) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (team, name) DO UPDATE SET type = EXCLUDED.type, updated_at = EXCLUDED.updated_at, sealed = EXCLUDED.sealed`,
			team, name, e.Type, e.UpdatedAt, e.Sealed)
		if err != nil {
			return fmt.Errorf("vault: write %s: %w", name, err)
		}
		return nil
	})
}

func (p *pgBackend) remove(ctx context.Context, team, name string) (bool, error) {
	tag, err := p.pool.Exec(ctx, `DELETE FROM vault_secrets WHERE team = $1 AND name = $2`, team, name)
	if err != nil {
		return false, fmt.Errorf("vault: delete %s: %w", name, err)
	}
	return tag.RowsAffected() > 0, nil
}

// errOtherKey is a store whose vault.key is not the one the table's
// secrets were sealed with (a second store process given its own key).
var errOtherKey = errors.New("vault: this session store's " + KeyFile + " is not the key the vault in PostgreSQL was sealed with: give every session store process the same " + KeyFile)

// checkKey records fp as the vault's key fingerprint when there is none,
// and refuses another.
func (p *pgBackend) checkKey(ctx context.Context, fp []byte) error {
	if _, err := p.pool.Exec(ctx, `INSERT INTO vault_key (id, fingerprint) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`, fp); err != nil {
		return fmt.Errorf("vault: key fingerprint: %w", err)
	}
	var stored []byte
	if err := p.pool.QueryRow(ctx, `SELECT fingerprint FROM vault_key WHERE id = 1`).Scan(&stored); err != nil {
		return fmt.Errorf("vault: key fingerprint: %w", err)
	}
	if !bytes.Equal(stored, fp) {
		return errOtherKey
	}
	return nil
}

//go:embed migrations/*.sql
var migrations embed.FS

// schema is the vault's migrations, with their own version table and
// advisory lock ("WaggVaul"), so they neither wait for nor clash with other
// packages' migrations.
var schema = pgmigrate.Set{Name: "vault", FS: pgmigrate.Sub(migrations, "migrations"), Table: "waggle_schema_vault", LockID: 0x5761676756617561}

// Migrate applies the vault's pending migrations on pool. Running it again
// (or from several processes at once) is harmless.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error { return schema.Migrate(ctx, pool) }
