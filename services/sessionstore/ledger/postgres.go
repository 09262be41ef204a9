package ledger

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/pgmigrate"
	"github.com/waggle-os/core/libs/protocol"
)

// modelKey is the ledger_settings row of the current agent model.
const modelKey = "model"

// pgBackend keeps the ledger in PostgreSQL; it holds no state of its own,
// so every store process sharing the database sees the same totals.
type pgBackend struct {
	pool *pgxpool.Pool
}

func (p *pgBackend) append(ctx context.Context, ln line) error {
	_, err := p.insert(ctx, ln)
	return err
}

// insert appends ln and returns its seq.
func (p *pgBackend) insert(ctx context.Context, ln line) (int64, error) {
	at, err := time.Parse(time.RFC3339Nano, ln.Timestamp)
	if err != nil {
		return 0, fmt.Errorf("ledger: append %s: timestamp %q: %w", ln.Type, ln.Timestamp, err)
	}
	var seq int64
	err = p.pool.QueryRow(ctx, `INSERT INTO ledger_lines (kind, at, model, input_tokens, output_tokens, cost, workspace)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING seq`, ln.Type, at, ln.Model, ln.InputTokens, ln.OutputTokens, ln.Cost, ln.Workspace).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("ledger: append %s: %w", ln.Type, err)
	}
	return seq, nil
}

func (p *pgBackend) summary(ctx context.Context, from *time.Time, workspace string) (protocol.UsageSummary, error) {
	// Either every usage row at or after from (resets ignored), or every
	// usage row after the last reset marker.
	const q = `SELECT model, sum(input_tokens), sum(output_tokens), sum(cost), count(*)
		FROM ledger_lines
		WHERE kind = 'usage' AND ($2 = '' OR workspace = $2) AND (
			($1::timestamptz IS NOT NULL AND at >= $1) OR
			($1::timestamptz IS NULL AND seq > coalesce((SELECT max(seq) FROM ledger_lines WHERE kind = 'reset'), 0)))
		GROUP BY model ORDER BY model`
	rows, err := p.pool.Query(ctx, q, from, workspace)
	if err != nil {
		return protocol.UsageSummary{}, fmt.Errorf("ledger: summary: %w", err)
	}
	sum := protocol.UsageSummary{ByModel: map[string]protocol.ModelUsage{}}
	var model string
	var in, out, n int64
	var cost float64
	_, err = pgx.ForEachRow(rows, []any{&model, &in, &out, &cost, &n}, func() error {
		sum.TotalInputTokens += int(in)
		sum.TotalOutputTokens += int(out)
		sum.EstimatedCost += cost
		sum.Turns += int(n)
		sum.ByModel[model] = protocol.ModelUsage{Input: int(in), Output: int(out), Cost: cost}
		return nil
	})
	if err != nil {
		return protocol.UsageSummary{}, fmt.Errorf("ledger: summary: %w", err)
	}
	return sum, nil
}

func (p *pgBackend) model(ctx context.Context) (string, error) {
	var m string
	err := p.pool.QueryRow(ctx, `SELECT value FROM ledger_settings WHERE key = $1`, modelKey).Scan(&m)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("ledger: read model: %w", err)
	}
	return m, nil
}

func (p *pgBackend) setModel(ctx context.Context, model string) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO ledger_settings (key, value) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, modelKey, model)
	if err != nil {
		return fmt.Errorf("ledger: set model: %w", err)
	}
	return nil
}

//go:embed migrations/*.sql
var migrations embed.FS

// schema is the ledger's migrations, with their own version table and
// advisory lock ("WaggLedg"), so they neither wait for nor clash with other
// packages' migrations.
var schema = pgmigrate.Set{Name: "ledger", FS: pgmigrate.Sub(migrations, "migrations"), Table: "waggle_schema_ledger", LockID: 0x576167674c656467}

// Migrate applies the ledger's pending migrations on pool. Running it again
// (or from several processes at once) is harmless.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error { return schema.Migrate(ctx, pool) }
