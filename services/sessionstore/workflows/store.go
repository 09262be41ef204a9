package workflows

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/pgmigrate"
	"github.com/waggle-os/core/libs/protocol"
)

// Limits of an observe request: a turn's tools are names the runner
// checked, so anything beyond these is not a real turn.
const (
	maxTools    = 200
	maxToolName = 128
	// FileName is the state file under a workspace's directory.
	FileName        = "workflows.json"
	opTimeout       = 10 * time.Second
	migrateTimeout  = time.Minute
	schemaTable     = "waggle_schema_workflows"
	migrationLockID = int64(0x5761676757666c77) // "WaggWflw"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Config configures the workflow store.
type Config struct {
	// DataDir is the data directory (files). Required without Pool.
	DataDir string
	// Pool, when set, keeps the state in PostgreSQL instead of files.
	Pool *pgxpool.Pool
	// IsTeam, with Pool and DataDir, splits the state by the store's rule
	// (team workspaces in PostgreSQL, personal ones in files): it reports
	// whether a workspace lives in PostgreSQL. Nil: all in Pool.
	IsTeam func(ctx context.Context, workspace string) (bool, error)
	// Personal, with IsTeam, reports whether a workspace whose state an
	// older version kept in PostgreSQL is a personal workspace that
	// exists: Open moves such state into its file.
	Personal func(ctx context.Context, workspace string) (bool, error)
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// backend reads and updates one workspace's state.
type backend interface {
	read(ctx context.Context, workspace string) (state, error)
	// update runs fn on the workspace's state and stores the result, with
	// no other update of that workspace in between.
	update(ctx context.Context, workspace string, fn func(*state)) error
}

// Patterns holds the captured workflow patterns of every workspace, with
// the recent tool sequences they are detected from.
type Patterns struct {
	cfg Config
	b   backend
}

// Open returns a store; with a pool it applies the package's migrations.
func Open(cfg Config) (*Patterns, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Pool != nil {
		ctx, cancel := context.WithTimeout(context.Background(), migrateTimeout)
		defer cancel()
		if _, err := pgmigrate.Up(ctx, cfg.Pool, pgmigrate.Set{FS: pgmigrate.Sub(migrations, "migrations"), Table: schemaTable, LockID: migrationLockID}); err != nil {
			return nil, fmt.Errorf("workflows: migrate: %w", err)
		}
		pg := &pgBackend{pool: cfg.Pool}
		if cfg.IsTeam == nil || cfg.DataDir == "" {
			return &Patterns{cfg: cfg, b: pg}, nil
		}
		r := &router{isTeam: cfg.IsTeam, files: &fileBackend{dir: cfg.DataDir}, team: pg}
		if cfg.Personal != nil {
			if err := r.movePersonal(ctx, cfg.Personal); err != nil {
				return nil, err
			}
		}
		return &Patterns{cfg: cfg, b: r}, nil
	}
	if cfg.DataDir == "" {
		return nil, errors.New("workflows: DataDir is required")
	}
	return &Patterns{cfg: cfg, b: &fileBackend{dir: cfg.DataDir}}, nil
}

// Register opens the store and adds its endpoints to svc.
func Register(svc *bus.Service, cfg Config, _ *slog.Logger) error {
	s, err := Open(cfg)
	if err != nil {
		return err
	}
	return errors.Join(
		bus.Handle(svc, protocol.ObserveWorkflow, s.Observe),
		bus.Handle(svc, protocol.ListWorkflows,
			func(ctx context.Context, r protocol.WorkspaceRequest) (protocol.WorkflowList, error) {
				return s.List(ctx, r.Workspace)
			}),
	)
}

// Observe records a turn's tool sequence and returns the pattern it
// completes when it is new to the workspace.
func (s *Patterns) Observe(ctx context.Context, r protocol.WorkflowObserveRequest) (protocol.WorkflowObserveReply, error) {
	if !protocol.ValidID(r.Workspace) || (r.Session != "" && !protocol.ValidID(r.Session)) {
		return protocol.WorkflowObserveReply{}, protocol.Errorf(protocol.Invalid, "invalid workspace or session")
	}
	if len(r.Tools) > maxTools {
		return protocol.WorkflowObserveReply{}, protocol.Errorf(protocol.Invalid, "too many tools")
	}
	for _, t := range r.Tools {
		if t == "" || len(t) > maxToolName {
			return protocol.WorkflowObserveReply{}, protocol.Errorf(protocol.Invalid, "invalid tool name")
		}
	}
	if len(r.Tools) < MinSteps {
		return protocol.WorkflowObserveReply{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	var rep protocol.WorkflowObserveReply
	err := s.b.update(ctx, r.Workspace, func(st *state) {
		if p, fresh := st.observe(r.Session, r.Tools, s.cfg.Now()); fresh {
			rep.Pattern = &p
		}
	})
	return rep, err
}

// List returns a workspace's captured patterns, oldest first.
func (s *Patterns) List(ctx context.Context, workspace string) (protocol.WorkflowList, error) {
	if !protocol.ValidID(workspace) {
		return protocol.WorkflowList{}, protocol.Errorf(protocol.Invalid, "invalid workspace")
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	st, err := s.b.read(ctx, workspace)
	if err != nil {
		return protocol.WorkflowList{}, err
	}
	out := protocol.WorkflowList{Workflows: st.Patterns}
	if out.Workflows == nil {
		out.Workflows = []protocol.CapturedWorkflow{}
	}
	return out, nil
}

// fileBackend keeps `<dir>/workspaces/<ws>/workflows.json`. Updates are
// serialised in this process; the session store's single-writer lease
// makes this process the only writer.
type fileBackend struct {
	dir string
	mu  sync.Mutex
}

func (f *fileBackend) path(workspace string) string {
	return filepath.Join(f.dir, "workspaces", workspace, FileName)
}

func (f *fileBackend) read(_ context.Context, workspace string) (state, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.load(workspace)
}

func (f *fileBackend) update(_ context.Context, workspace string, fn func(*state)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := f.load(workspace)
	if err != nil {
		return err
	}
	fn(&st)
	return f.save(workspace, st)
}

func (f *fileBackend) load(workspace string) (state, error) {
	var st state
	b, err := os.ReadFile(f.path(workspace))
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("workflows: read %s: %w", workspace, err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		// A damaged file costs the recorded sequences, not the turn.
		return state{}, nil
	}
	return st, nil
}

// save writes through a temporary file, synced and renamed, so a crash
// leaves the old or the new file, never half of one.
func (f *fileBackend) save(workspace string, st state) error {
	path := f.path(workspace)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("workflows: save %s: %w", workspace, err)
	}
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("workflows: encode %s: %w", workspace, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".workflows-*")
	if err != nil {
		return fmt.Errorf("workflows: save %s: %w", workspace, err)
	}
	_, werr := tmp.Write(b)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("workflows: save %s: %w", workspace, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("workflows: save %s: %w", workspace, err)
	}
	return nil
}

// pgBackend keeps one workflow_state row per workspace; an update locks
// the row in a transaction, so store processes sharing the database never
// lose each other's sequences.
type pgBackend struct {
	pool *pgxpool.Pool
}

func (p *pgBackend) read(ctx context.Context, workspace string) (state, error) {
	var st state
	var doc []byte
	err := p.pool.QueryRow(ctx, `SELECT doc FROM workflow_state WHERE workspace = $1`, workspace).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("workflows: read %s: %w", workspace, err)
	}
	if err := json.Unmarshal(doc, &st); err != nil {
		return state{}, fmt.Errorf("workflows: decode %s: %w", workspace, err)
	}
	return st, nil
}

func (p *pgBackend) update(ctx context.Context, workspace string, fn func(*state)) error {
	return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		// Make the row exist, then lock it: concurrent first updates of a
		// workspace queue on the same row.
		if _, err := tx.Exec(ctx, `INSERT INTO workflow_state (workspace, doc) VALUES ($1, '{}') ON CONFLICT DO NOTHING`, workspace); err != nil {
			return fmt.Errorf("workflows: update %s: %w", workspace, err)
		}
		var doc []byte
		if err := tx.QueryRow(ctx, `SELECT doc FROM workflow_state WHERE workspace = $1 FOR UPDATE`, workspace).Scan(&doc); err != nil {
			return fmt.Errorf("workflows: update %s: %w", workspace, err)
		}
		var st state
		if err := json.Unmarshal(doc, &st); err != nil {
			return fmt.Errorf("workflows: decode %s: %w", workspace, err)
		}
		fn(&st)
		out, err := json.Marshal(st)
		if err != nil {
			return fmt.Errorf("workflows: encode %s: %w", workspace, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE workflow_state SET doc = $2 WHERE workspace = $1`, workspace, out); err != nil {
			return fmt.Errorf("workflows: update %s: %w", workspace, err)
		}
		return nil
	})
}

// router keeps a team workspace's state in PostgreSQL and a personal
// one's in its file, as the session store places the workspaces.
type router struct {
	isTeam      func(ctx context.Context, workspace string) (bool, error)
	files, team backend
}

func (r *router) pick(ctx context.Context, workspace string) (backend, error) {
	team, err := r.isTeam(ctx, workspace)
	if err != nil {
		return nil, fmt.Errorf("workflows: where %s lives: %w", workspace, err)
	}
	if team {
		return r.team, nil
	}
	return r.files, nil
}

func (r *router) read(ctx context.Context, workspace string) (state, error) {
	b, err := r.pick(ctx, workspace)
	if err != nil {
		return state{}, err
	}
	return b.read(ctx, workspace)
}

func (r *router) update(ctx context.Context, workspace string, fn func(*state)) error {
	b, err := r.pick(ctx, workspace)
	if err != nil {
		return err
	}
	return b.update(ctx, workspace, fn)
}

// movePersonal moves the state an older version kept in PostgreSQL for
// personal workspaces (it kept every workspace's there) into their files,
// which it replaces (PostgreSQL held the newer state), then deletes the
// rows. A crash in between writes the same file again at the next start.
func (r *router) movePersonal(ctx context.Context, personal func(context.Context, string) (bool, error)) error {
	pg := r.team.(*pgBackend)
	rows, err := pg.pool.Query(ctx, `SELECT workspace FROM workflow_state ORDER BY workspace`)
	if err != nil {
		return fmt.Errorf("workflows: list: %w", err)
	}
	wss, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("workflows: list: %w", err)
	}
	files := r.files.(*fileBackend)
	for _, ws := range wss {
		if !protocol.ValidID(ws) {
			continue
		}
		ok, err := personal(ctx, ws)
		if err != nil {
			return fmt.Errorf("workflows: where %s lives: %w", ws, err)
		}
		if !ok {
			continue
		}
		st, err := pg.read(ctx, ws)
		if err != nil {
			return err
		}
		files.mu.Lock()
		err = files.save(ws, st)
		files.mu.Unlock()
		if err != nil {
			return err
		}
		if _, err := pg.pool.Exec(ctx, `DELETE FROM workflow_state WHERE workspace = $1`, ws); err != nil {
			return fmt.Errorf("workflows: move %s: %w", ws, err)
		}
	}
	return nil
}
