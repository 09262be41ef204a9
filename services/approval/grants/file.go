package grants

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// fileBackend is approval-grants.json, with its grants kept in memory
// between reloads.
type fileBackend struct {
	path string
	log  *slog.Logger

	mu     sync.Mutex
	grants []Grant // insertion order, as in the file
}

func (f *fileBackend) reload(context.Context) error {
	data, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		data, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("grants: read %s: %w", f.path, err)
	}
	var loaded []Grant
	if data != nil {
		var perr error
		loaded, perr = parseFile(data)
		if perr != nil {
			f.log.Warn("grants: ignoring unusable grant file; starting empty",
				"path", f.path, "err", perr)
		}
	}
	f.mu.Lock()
	f.grants = loaded
	f.mu.Unlock()
	return nil
}

func (f *fileBackend) put(_ context.Context, g Grant, now time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	next := make([]Grant, 0, len(f.grants)+1)
	for _, old := range f.grants {
		if !old.sameScope(g.ToolName, g.TargetKey, g.SourceWorkspaceID) && !old.expired(now) {
			next = append(next, old)
		}
	}
	return f.commitLocked(append(next, g))
}

// live drops expired grants from memory and returns copies of the rest.
// Persisting the drop is left to the next write: an expired grant on disk
// is dropped again when loaded, so nothing is gained by writing on a read
// path.
func (f *fileBackend) live(_ context.Context, now time.Time) ([]Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.grants = slices.DeleteFunc(f.grants, func(g Grant) bool { return g.expired(now) })
	out := make([]Grant, len(f.grants))
	for i, g := range f.grants {
		out[i] = g.clone()
	}
	return out, nil
}

func (f *fileBackend) revoke(_ context.Context, id string, now time.Time) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.ContainsFunc(f.grants, func(g Grant) bool { return g.ID == id }) {
		return false, nil
	}
	next := slices.DeleteFunc(slices.Clone(f.grants), func(g Grant) bool { return g.ID == id || g.expired(now) })
	if err := f.commitLocked(next); err != nil {
		return false, err
	}
	return true, nil
}

func (f *fileBackend) clear(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.commitLocked(nil)
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

// ErrNotDurable is wrapped by a write error that came after the grant file
// was replaced: the change is in effect (and in the file) but the directory
// could not be synced, so it may not survive a power loss.
var ErrNotDurable = errors.New("grant file replaced but not synced")

// commitLocked writes next and makes it the store's state when the file now
// holds it. Called with f.mu held.
func (f *fileBackend) commitLocked(next []Grant) error {
	err := f.save(next)
	if err == nil || errors.Is(err, ErrNotDurable) {
		f.grants = next
	}
	return err
}

// save writes grants as the whole file, atomically and durably: a crash
// leaves either the old file or the new one, and a returned nil means the
// new one survives power loss. Called with f.mu held.
func (f *fileBackend) save(grants []Grant) error {
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
	return writeFileAtomic(f.path, bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
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
