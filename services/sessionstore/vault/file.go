package vault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/waggle-os/core/libs/private"
	"github.com/waggle-os/core/services/sessionstore/jsonl"
)

// fileBackend keeps sealed entries in <dir>/vault.json: team ("" = local)
// → name → entry, rewritten atomically on every change.
type fileBackend struct {
	dir string
	mu  sync.Mutex
}

type file struct {
	Version int                         `json:"version"`
	Teams   map[string]map[string]entry `json:"teams"`
}

func (b *fileBackend) list(_ context.Context, team string) (map[string]entry, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, err := b.read()
	if err != nil {
		return nil, err
	}
	return f.Teams[team], nil
}

func (b *fileBackend) get(_ context.Context, team, name string) (entry, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, err := b.read()
	if err != nil {
		return entry{}, false, err
	}
	e, ok := f.Teams[team][name]
	return e, ok, nil
}

func (b *fileBackend) put(_ context.Context, team, name string, e entry) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, err := b.read()
	if err != nil {
		return err
	}
	ents := f.Teams[team]
	if ents == nil {
		ents = map[string]entry{}
		f.Teams[team] = ents
	}
	if _, ok := ents[name]; !ok && len(ents) >= maxEntries {
		return errFull
	}
	ents[name] = e
	return b.write(f)
}

func (b *fileBackend) remove(_ context.Context, team, name string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, err := b.read()
	if err != nil {
		return false, err
	}
	if _, ok := f.Teams[team][name]; !ok {
		return false, nil
	}
	delete(f.Teams[team], name)
	if len(f.Teams[team]) == 0 {
		delete(f.Teams, team)
	}
	return true, b.write(f)
}

// read loads vault.json (an empty vault when there is none); b.mu is
// held. The file is small and read on every call, so a restore is seen at
// once.
func (b *fileBackend) read() (file, error) {
	path := filepath.Join(b.dir, SecretsFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return file{Version: 1, Teams: map[string]map[string]entry{}}, nil
	}
	if err != nil {
		return file{}, fmt.Errorf("vault: read %s: %w", path, err)
	}
	var f file
	if err := json.Unmarshal(data, &f); err != nil {
		return file{}, fmt.Errorf("vault: %s is damaged: %w", path, err)
	}
	if f.Teams == nil {
		f.Teams = map[string]map[string]entry{}
	}
	return f, nil
}

func (b *fileBackend) write(f file) error {
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("vault: encode: %w", err)
	}
	if err := private.MkdirAll(b.dir); err != nil {
		return fmt.Errorf("vault: data dir: %w", err)
	}
	if err := jsonl.WriteFileAtomic(filepath.Join(b.dir, SecretsFile), data); err != nil {
		return fmt.Errorf("vault: write: %w", err)
	}
	return nil
}
