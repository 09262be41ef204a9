// Package settings is the one reader and writer of <data-dir>/config.json,
// the desktop app's settings (models, budget, permissions, onboarding)
// and the runner's model configuration. It answers protocol.GetSettings
// and protocol.PatchSettings for every other service.
//
// The file may also be edited by hand: it is stat'ed on each read and
// re-read when its size or modification time changed. A version that
// does not parse keeps the last good one in force and is reported with
// its line and column; a patch is refused until the file is fixed (it
// would otherwise overwrite the hand edit). Writes replace the file
// atomically (temp file, fsync, rename).
package settings

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/jsonpos"
	"github.com/waggle-os/core/libs/private"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/jsonl"
)

// FileName is the settings file under the data dir.
const FileName = "config.json"

// maxFileBytes bounds what is read: a settings file is a few KiB.
const maxFileBytes = 4 << 20

// maxModelLength bounds a model name.
const maxModelLength = 256

// Config configures the settings store.
type Config struct {
	// DataDir holds config.json. Required.
	DataDir string
	// Log reports a file that does not parse (once per version).
	Log *slog.Logger
	// Changed, when set, is called after a successful patch.
	Changed func()
}

// Store reads and writes config.json. Safe for concurrent use.
type Store struct {
	cfg  Config
	path string

	mu     sync.Mutex
	mod    time.Time
	size   int64
	exists bool
	loaded bool
	good   map[string]json.RawMessage // last good content
	bad    string                     // why the file on disk is not good, "" when it is
}

// New returns a Store; nothing is read until first use.
func New(cfg Config) (*Store, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("settings: DataDir is required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Store{cfg: cfg, path: filepath.Join(cfg.DataDir, FileName)}, nil
}

// Register adds s's endpoints to svc.
func Register(svc *bus.Service, s *Store) error {
	return errors.Join(
		bus.Handle(svc, protocol.GetSettings, func(context.Context, protocol.Empty) (protocol.SettingsDoc, error) {
			return s.Get()
		}),
		bus.Handle(svc, protocol.PatchSettings, func(_ context.Context, p protocol.SettingsPatch) (protocol.SettingsDoc, error) {
			return s.Patch(p)
		}),
	)
}

// Get returns the current settings.
func (s *Store) Get() (protocol.SettingsDoc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refresh(); err != nil {
		return protocol.SettingsDoc{}, err
	}
	return s.doc()
}

// Value is the current value of top-level field key (nil when the file
// has none): what Get would answer, without encoding the whole document.
// The store's own components (knowledge extraction, the embedding model)
// read their fields here, so the file has one reader and a change through
// Patch is seen by the next call. A file that cannot be stat'ed keeps the
// last good value.
func (s *Store) Value(key string) json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refresh(); err != nil {
		s.cfg.Log.Warn("settings file unreadable; keeping the last good one", "path", s.path, "err", err)
	}
	return s.good[key]
}

// Patch applies p and rewrites the file.
func (s *Store) Patch(p protocol.SettingsPatch) (protocol.SettingsDoc, error) {
	if err := Check(p); err != nil {
		return protocol.SettingsDoc{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refresh(); err != nil {
		return protocol.SettingsDoc{}, err
	}
	if s.bad != "" {
		return protocol.SettingsDoc{}, protocol.Errorf(protocol.Conflict,
			"%s; fix the file (or remove it) before changing settings here", s.bad).WithCode("SETTINGS_FILE_INVALID")
	}
	next := make(map[string]json.RawMessage, len(s.good)+len(p.Set))
	for k, v := range s.good {
		next[k] = v
	}
	for k, v := range p.Set {
		next[k] = v
	}
	for _, k := range p.Remove {
		delete(next, k)
	}
	b, err := json.MarshalIndent(next, "", "  ")
	if err != nil {
		return protocol.SettingsDoc{}, fmt.Errorf("settings: encode: %w", err)
	}
	b = append(b, '\n')
	if err := private.MkdirAll(s.cfg.DataDir); err != nil {
		return protocol.SettingsDoc{}, fmt.Errorf("settings: data dir: %w", err)
	}
	if err := jsonl.WriteFileAtomic(s.path, b); err != nil {
		return protocol.SettingsDoc{}, fmt.Errorf("settings: write %s: %w", s.path, err)
	}
	s.good, s.bad = next, ""
	if fi, err := os.Stat(s.path); err == nil {
		s.exists, s.mod, s.size = true, fi.ModTime(), fi.Size()
	}
	if s.cfg.Changed != nil {
		s.cfg.Changed()
	}
	return s.doc()
}

func (s *Store) doc() (protocol.SettingsDoc, error) {
	good := s.good
	if good == nil {
		good = map[string]json.RawMessage{}
	}
	b, err := json.Marshal(good)
	if err != nil {
		return protocol.SettingsDoc{}, fmt.Errorf("settings: encode: %w", err)
	}
	return protocol.SettingsDoc{Doc: b, Error: s.bad}, nil
}

// refresh re-reads the file when it changed; s.mu is held.
func (s *Store) refresh() error {
	fi, err := os.Stat(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.exists, s.loaded, s.good, s.bad = false, true, nil, ""
		return nil
	case err != nil:
		return fmt.Errorf("settings: %w", err)
	}
	if s.loaded && s.exists && fi.ModTime().Equal(s.mod) && fi.Size() == s.size {
		return nil
	}
	s.exists, s.loaded, s.mod, s.size = true, true, fi.ModTime(), fi.Size()
	if fi.Size() > maxFileBytes {
		s.bad = fmt.Sprintf("%s is larger than %d bytes", FileName, maxFileBytes)
		s.cfg.Log.Warn("settings file too large; keeping the last good one", "path", s.path, "size", fi.Size())
		return nil
	}
	b, err := os.ReadFile(s.path)
	if err != nil {
		return fmt.Errorf("settings: read %s: %w", s.path, err)
	}
	var m map[string]json.RawMessage
	switch err = json.Unmarshal(b, &m); {
	case err != nil:
		err = jsonpos.Annotate(b, err)
	case m == nil && len(bytes.TrimSpace(b)) > 0 && string(bytes.TrimSpace(b)) == "null":
		err = errors.New("the file is not a JSON object")
	case m == nil:
		m = map[string]json.RawMessage{}
	}
	if err != nil {
		s.bad = fmt.Sprintf("%s is invalid: %v", FileName, err)
		s.cfg.Log.Warn("settings file invalid; keeping the last good one", "path", s.path, "err", err)
		return nil
	}
	s.good, s.bad = m, ""
	return nil
}

// Fields are the settings a client may change through PatchSettings and
// the type each must have. Anything else in config.json (apiKeys, prices,
// compression, mcpServers, …) is the operator's, edited in the file.
var Fields = map[string]func(json.RawMessage) error{
	"defaultModel":        modelName,
	"fallbackModel":       modelName,
	"budgetModel":         modelName,
	"budgetThreshold":     fraction,
	"dailyBudget":         nonNegative,
	"budgetHardCap":       boolean,
	"onboardingCompleted": boolean,
	"autoSave":            boolean,
	"permissions":         permissions,
}

// Check validates a patch: known fields only, each of its type, nothing
// both set and removed.
func Check(p protocol.SettingsPatch) error {
	if len(p.Set) == 0 && len(p.Remove) == 0 {
		return protocol.Errorf(protocol.Invalid, "nothing to change")
	}
	for k, v := range p.Set {
		check, ok := Fields[k]
		if !ok {
			return protocol.Errorf(protocol.Invalid, "%s is not a setting that can be changed here", k)
		}
		if err := check(v); err != nil {
			return protocol.Errorf(protocol.Invalid, "%s %v", k, err)
		}
	}
	for _, k := range p.Remove {
		if _, ok := Fields[k]; !ok {
			return protocol.Errorf(protocol.Invalid, "%s is not a setting that can be changed here", k)
		}
		if _, ok := p.Set[k]; ok {
			return protocol.Errorf(protocol.Invalid, "%s is both set and removed", k)
		}
	}
	return nil
}

func modelName(v json.RawMessage) error {
	var s string
	if json.Unmarshal(v, &s) != nil || s == "" || len(s) > maxModelLength {
		return fmt.Errorf("must be a model name (1-%d characters)", maxModelLength)
	}
	return nil
}

func number(v json.RawMessage) (float64, bool) {
	var f float64
	if json.Unmarshal(v, &f) != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

func fraction(v json.RawMessage) error {
	if f, ok := number(v); !ok || f <= 0 || f > 1 {
		return errors.New("must be a number above 0 and at most 1")
	}
	return nil
}

func nonNegative(v json.RawMessage) error {
	if f, ok := number(v); !ok || f < 0 || f > 1e9 {
		return errors.New("must be a number of dollars, 0 or more")
	}
	return nil
}

func boolean(v json.RawMessage) error {
	var b bool
	if json.Unmarshal(v, &b) != nil {
		return errors.New("must be true or false")
	}
	return nil
}

// Permissions is config.json's "permissions": the app's autonomy default
// and its tool gates.
type Permissions struct {
	DefaultAutonomy    string              `json:"defaultAutonomy"`
	ExternalGates      []string            `json:"externalGates"`
	WorkspaceOverrides map[string][]string `json:"workspaceOverrides"`
}

// Autonomy levels of Permissions.DefaultAutonomy.
var autonomyLevels = []string{"normal", "trusted", "yolo"}

func permissions(v json.RawMessage) error {
	var p Permissions
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("must be {defaultAutonomy, externalGates, workspaceOverrides}: %v", err)
	}
	for _, l := range autonomyLevels {
		if p.DefaultAutonomy == l {
			return nil
		}
	}
	return errors.New("defaultAutonomy must be one of normal, trusted, yolo")
}

// CheckFile reports a config.json that does not parse, naming the file,
// line and column: the store refuses to start with one (later bad edits
// keep the last good version instead).
func CheckFile(dataDir string) error {
	path := filepath.Join(dataDir, FileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("settings: read %s: %w", path, err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("%s is invalid: %w", path, jsonpos.Annotate(b, err))
	}
	return nil
}
