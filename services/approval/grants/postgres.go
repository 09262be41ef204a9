package grants

import (
	"context"
	"embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/pgmigrate"
)

// pgBackend keeps the grants in PostgreSQL; it caches nothing.
type pgBackend struct {
	pool *pgxpool.Pool
}

func (p *pgBackend) reload(context.Context) error { return nil }

// lockTable serialises grant writers across processes: replacing equals is
// a delete then an insert, and two concurrent ones must not both insert.
// Readers are not blocked.
const lockTable = `LOCK TABLE approval_grants IN SHARE ROW EXCLUSIVE MODE`

// dropExpired deletes the grants expired at $1, as the file store does on
// every write.
const dropExpired = `DELETE FROM approval_grants WHERE expires < $1`

func (p *pgBackend) put(ctx context.Context, g Grant, now time.Time) error {
	var expires *time.Time
	if g.ExpiresAt != nil {
		// An expiry that does not parse never passes (see Grant.expired).
		if t, err := time.Parse(time.RFC3339Nano, *g.ExpiresAt); err == nil {
			expires = &t
		}
	}
	return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockTable); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM approval_grants
			WHERE (tool_name = $1 AND target_key = $2 AND source_workspace_id IS NOT DISTINCT FROM $3)
			   OR expires < $4`, g.ToolName, g.TargetKey, g.SourceWorkspaceID, now); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO approval_grants
			(id, tool_name, target_key, source_workspace_id, description, granted_at, expires_at, expires)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			g.ID, g.ToolName, g.TargetKey, g.SourceWorkspaceID, g.Description, g.GrantedAt, g.ExpiresAt, expires)
		return err
	})
}

func (p *pgBackend) live(ctx context.Context, now time.Time) ([]Grant, error) {
	rows, err := p.pool.Query(ctx, `SELECT id, tool_name, target_key, source_workspace_id, description, granted_at, expires_at
		FROM approval_grants WHERE expires IS NULL OR expires >= $1 ORDER BY seq`, now)
	if err != nil {
		return nil, fmt.Errorf("grants: list: %w", err)
	}
	var out []Grant
	var g Grant
	_, err = pgx.ForEachRow(rows, []any{&g.ID, &g.ToolName, &g.TargetKey, &g.SourceWorkspaceID, &g.Description, &g.GrantedAt, &g.ExpiresAt},
		func() error {
			out = append(out, g.clone())
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("grants: list: %w", err)
	}
	return out, nil
}

func (p *pgBackend) revoke(ctx context.Context, id string, now time.Time) (bool, error) {
	found := false
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockTable); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM approval_grants WHERE id = $1`, id)
		if err != nil {
			return err
		}
		found = tag.RowsAffected() > 0
		_, err = tx.Exec(ctx, dropExpired, now)
		return err
	})
	return found, err
}

func (p *pgBackend) clear(ctx context.Context) error {
	_, err := p.pool.Exec(ctx, `DELETE FROM approval_grants`)
	return err
}

//go:embed migrations/*.sql
var migrations embed.FS

// schema is the grants' migrations, with their own version table and
// advisory lock ("WaggGrnt"), so they neither wait for nor clash with other
// packages' migrations.
var schema = pgmigrate.Set{Name: "grants", FS: pgmigrate.Sub(migrations, "migrations"), Table: "waggle_schema_grants", LockID: 0x5761676747726e74}

// Migrate applies the grants' pending migrations on pool. Running it again
// (or from several processes at once) is harmless.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error { return schema.Migrate(ctx, pool) }
