package groups

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/pgmigrate"
	"github.com/waggle-os/core/libs/protocol"
)

// pgBackend keeps the groups in PostgreSQL, one row per group.
type pgBackend struct {
	pool *pgxpool.Pool
}

func (p *pgBackend) list(ctx context.Context) ([]protocol.AgentGroup, error) {
	rows, err := p.pool.Query(ctx, `SELECT doc FROM agent_groups ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("groups: list: %w", err)
	}
	gs := []protocol.AgentGroup{}
	var doc []byte
	_, err = pgx.ForEachRow(rows, []any{&doc}, func() error {
		g, err := decode(doc)
		gs = append(gs, g)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("groups: list: %w", err)
	}
	return gs, nil
}

func decode(doc []byte) (protocol.AgentGroup, error) {
	var g protocol.AgentGroup
	if err := json.Unmarshal(doc, &g); err != nil {
		return g, fmt.Errorf("decode group: %w", err)
	}
	if g.Members == nil {
		g.Members = []protocol.AgentGroupMember{}
	}
	return g, nil
}

func (p *pgBackend) insert(ctx context.Context, g protocol.AgentGroup) error {
	doc, err := json.Marshal(g)
	if err != nil {
		return fmt.Errorf("groups: create: encode: %w", err)
	}
	if _, err := p.pool.Exec(ctx, `INSERT INTO agent_groups (id, doc) VALUES ($1, $2)`, g.ID, doc); err != nil {
		return fmt.Errorf("groups: create %s: %w", g.ID, err)
	}
	return nil
}

func (p *pgBackend) update(ctx context.Context, id string, fn func(protocol.AgentGroup) (protocol.AgentGroup, error)) (protocol.AgentGroup, error) {
	var out protocol.AgentGroup
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		// The row lock serialises concurrent updates of one group, so
		// neither loses the other's fields.
		var doc []byte
		err := tx.QueryRow(ctx, `SELECT doc FROM agent_groups WHERE id = $1 FOR UPDATE`, id).Scan(&doc)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("groups: update %s: %w", id, err)
		}
		g, err := decode(doc)
		if err != nil {
			return fmt.Errorf("groups: update %s: %w", id, err)
		}
		if g, err = fn(g); err != nil {
			return err
		}
		if doc, err = json.Marshal(g); err != nil {
			return fmt.Errorf("groups: update %s: encode: %w", id, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE agent_groups SET doc = $2 WHERE id = $1`, id, doc); err != nil {
			return fmt.Errorf("groups: update %s: %w", id, err)
		}
		out = g
		return nil
	})
	return out, err
}

func (p *pgBackend) remove(ctx context.Context, id string) error {
	tag, err := p.pool.Exec(ctx, `DELETE FROM agent_groups WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("groups: delete %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

//go:embed migrations/*.sql
var migrations embed.FS

// schema is the groups' migrations, with their own version table and
// advisory lock ("WaggGrps"), so they neither wait for nor clash with other
// packages' migrations.
var schema = pgmigrate.Set{Name: "groups", FS: pgmigrate.Sub(migrations, "migrations"), Table: "waggle_schema_groups", LockID: 0x5761676747727073}

// Migrate applies the groups' pending migrations on pool. Running it again
// (or from several processes at once) is harmless.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error { return schema.Migrate(ctx, pool) }
