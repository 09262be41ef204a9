// Package grants is the persistent store of "always allow" approval grants:
// a user who approves a tool call with "always" is not asked again for the
// same tool on the same target (see gate.TargetKey), in the same workspace
// or, for a grant without a workspace, in every workspace.
//
// Grants live in <data dir>/approval-grants.json in the original Waggle
// format, so an existing file keeps working. Unlike the original, a grant
// that could not be written to disk is reported as an error and not kept,
// and a grant without a workspace applies everywhere instead of nowhere.
package grants

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/waggle-os/core/services/approval/gate"
)

// FileName is the grant file's name inside the data directory.
const FileName = "approval-grants.json"

// fileVersion is the only file format version this store reads and writes.
const fileVersion = 1

// isoMillis is JavaScript's Date.prototype.toISOString layout (always UTC).
const isoMillis = "2006-01-02T15:04:05.000Z"

// Config configures a Store.
type Config struct {
	// DataDir is the directory that holds approval-grants.json; it is created
	// on the first write if missing. Required.
	DataDir string
	// Now is the clock for grant times and expiry. Default: time.Now.
	Now func() time.Time
	// Logger receives a warning when an existing grant file cannot be used
	// and the store starts empty. Default: discard.
	Logger *slog.Logger
}

// Validate reports a missing DataDir.
func (c Config) Validate() error {
	if c.DataDir == "" {
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

// Store holds the grants of one data directory. It is safe for concurrent
// use within a process; another process writing the same file is picked up
// by Reload, and between reloads the last writer wins.
type Store struct {
	cfg  Config
	path string

	mu     sync.Mutex
	grants []Grant // insertion order, as in the file
}

// Open loads the grant file of cfg.DataDir. A missing file is an empty
// store. A file that is not valid JSON or has another version is left
// untouched and the store starts empty (it is replaced on the next write);
// a file that exists but cannot be read is an error.
func Open(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg.withDefaults(), path: filepath.Join(cfg.DataDir, FileName)}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Path is the grant file's path.
func (s *Store) Path() string { return s.path }

// Reload replaces the in-memory grants with the file's, with the same rules
// as Open. On a read error the grants in memory are kept.
func (s *Store) Reload() error {
	data, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		data, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("grants: read %s: %w", s.path, err)
	}
	var loaded []Grant
	if data != nil {
		var perr error
		loaded, perr = parseFile(data)
		if perr != nil {
			s.cfg.Logger.Warn("grants: ignoring unusable grant file; starting empty",
				"path", s.path, "err", perr)
		}
	}
	s.mu.Lock()
	s.grants = loaded
	s.mu.Unlock()
	return nil
}

// parseFile reads the file format, dropping entries that lack a required
// string field. It fails (and yields nothing) for invalid JSON or another
// version.
func parseFile(data []byte) ([]Grant, error) {
	var f struct {
		Version any               `json:"version"`
		Grants  []json.RawMessage `json:"grants"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if v, ok := f.Version.(float64); !ok || v != fileVersion {
		return nil, fmt.Errorf("unsupported version %v", f.Version)
	}
	var out []Grant
	for _, raw := range f.Grants {
		if g, ok := parseGrant(raw); ok {
			out = append(out, g)
		}
	}
	return out, nil
}

func parseGrant(raw json.RawMessage) (Grant, bool) {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return Grant{}, false
	}
	var g Grant
	for key, dst := range map[string]*string{
		"id": &g.ID, "toolName": &g.ToolName, "targetKey": &g.TargetKey,
		"description": &g.Description, "grantedAt": &g.GrantedAt,
	} {
		v, ok := m[key].(string)
		if !ok {
			return Grant{}, false
		}
		*dst = v
	}
	if v, ok := m["sourceWorkspaceId"].(string); ok {
		g.SourceWorkspaceID = &v
	}
	if v, ok := m["expiresAt"].(string); ok {
		g.ExpiresAt = &v
	}
	return g, true
}

// Grant records a standing approval for calls of tool on the target args
// name (gate.TargetKey), in workspace *source or, with source nil, in every
// workspace. It replaces a grant for the same tool, target and scope. The
// grant is on disk when Grant returns without error; on an error nothing
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
	key := gate.TargetKey(tool, args)
	g := Grant{
		ID:                id,
		ToolName:          tool,
		TargetKey:         key,
		SourceWorkspaceID: cloneString(source),
		Description:       gate.DescribeGrant(tool, key, source),
		GrantedAt:         now.UTC().Format(isoMillis),
	}
	if ttl > 0 {
		exp := now.Add(ttl).UTC().Format(isoMillis)
		g.ExpiresAt = &exp
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	next := make([]Grant, 0, len(s.grants)+1)
	for _, old := range s.grants {
		if !old.sameScope(tool, key, source) && !old.expired(now) {
			next = append(next, old)
		}
	}
	next = append(next, g)
	if err := s.commitLocked(next); err != nil {
		return Grant{}, fmt.Errorf("grants: grant %s on %s: %w", tool, key, err)
	}
	return g.clone(), nil
}

// Has finds a live grant covering a call of tool with args in workspace:
// same tool, same target key, and scoped to workspace or to every
// workspace. Expired grants are dropped on the way (from disk on the next
// write).
func (s *Store) Has(tool string, args map[string]any, workspace string) (Grant, bool) {
	key := gate.TargetKey(tool, args)
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneLocked(now)
	for _, g := range s.grants {
		if g.ToolName != tool || g.TargetKey != key {
			continue
		}
		if g.SourceWorkspaceID == nil || *g.SourceWorkspaceID == workspace {
			return g.clone(), true
		}
	}
	return Grant{}, false
}

// pruneLocked drops expired grants from memory. Persisting that is left to
// the next write: an expired grant on disk is dropped again when loaded, so
// nothing is gained by writing on a read path.
func (s *Store) pruneLocked(now time.Time) {
	s.grants = slices.DeleteFunc(s.grants, func(g Grant) bool { return g.expired(now) })
}

// List returns the live grants, newest first (by grantedAt, ties in file
// order).
func (s *Store) List() []Grant {
	now := s.cfg.Now()
	s.mu.Lock()
	s.pruneLocked(now)
	out := make([]Grant, len(s.grants))
	for i, g := range s.grants {
		out[i] = g.clone()
	}
	s.mu.Unlock()
	slices.SortStableFunc(out, func(a, b Grant) int { return strings.Compare(b.GrantedAt, a.GrantedAt) })
	return out
}

// Revoke removes the grant with id. It reports false (and no error) when
// there is none. On an error nothing changed unless the error wraps
// ErrNotDurable.
func (s *Store) Revoke(id string) (bool, error) {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.grants, func(g Grant) bool { return g.ID == id })
	if i < 0 {
		return false, nil
	}
	next := slices.DeleteFunc(slices.Clone(s.grants), func(g Grant) bool { return g.ID == id || g.expired(now) })
	if err := s.commitLocked(next); err != nil {
		return false, fmt.Errorf("grants: revoke %s: %w", id, err)
	}
	return true, nil
}

// Clear removes every grant. On an error nothing changed unless the error
// wraps ErrNotDurable.
func (s *Store) Clear() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.commitLocked(nil); err != nil {
		return fmt.Errorf("grants: clear: %w", err)
	}
	return nil
}

// ErrNotDurable is wrapped by a write error that came after the grant file
// was replaced: the change is in effect (and in the file) but the directory
// could not be synced, so it may not survive a power loss.
var ErrNotDurable = errors.New("grant file replaced but not synced")

// commitLocked writes next and makes it the store's state when the file now
// holds it. Called with s.mu held.
func (s *Store) commitLocked(next []Grant) error {
	err := s.save(next)
	if err == nil || errors.Is(err, ErrNotDurable) {
		s.grants = next
	}
	return err
}

// save writes grants as the whole file, atomically and durably: a crash
// leaves either the old file or the new one, and a returned nil means the
// new one survives power loss. Called with s.mu held.
func (s *Store) save(grants []Grant) error {
	if grants == nil {
		grants = []Grant{} // "grants": [] rather than null
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // like JSON.stringify: descriptions keep < > &
	enc.SetIndent("", "  ")
	if err := enc.Encode(struct {
		Version int     `json:"version"`
		Grants  []Grant `json:"grants"`
	}{fileVersion, grants}); err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	return writeFileAtomic(s.path, bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// writeFileAtomic replaces path with data via a temporary file in the same
// directory, fsyncing the file before the rename and the directory after.
func writeFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create dir: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("create temp file: %w", err)
	}
	renamed := false
	defer func() {
		if err != nil && !renamed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename to %s: %w", path, err)
	}
	renamed = true
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("%w: %w", ErrNotDurable, err)
	}
	return nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
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
