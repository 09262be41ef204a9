// Package grants is the persistent store of "always allow" approval grants:
// a user who approves a tool call with "always" is not asked again for the
// same tool on the same target (see rules.TargetKey), in the same workspace
// or, for a grant without a workspace, in every workspace.
//
// Grants live in <data dir>/approval-grants.json in the original Waggle
// format, so an existing file keeps working. Unlike the original, a grant
// that could not be written to disk is reported as an error and not kept,
// and a grant without a workspace applies everywhere instead of nowhere.
//
// With a PostgreSQL pool (Config.Pool) each grant is a row of
// approval_grants (a NULL source workspace is the every-workspace scope);
// a grant replaces its equals and drops expired rows in one transaction
// that locks the table against concurrent writers, so several approval
// services may share the grants. Migrations are embedded and applied by
// Open under their own goose version table (waggle_schema_grants).
package grants

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/approval/rules"
)

// FileName is the grant file's name inside the data directory.
const FileName = "approval-grants.json"

// fileVersion is the only file format version this store reads and writes.
const fileVersion = 1

// Config configures a Store.
type Config struct {
	// DataDir is the directory that holds approval-grants.json; it is created
	// on the first write if missing. Required.
	DataDir string
	// Now is the clock for grant times and expiry. Default: time.Now.
	Now func() time.Time
	// Logger receives a warning when an existing grant file cannot be used
	// and the store starts empty, or when PostgreSQL cannot be read on a
	// lookup. Default: discard.
	Logger *slog.Logger
	// Pool, when set, keeps the grants in PostgreSQL (team servers with
	// WAGGLE_POSTGRES_URL) instead of under DataDir. Default nil: the file.
	Pool *pgxpool.Pool
}

// Validate reports a missing DataDir.
func (c Config) Validate() error {
	if c.DataDir == "" && c.Pool == nil {
		return errors.New("grants: config: DataDir is required")
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

// Grant is one standing approval, in the file's JSON shape.
type Grant struct {
	ID        string `json:"id"`
	ToolName  string `json:"toolName"`
	TargetKey string `json:"targetKey"`
	// SourceWorkspaceID scopes the grant to one workspace; nil means every
	// workspace.
	SourceWorkspaceID *string `json:"sourceWorkspaceId"`
	Description       string  `json:"description"`
	// GrantedAt is an ISO-8601 UTC time with milliseconds.
	GrantedAt string `json:"grantedAt"`
	// ExpiresAt is when the grant stops applying (same format); nil: never.
	ExpiresAt *string `json:"expiresAt"`
}

// clone copies g so callers cannot reach the store's strings through the
// pointer fields.
func (g Grant) clone() Grant {
	g.SourceWorkspaceID = cloneString(g.SourceWorkspaceID)
	g.ExpiresAt = cloneString(g.ExpiresAt)
	return g
}

func cloneString(p *string) *string {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// expired reports whether the grant's expiry has passed. An expiry that does
// not parse never passes, as in the original (NaN compares false).
func (g Grant) expired(now time.Time) bool {
	if g.ExpiresAt == nil {
		return false
	}
	t, err := time.Parse(time.RFC3339Nano, *g.ExpiresAt)
	return err == nil && t.Before(now)
}

// sameScope reports whether two grants are about the same thing and would
// replace each other.
func (g Grant) sameScope(tool, key string, source *string) bool {
	return g.ToolName == tool && g.TargetKey == key && equalSource(g.SourceWorkspaceID, source)
}

func equalSource(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// backend keeps the grants: the file under DataDir, or PostgreSQL when
// Config.Pool is set. The rules (matching, ordering, ids, times) stay in
// Store, so both answer alike.
type backend interface {
	// reload refreshes any cached state from storage.
	reload(ctx context.Context) error
	// put stores g, dropping every grant of the same tool, target and scope
	// and every grant expired at now, as one change.
	put(ctx context.Context, g Grant, now time.Time) error
	// live returns the grants not expired at now, in insertion order.
	live(ctx context.Context, now time.Time) ([]Grant, error)
	// revoke deletes grant id (false when there is none), dropping grants
	// expired at now with it.
	revoke(ctx context.Context, id string, now time.Time) (bool, error)
	// clear deletes every grant.
	clear(ctx context.Context) error
}

// Store holds the grants of one data directory (or one PostgreSQL
// database). It is safe for concurrent use within a process; with the file,
// another process writing it is picked up by Reload, and between reloads
// the last writer wins; with PostgreSQL every call reads the database.
type Store struct {
	cfg   Config
	path  string // "" with PostgreSQL
	store backend
}

// Open loads the grant file of cfg.DataDir. A missing file is an empty
// store. A file that is not valid JSON or has another version is left
// untouched and the store starts empty (it is replaced on the next write);
// a file that exists but cannot be read is an error. With cfg.Pool it
// applies the grants' migrations instead.
func Open(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Store{cfg: cfg}
	if cfg.Pool != nil {
		ctx, cancel := context.WithTimeout(context.Background(), migrateTimeout)
		defer cancel()
		if err := Migrate(ctx, cfg.Pool); err != nil {
			return nil, err
		}
		s.store = &pgBackend{pool: cfg.Pool}
		return s, nil
	}
	s.path = filepath.Join(cfg.DataDir, FileName)
	s.store = &fileBackend{path: s.path, log: cfg.Logger}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Path is the grant file's path ("" when the grants are in PostgreSQL).
func (s *Store) Path() string { return s.path }

// Reload replaces the in-memory grants with the file's, with the same rules
// as Open. On a read error the grants in memory are kept. With PostgreSQL
// there is nothing cached and Reload does nothing.
func (s *Store) Reload() error {
	ctx, cancel := opContext()
	defer cancel()
	return s.store.reload(ctx)
}

// Grant records a standing approval for calls of tool on the target args
// name (rules.TargetKey), in workspace *source or, with source nil, in every
// workspace. It replaces a grant for the same tool, target and scope. The
// grant is stored when Grant returns without error; on an error nothing
// changed unless the error wraps ErrNotDurable.
func (s *Store) Grant(tool string, args map[string]any, source *string) (Grant, error) {
	return s.add(tool, args, source, 0)
}

// GrantFor is Grant with an expiry ttl from now (ttl <= 0: no expiry).
func (s *Store) GrantFor(tool string, args map[string]any, source *string, ttl time.Duration) (Grant, error) {
	return s.add(tool, args, source, ttl)
}

func (s *Store) add(tool string, args map[string]any, source *string, ttl time.Duration) (Grant, error) {
	id, err := newID()
	if err != nil {
		return Grant{}, fmt.Errorf("grants: grant %s: %w", tool, err)
	}
	now := s.cfg.Now()
	key := rules.TargetKey(tool, args)
	g := Grant{
		ID:                id,
		ToolName:          tool,
		TargetKey:         key,
		SourceWorkspaceID: cloneString(source),
		Description:       rules.DescribeGrant(tool, key, source),
		GrantedAt:         protocol.Timestamp(now),
	}
	if ttl > 0 {
		exp := protocol.Timestamp(now.Add(ttl))
		g.ExpiresAt = &exp
	}
	ctx, cancel := opContext()
	defer cancel()
	if err := s.store.put(ctx, g, now); err != nil {
		return Grant{}, fmt.Errorf("grants: grant %s on %s: %w", tool, key, err)
	}
	return g.clone(), nil
}

// Has finds a live grant covering a call of tool with args in workspace:
// same tool, same target key, and scoped to workspace or to every
// workspace. Expired grants are dropped on the way (from storage on the
// next write). A storage error is logged and answers false, so the user is
// asked rather than a call let through.
func (s *Store) Has(tool string, args map[string]any, workspace string) (Grant, bool) {
	key := rules.TargetKey(tool, args)
	for _, g := range s.live() {
		if g.ToolName != tool || g.TargetKey != key {
			continue
		}
		if g.SourceWorkspaceID == nil || *g.SourceWorkspaceID == workspace {
			return g, true
		}
	}
	return Grant{}, false
}

// live returns copies of the live grants in insertion order ([] after a
// storage error, which is logged).
func (s *Store) live() []Grant {
	ctx, cancel := opContext()
	defer cancel()
	gs, err := s.store.live(ctx, s.cfg.Now())
	if err != nil {
		s.cfg.Logger.Warn("grants: reading grants failed; treating as none", "err", err)
		return nil
	}
	return gs
}

// List returns the live grants, newest first (by grantedAt, ties in
// insertion order).
func (s *Store) List() []Grant {
	out := s.live()
	if out == nil {
		out = []Grant{}
	}
	slices.SortStableFunc(out, func(a, b Grant) int { return strings.Compare(b.GrantedAt, a.GrantedAt) })
	return out
}

// Revoke removes the grant with id. It reports false (and no error) when
// there is none. On an error nothing changed unless the error wraps
// ErrNotDurable.
func (s *Store) Revoke(id string) (bool, error) {
	ctx, cancel := opContext()
	defer cancel()
	ok, err := s.store.revoke(ctx, id, s.cfg.Now())
	if err != nil {
		return false, fmt.Errorf("grants: revoke %s: %w", id, err)
	}
	return ok, nil
}

// Clear removes every grant. On an error nothing changed unless the error
// wraps ErrNotDurable.
func (s *Store) Clear() error {
	ctx, cancel := opContext()
	defer cancel()
	if err := s.store.clear(ctx); err != nil {
		return fmt.Errorf("grants: clear: %w", err)
	}
	return nil
}

// opTimeout bounds one storage call: the store's API predates PostgreSQL
// and carries no context, so a stuck database must not hold a tool call
// forever.
const opTimeout = 15 * time.Second

// migrateTimeout bounds applying the migrations in Open.
const migrateTimeout = time.Minute

func opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), opTimeout)
}

// newID returns a random RFC 4122 version 4 UUID, the original's grant id
// format.
func newID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}
