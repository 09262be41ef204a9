// Package ledger is the session store's usage ledger and agent settings:
// per-turn token usage summed over every runner and kept across restarts,
// and the current agent model.
//
// The ledger is an append-only JSONL file (<data-dir>/usage.jsonl): one
// line per recorded turn, and a reset marker line per cost reset, so
// history is never rewritten while totals restart. Sums are kept in memory
// and rebuilt from the file at start.
//
// With a PostgreSQL pool (Config.Pool) the same lines are rows of
// ledger_lines (usage rows and reset markers in one sequence) and the model
// a row of ledger_settings; every call reads the database, so several
// store processes share one ledger. Migrations are embedded and applied by
// Open under their own goose version table (waggle_schema_ledger).
//
// With both and Config.IsTeam (a team server that keeps personal
// workspaces in the data dir), the ledger is split as the workspaces are
// (split.go): a team workspace's lines in PostgreSQL, every other line in
// the file; totals add both, a reset goes to both.
package ledger

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

// File names under the data directory.
const (
	// UsageFile is the append-only usage ledger.
	UsageFile = "usage.jsonl"
	// StateFile holds the agent settings (the current model).
	StateFile = "agent-state.json"
)

// maxModelLength bounds a model name; anything longer is not a model id.
const maxModelLength = 256

// Config configures the ledger.
type Config struct {
	// DataDir is the data directory. Required.
	DataDir string
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Pool, when set, keeps the ledger and the model in PostgreSQL (team
	// servers with WAGGLE_POSTGRES_URL) instead of under DataDir. Default
	// nil: files.
	Pool *pgxpool.Pool
	// IsTeam, with Pool and DataDir, splits the ledger by the store's rule:
	// it reports whether a workspace lives in PostgreSQL (a team
	// workspace), whose lines go there; every other line (a personal
	// workspace's, or one of no workspace) goes to the file. The model
	// stays in PostgreSQL. Nil: all in Pool.
	IsTeam func(ctx context.Context, workspace string) (bool, error)
	// Personal, with IsTeam, reports whether a workspace whose lines an
	// older version kept in PostgreSQL is a personal workspace that
	// exists: Open moves such lines into the file.
	Personal func(ctx context.Context, workspace string) (bool, error)
}

// Validate checks c and fills defaults.
func (c *Config) Validate() error {
	if c.DataDir == "" && c.Pool == nil {
		return errors.New("ledger: DataDir is required")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Register opens the ledger under cfg.DataDir and adds its endpoints to svc.
func Register(svc *bus.Service, cfg Config, log *slog.Logger) error {
	l, err := Open(cfg, log)
	if err != nil {
		return err
	}
	return l.Register(svc)
}

// Register adds the ledger's endpoints to svc.
func (l *Ledger) Register(svc *bus.Service) error {
	return errors.Join(
		bus.Handle(svc, protocol.RecordUsage,
			func(_ context.Context, r protocol.UsageRecord) (protocol.Empty, error) {
				return protocol.Empty{}, l.Record(r)
			}),
		bus.Handle(svc, protocol.SummarizeUsage,
			func(_ context.Context, r protocol.UsageSummaryRequest) (protocol.UsageSummary, error) {
				return l.SummaryFor(r.Since, r.Workspace)
			}),
		bus.Handle(svc, protocol.ResetUsage,
			func(context.Context, protocol.Empty) (protocol.UsageReset, error) { return l.Reset() }),
		bus.Handle(svc, protocol.GetModel,
			func(context.Context, protocol.Empty) (protocol.AgentModel, error) {
				return protocol.AgentModel{Model: l.Model()}, nil
			}),
		bus.Handle(svc, protocol.SetModel,
			func(_ context.Context, m protocol.AgentModel) (protocol.AgentModel, error) {
				return l.SetModel(m.Model)
			}),
	)
}

// line is one ledger line: a usage record or a reset marker.
type line struct {
	Type string `json:"type"` // "usage" or "reset"
	protocol.UsageRecord
	// PGSeq, in the file, is the line's seq in ledger_lines when it came
	// from PostgreSQL (split.go): a personal line an older version kept
	// there, or the copy of a reset PostgreSQL also holds.
	PGSeq int64 `json:"pgSeq,omitempty"`
}

// backend keeps the ledger lines and the current model: the JSONL files
// under DataDir, or PostgreSQL when Config.Pool is set.
type backend interface {
	// append stores ln durably (ln is already validated and complete).
	append(ctx context.Context, ln line) error
	// summary totals usage lines since the last reset marker or, with from
	// set, every usage line at or after *from; with workspace set, only
	// that workspace's lines.
	summary(ctx context.Context, from *time.Time, workspace string) (protocol.UsageSummary, error)
	// model returns the stored model ("" when none is stored).
	model(ctx context.Context) (string, error)
	// setModel stores model.
	setModel(ctx context.Context, model string) error
}

// Ledger is the usage ledger and agent settings of one data directory (or
// one PostgreSQL database). It is safe for concurrent use.
type Ledger struct {
	cfg   Config
	log   *slog.Logger
	store backend
}

// Open loads the ledger and settings from cfg.DataDir, repairing a torn
// last ledger line left by a crash; with cfg.Pool it applies the ledger's
// migrations instead and reads PostgreSQL on every call.
func Open(cfg Config, log *slog.Logger) (*Ledger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	l := &Ledger{cfg: cfg, log: log}
	if cfg.Pool != nil {
		ctx, cancel := context.WithTimeout(context.Background(), migrateTimeout)
		defer cancel()
		if err := Migrate(ctx, cfg.Pool); err != nil {
			return nil, err
		}
		pg := &pgBackend{pool: cfg.Pool}
		l.store = pg
		if cfg.IsTeam == nil || cfg.DataDir == "" {
			return l, nil
		}
		f := &fileBackend{dir: cfg.DataDir, log: log}
		if err := f.load(); err != nil {
			return nil, err
		}
		s := &split{isTeam: cfg.IsTeam, files: f, team: pg, log: log}
		if err := s.movePersonal(ctx, cfg.Personal); err != nil {
			return nil, err
		}
		l.store = s
		return l, nil
	}
	f := &fileBackend{dir: cfg.DataDir, log: log}
	if err := f.load(); err != nil {
		return nil, err
	}
	if err := f.loadState(); err != nil {
		return nil, err
	}
	l.store = f
	return l, nil
}

// Record adds one turn's usage. Negative or non-finite numbers are a 400;
// an empty model is recorded as "unknown" and an empty timestamp as now.
func (l *Ledger) Record(r protocol.UsageRecord) error {
	if r.InputTokens < 0 || r.OutputTokens < 0 || r.Cost < 0 || math.IsNaN(r.Cost) || math.IsInf(r.Cost, 0) {
		return protocol.Errorf(protocol.Invalid, "usage must not be negative")
	}
	if r.Model == "" {
		r.Model = "unknown"
	}
	if _, err := time.Parse(time.RFC3339Nano, r.Timestamp); err != nil {
		r.Timestamp = l.now()
	}
	ctx, cancel := opContext()
	defer cancel()
	return l.store.append(ctx, line{Type: "usage", UsageRecord: r})
}

// Reset restarts the totals: a reset marker is appended, so the records
// stay stored and the reset survives restarts.
func (l *Ledger) Reset() (protocol.UsageReset, error) {
	at := l.now()
	ctx, cancel := opContext()
	defer cancel()
	if err := l.store.append(ctx, line{Type: "reset", UsageRecord: protocol.UsageRecord{Timestamp: at}}); err != nil {
		return protocol.UsageReset{}, err
	}
	return protocol.UsageReset{ResetAt: at}, nil
}

// Summary totals the records since the last reset, or, when since is set
// (RFC 3339), every record at or after that time whatever the resets.
func (l *Ledger) Summary(since string) (protocol.UsageSummary, error) {
	return l.SummaryFor(since, "")
}

// SummaryFor is Summary limited to one workspace's records ("" = all).
func (l *Ledger) SummaryFor(since, workspace string) (protocol.UsageSummary, error) {
	var from *time.Time
	if since != "" {
		t, err := time.Parse(time.RFC3339Nano, since)
		if err != nil {
			return protocol.UsageSummary{}, protocol.Errorf(protocol.Invalid, "since must be an RFC 3339 time")
		}
		from = &t
	}
	ctx, cancel := opContext()
	defer cancel()
	return l.store.summary(ctx, from, workspace)
}

// Model returns the current agent model (the default when none is set or
// the store cannot be read, which is logged).
func (l *Ledger) Model() string {
	ctx, cancel := opContext()
	defer cancel()
	m, err := l.store.model(ctx)
	if err != nil {
		l.log.Warn("ledger: reading the agent model failed; answering the default", "err", err)
	}
	if m == "" {
		return protocol.DefaultAgentModel
	}
	return m
}

// SetModel persists model as the current agent model.
func (l *Ledger) SetModel(model string) (protocol.AgentModel, error) {
	if model == "" {
		return protocol.AgentModel{}, protocol.Errorf(protocol.Invalid, "model is required")
	}
	if len(model) > maxModelLength {
		return protocol.AgentModel{}, protocol.Errorf(protocol.Invalid, "model is too long (max %d characters)", maxModelLength)
	}
	ctx, cancel := opContext()
	defer cancel()
	if err := l.store.setModel(ctx, model); err != nil {
		return protocol.AgentModel{}, err
	}
	return protocol.AgentModel{Model: model}, nil
}

func (l *Ledger) now() string { return l.cfg.Now().UTC().Format(time.RFC3339Nano) }

// opTimeout bounds one storage call: the ledger's API predates PostgreSQL
// and carries no context, so a stuck database must not hold a request
// forever.
const opTimeout = 15 * time.Second

// migrateTimeout bounds applying the migrations in Open.
const migrateTimeout = time.Minute

func opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), opTimeout)
}
