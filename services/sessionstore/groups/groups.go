// Package groups stores agent groups (<data-dir>/agent-groups.json) for
// the session store: a JSON array pretty-printed with two spaces, as the
// original wrote it, rewritten atomically by one writer at a time. Every
// validation rule for a group lives here (Parse), so the gateway only
// forwards the client's body.
//
// With a PostgreSQL pool (Config.Pool) each group is a row of agent_groups
// holding the group's JSON, in creation order; updates lock the row in a
// transaction. Migrations are embedded and applied by New under their own
// goose version table (waggle_schema_groups).
//
// With both and Config.Split (a team server that keeps personal
// workspaces in the data dir), a group is kept by its owner (split.go): a
// team's group in PostgreSQL, a group of no team (the local owner's, or
// the operator's) in the file.
package groups

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

// maxOrder bounds executionOrder so it always fits an int.
const maxOrder = 1 << 30

// FileName is the groups file under the data directory.
const FileName = "agent-groups.json"

// Config configures the group store.
type Config struct {
	// DataDir is the data directory. Required.
	DataDir string
	// Now is the clock (createdAt). Default time.Now.
	Now func() time.Time
	// NewID makes group ids. Default protocol.NewUUID.
	NewID func() string
	// Pool, when set, keeps the groups in PostgreSQL (team servers with
	// WAGGLE_POSTGRES_URL) instead of under DataDir. Default nil: the file.
	Pool *pgxpool.Pool
	// Split, with Pool and DataDir, keeps only the teams' groups in
	// PostgreSQL and a group of no team in the file; New moves such groups
	// an older version kept in PostgreSQL into the file. Default false:
	// all in Pool.
	Split bool
}

// Validate checks c and fills defaults.
func (c *Config) Validate() error {
	if c.DataDir == "" && c.Pool == nil {
		return errors.New("groups: DataDir is required")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.NewID == nil {
		c.NewID = protocol.NewUUID
	}
	return nil
}

// Register adds the group endpoints to svc.
func Register(svc *bus.Service, cfg Config, log *slog.Logger) error {
	s, err := New(cfg, log)
	if err != nil {
		return err
	}
	return errors.Join(
		bus.Handle(svc, protocol.ListGroups,
			func(context.Context, protocol.Empty) (protocol.AgentGroupList, error) {
				gs, err := s.List()
				return protocol.AgentGroupList{Groups: gs}, err
			}),
		bus.Handle(svc, protocol.GetGroup,
			func(_ context.Context, r protocol.AgentGroupRef) (protocol.AgentGroup, error) { return s.Get(r.ID) }),
		bus.Handle(svc, protocol.CreateGroup,
			func(_ context.Context, w protocol.AgentGroupWrite) (protocol.AgentGroup, error) {
				return s.Create(w.Fields)
			}),
		bus.Handle(svc, protocol.UpdateGroup,
			func(_ context.Context, w protocol.AgentGroupWrite) (protocol.AgentGroup, error) {
				return s.Update(w.ID, w.Fields)
			}),
		bus.Handle(svc, protocol.DeleteGroup,
			func(_ context.Context, r protocol.AgentGroupRef) (protocol.Deleted, error) {
				return protocol.Deleted{Deleted: true}, s.Delete(r.ID)
			}),
	)
}

// ErrNotFound is the 404 of every operation on an unknown group id.
var ErrNotFound = &protocol.Error{Kind: protocol.NotFound, Message: "Group not found"}

// backend keeps the groups: the file under DataDir, or PostgreSQL when
// Config.Pool is set. Validation stays in Roster, so both answer alike.
type backend interface {
	// list returns every group in creation order (never nil).
	list(ctx context.Context) ([]protocol.AgentGroup, error)
	// insert stores a new, validated group.
	insert(ctx context.Context, g protocol.AgentGroup) error
	// update replaces group id with fn's result, atomically with respect to
	// other writers (ErrNotFound for an unknown id).
	update(ctx context.Context, id string, fn func(protocol.AgentGroup) (protocol.AgentGroup, error)) (protocol.AgentGroup, error)
	// remove deletes group id (ErrNotFound for an unknown id).
	remove(ctx context.Context, id string) error
}

// Roster is the roster of agent groups (each a named line-up of agents
// with a strategy) of one data directory (or one PostgreSQL
// database). It is safe for concurrent use; writes are serialised.
type Roster struct {
	cfg   Config
	log   *slog.Logger
	store backend

	// stamps are the createdAt of groups: two made within one millisecond
	// would tie otherwise, and the listing (a sort on createdAt across the
	// file and PostgreSQL) could not tell which came first.
	stamps protocol.Stamps
}

// New returns a store for cfg.DataDir (the file is created on first write)
// or, with cfg.Pool, for PostgreSQL after applying the groups migrations.
func New(cfg Config, log *slog.Logger) (*Roster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Roster{cfg: cfg, log: log}
	if cfg.Pool != nil {
		ctx, cancel := context.WithTimeout(context.Background(), migrateTimeout)
		defer cancel()
		if err := Migrate(ctx, cfg.Pool); err != nil {
			return nil, err
		}
		pg := &pgBackend{pool: cfg.Pool}
		s.store = pg
		if !cfg.Split || cfg.DataDir == "" {
			return s, nil
		}
		sp := &split{files: &fileBackend{cfg: cfg, log: log, path: filepath.Join(cfg.DataDir, FileName)}, team: pg, log: log}
		if err := sp.moveTeamless(ctx); err != nil {
			return nil, err
		}
		s.store = sp
		return s, nil
	}
	s.store = &fileBackend{cfg: cfg, log: log, path: filepath.Join(cfg.DataDir, FileName)}
	return s, nil
}

// List returns every group in creation order ([] when there is none).
func (s *Roster) List() ([]protocol.AgentGroup, error) {
	ctx, cancel := opContext()
	defer cancel()
	return s.store.list(ctx)
}

// Get returns one group.
func (s *Roster) Get(id string) (protocol.AgentGroup, error) {
	gs, err := s.List()
	if err != nil {
		return protocol.AgentGroup{}, err
	}
	if i := index(gs, id); i >= 0 {
		return gs[i], nil
	}
	return protocol.AgentGroup{}, ErrNotFound
}

// Create validates fields (a client's JSON body) and stores a new group.
func (s *Roster) Create(fields map[string]json.RawMessage) (protocol.AgentGroup, error) {
	g, err := Parse(protocol.AgentGroup{}, fields, true)
	if err != nil {
		return g, err
	}
	g.ID = s.cfg.NewID()
	g.CreatedAt = s.stamps.Next(s.cfg.Now())
	ctx, cancel := opContext()
	defer cancel()
	return g, s.store.insert(ctx, g)
}

// Update applies the fields present in fields to group id.
func (s *Roster) Update(id string, fields map[string]json.RawMessage) (protocol.AgentGroup, error) {
	ctx, cancel := opContext()
	defer cancel()
	return s.store.update(ctx, id, func(g protocol.AgentGroup) (protocol.AgentGroup, error) {
		return Parse(g, fields, false)
	})
}

// Delete removes group id.
func (s *Roster) Delete(id string) error {
	ctx, cancel := opContext()
	defer cancel()
	return s.store.remove(ctx, id)
}

// opTimeout bounds one storage call: the store's API predates PostgreSQL
// and carries no context, so a stuck database must not hold a request
// forever.
const opTimeout = 15 * time.Second

// migrateTimeout bounds applying the migrations in New.
const migrateTimeout = time.Minute

func opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), opTimeout)
}

func index(gs []protocol.AgentGroup, id string) int {
	for i, g := range gs {
		if g.ID == id {
			return i
		}
	}
	return -1
}

// Parse applies a client's JSON fields to g and validates the result. With
// create, name and strategy are required and members default to []; for an
// update only the fields present change; teamId is read on create only.
// Unknown fields (and id, createdAt) are ignored. Every failure is a 400
// with a message naming the field.
func Parse(g protocol.AgentGroup, fields map[string]json.RawMessage, create bool) (protocol.AgentGroup, error) {
	if raw, ok := present(fields, "name"); ok {
		var name string
		if json.Unmarshal(raw, &name) != nil {
			return g, bad("name must be a string")
		}
		g.Name = name
	} else if !create && isNull(fields, "name") {
		return g, bad("name is required")
	}
	if strings.TrimSpace(g.Name) == "" {
		return g, bad("name is required")
	}
	if raw, ok := fields["description"]; ok {
		if isNullRaw(raw) {
			g.Description = nil
		} else {
			var d string
			if json.Unmarshal(raw, &d) != nil {
				return g, bad("description must be a string")
			}
			g.Description = &d
		}
	}
	if raw, ok := present(fields, "strategy"); ok {
		var st string
		if json.Unmarshal(raw, &st) != nil {
			return g, bad("strategy must be one of: parallel, sequential, coordinator")
		}
		g.Strategy = st
	} else if create || isNull(fields, "strategy") {
		return g, bad("strategy is required (parallel, sequential or coordinator)")
	}
	switch g.Strategy {
	case protocol.StrategyParallel, protocol.StrategySequential, protocol.StrategyCoordinator:
	default:
		return g, bad("strategy must be one of: parallel, sequential, coordinator")
	}
	if raw, ok := present(fields, "members"); ok {
		ms, err := parseMembers(raw)
		if err != nil {
			return g, err
		}
		g.Members = ms
	} else if isNull(fields, "members") {
		return g, bad("members must be an array")
	}
	if g.Members == nil {
		g.Members = []protocol.AgentGroupMember{}
	}
	if raw, ok := present(fields, "teamId"); ok && create {
		// A group's team is set once: moving it would need admin in both
		// teams, and nobody needs that yet. The gateway has checked that
		// the creator administers the team.
		var team string
		if json.Unmarshal(raw, &team) != nil {
			return g, bad("teamId must be a string")
		}
		g.TeamID = team
	}
	return g, nil
}

// parseMembers reads members: each an object with a non-empty string
// agentId, an optional string roleInGroup (default "worker") and an
// optional integer executionOrder (default: its position in the array).
func parseMembers(raw json.RawMessage) ([]protocol.AgentGroupMember, error) {
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, bad("members must be an array")
	}
	out := make([]protocol.AgentGroupMember, 0, len(items))
	for i, item := range items {
		var f map[string]json.RawMessage
		if !bytes.HasPrefix(bytes.TrimSpace(item), []byte("{")) || json.Unmarshal(item, &f) != nil {
			return nil, bad("members[%d] must be an object", i)
		}
		m := protocol.AgentGroupMember{RoleInGroup: protocol.RoleWorker, ExecutionOrder: i}
		v, ok := present(f, "agentId")
		if !ok || json.Unmarshal(v, &m.AgentID) != nil || strings.TrimSpace(m.AgentID) == "" {
			return nil, bad("members[%d].agentId must be a non-empty string", i)
		}
		if v, ok := present(f, "roleInGroup"); ok {
			if json.Unmarshal(v, &m.RoleInGroup) != nil {
				return nil, bad("members[%d].roleInGroup must be a string", i)
			}
			if strings.TrimSpace(m.RoleInGroup) == "" {
				m.RoleInGroup = protocol.RoleWorker
			}
		}
		if v, ok := present(f, "executionOrder"); ok {
			var n float64
			if json.Unmarshal(v, &n) != nil || n != math.Trunc(n) || math.Abs(n) > maxOrder {
				return nil, bad("members[%d].executionOrder must be an integer", i)
			}
			m.ExecutionOrder = int(n)
		}
		out = append(out, m)
	}
	return out, nil
}

// present returns a field that is there and not null.
func present(f map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	raw, ok := f[key]
	if !ok || isNullRaw(raw) {
		return nil, false
	}
	return raw, true
}

func isNull(f map[string]json.RawMessage, key string) bool {
	raw, ok := f[key]
	return ok && isNullRaw(raw)
}

func isNullRaw(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func bad(format string, args ...any) error { return protocol.Errorf(protocol.Invalid, format, args...) }
