package grants

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	// damaged holds the bytes of a damaged file not yet copied aside.
	damaged []byte
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
	var damaged []byte
	if data != nil {
		var perr error
		loaded, perr = parseFile(data)
		if perr != nil {
			loaded = f.damagedFile(data, perr)
			if len(bytes.TrimSpace(data)) > 0 {
				damaged = data
			}
		}
	}
	f.mu.Lock()
	f.grants = loaded
	f.damaged = damaged
	if f.damaged != nil {
		// Copy it aside now, so the operator finds it before any write;
		// should that fail (a full disk), commitLocked tries again first.
		_ = f.keepDamagedLocked()
	}
	f.mu.Unlock()
	return nil
}

// damagedFile handles a grant file that does not parse: the grants that
// can still be read (a file cut short keeps every complete grant before
// the cut) are served, and the damage is logged.
func (f *fileBackend) damagedFile(data []byte, perr error) []Grant {
	if salvaged, ok := salvage(data); ok {
		f.log.Error("grants: grant file is damaged (cut short?); serving the grants that could be read",
			"path", f.path, "kept", len(salvaged), "err", perr)
		return salvaged
	}
	f.log.Error("grants: ignoring unusable grant file; starting empty",
		"path", f.path, "err", perr)
	return nil
}

// keepDamagedLocked copies the damaged file's bytes aside
// (<file>.damaged-<hash>) before anything replaces the file, so a write
// never drops grants the damaged file still held. Called with f.mu held.
func (f *fileBackend) keepDamagedLocked() error {
	if f.damaged == nil {
		return nil
	}
	sum := sha256.Sum256(f.damaged)
	name := f.path + ".damaged-" + hex.EncodeToString(sum[:6])
	if _, err := os.Stat(name); err == nil {
		f.damaged = nil
		return nil
	}
	if err := writeFileAtomic(name, f.damaged); err != nil {
		f.log.Error("grants: cannot keep a copy of the damaged grant file", "path", name, "err", err)
		return fmt.Errorf("keep a copy of the damaged grant file: %w", err)
	}
	f.log.Warn("grants: the damaged grant file was copied aside; it is replaced on the next change", "copy", name)
	f.damaged = nil
	return nil
}

// salvage reads the complete grants of a file cut short: the version
// (written first) must be ours; grants are taken in order until the cut.
func salvage(data []byte) ([]Grant, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var version any
	var out []Grant
	sawGrants := false
read:
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch key, _ := tok.(string); key {
		case "version":
			if dec.Decode(&version) != nil {
				break read
			}
		case "grants":
			if v, ok := version.(float64); !ok || v != fileVersion {
				return nil, false
			}
			if t, err := dec.Token(); err != nil || t != json.Delim('[') {
				return nil, false
			}
			sawGrants = true
			for dec.More() {
				var raw json.RawMessage
				if dec.Decode(&raw) != nil {
					break read
				}
				if g, ok := parseGrant(raw); ok {
					out = append(out, g)
				}
			}
		default:
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				break read
			}
		}
	}
	return out, sawGrants
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
	if err := f.keepDamagedLocked(); err != nil {
		return err
	}
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
	if err := os.MkdirAll(dir, 0o700); err != nil {
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
