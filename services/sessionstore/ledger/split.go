package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/waggle-os/core/libs/protocol"
)

// split is the ledger of a team server that keeps personal workspaces in
// the data dir (the session store's rule, docs/teams.md): a team
// workspace's usage lines are rows of ledger_lines, every other line —
// a personal workspace's, or one of no workspace — is a line of the file,
// so nothing personal reaches the team database.
//
// Totals over every workspace add both; one workspace's read the side
// that holds it. A reset is a marker on both sides: PostgreSQL's first,
// then the file's carrying its seq (line.PGSeq). The model stays in
// PostgreSQL: it is the server's, not a workspace's.
type split struct {
	isTeam func(ctx context.Context, workspace string) (bool, error)
	files  *fileBackend
	team   *pgBackend
	log    *slog.Logger
}

var _ backend = (*split)(nil)

// inTeam reports whether workspace's lines belong in PostgreSQL.
func (s *split) inTeam(ctx context.Context, workspace string) (bool, error) {
	if workspace == "" {
		return false, nil
	}
	team, err := s.isTeam(ctx, workspace)
	if err != nil {
		return false, fmt.Errorf("ledger: where %s lives: %w", workspace, err)
	}
	return team, nil
}

func (s *split) append(ctx context.Context, ln line) error {
	if ln.Type == "reset" {
		seq, err := s.team.insert(ctx, ln)
		if err != nil {
			return err
		}
		ln.PGSeq = seq
		return s.files.append(ctx, ln)
	}
	team, err := s.inTeam(ctx, ln.Workspace)
	if err != nil {
		return err
	}
	if team {
		return s.team.append(ctx, ln)
	}
	return s.files.append(ctx, ln)
}

func (s *split) summary(ctx context.Context, from *time.Time, workspace string) (protocol.UsageSummary, error) {
	if workspace != "" {
		team, err := s.inTeam(ctx, workspace)
		if err != nil {
			return protocol.UsageSummary{}, err
		}
		if team {
			return s.team.summary(ctx, from, workspace)
		}
		return s.files.summary(ctx, from, workspace)
	}
	sum, err := s.files.summary(ctx, from, "")
	if err != nil {
		return sum, err
	}
	pg, err := s.team.summary(ctx, from, "")
	if err != nil {
		return pg, err
	}
	sum.TotalInputTokens += pg.TotalInputTokens
	sum.TotalOutputTokens += pg.TotalOutputTokens
	sum.EstimatedCost += pg.EstimatedCost
	sum.Turns += pg.Turns
	for model, u := range pg.ByModel {
		m := sum.ByModel[model]
		m.Input += u.Input
		m.Output += u.Output
		m.Cost += u.Cost
		sum.ByModel[model] = m
	}
	return sum, nil
}

func (s *split) model(ctx context.Context) (string, error) { return s.team.model(ctx) }

func (s *split) setModel(ctx context.Context, model string) error {
	return s.team.setModel(ctx, model)
}

// movePersonal moves into the file the usage lines an older version kept
// in PostgreSQL for personal workspaces (with a pool it kept every line
// there), then deletes their rows. The last reset PostgreSQL holds is
// copied into the file first unless it is there already, so "since the
// last reset" means the same on both sides (and a reset whose file marker
// a crash lost is completed). A moved line that PostgreSQL had already
// reset keeps not counting (fileBackend.apply).
//
// Every line written carries its PostgreSQL seq: a crash after the file
// was synced but before the rows were deleted repeats the move at the next
// start, which finds those lines in the file, writes none of them twice
// and deletes the rows. Lines of a workspace that no longer exists, or of
// none (written before lines had a workspace), stay where they are.
func (s *split) movePersonal(ctx context.Context, personal func(context.Context, string) (bool, error)) error {
	pool := s.team.pool
	var lines []line
	var resetSeq int64
	var resetAt time.Time
	err := pool.QueryRow(ctx, `SELECT seq, at FROM ledger_lines WHERE kind = 'reset' ORDER BY seq DESC LIMIT 1`).Scan(&resetSeq, &resetAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return fmt.Errorf("ledger: last reset: %w", err)
	case !s.files.hasPG(resetSeq):
		lines = append(lines, line{Type: "reset", UsageRecord: protocol.UsageRecord{Timestamp: stamp(resetAt)}, PGSeq: resetSeq})
	}
	wss, err := s.personalWorkspaces(ctx, personal)
	if err != nil {
		return err
	}
	var seqs []int64
	if len(wss) > 0 {
		rows, err := pool.Query(ctx, `SELECT seq, at, model, input_tokens, output_tokens, cost, workspace
			FROM ledger_lines WHERE kind = 'usage' AND workspace = ANY($1) ORDER BY seq`, wss)
		if err != nil {
			return fmt.Errorf("ledger: read personal lines: %w", err)
		}
		var seq, in, out int64
		var at time.Time
		var model, ws string
		var cost float64
		_, err = pgx.ForEachRow(rows, []any{&seq, &at, &model, &in, &out, &cost, &ws}, func() error {
			seqs = append(seqs, seq)
			if !s.files.hasPG(seq) {
				lines = append(lines, line{Type: "usage", PGSeq: seq, UsageRecord: protocol.UsageRecord{
					Workspace: ws, Model: model, InputTokens: int(in), OutputTokens: int(out), Cost: cost, Timestamp: stamp(at)}})
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("ledger: read personal lines: %w", err)
		}
	}
	if len(lines) > 0 {
		if err := s.files.appendAll(lines); err != nil {
			return err
		}
	}
	if len(seqs) > 0 {
		if _, err := pool.Exec(ctx, `DELETE FROM ledger_lines WHERE seq = ANY($1)`, seqs); err != nil {
			return fmt.Errorf("ledger: delete moved lines: %w", err)
		}
		s.log.Info("personal usage lines moved out of PostgreSQL into the data dir", "lines", len(seqs), "workspaces", len(wss))
	}
	return nil
}

// personalWorkspaces lists the workspaces with usage rows in PostgreSQL
// that personal reports as personal workspaces that exist.
func (s *split) personalWorkspaces(ctx context.Context, personal func(context.Context, string) (bool, error)) ([]string, error) {
	if personal == nil {
		return nil, nil
	}
	rows, err := s.team.pool.Query(ctx, `SELECT DISTINCT workspace FROM ledger_lines WHERE kind = 'usage' AND workspace <> '' ORDER BY workspace`)
	if err != nil {
		return nil, fmt.Errorf("ledger: list workspaces: %w", err)
	}
	all, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("ledger: list workspaces: %w", err)
	}
	var out []string
	for _, ws := range all {
		if !protocol.ValidID(ws) {
			continue
		}
		ok, err := personal(ctx, ws)
		if err != nil {
			return nil, fmt.Errorf("ledger: where %s lives: %w", ws, err)
		}
		if ok {
			out = append(out, ws)
		}
	}
	return out, nil
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
