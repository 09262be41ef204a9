// Package vault is the session store's secret store: API keys and tokens
// saved from the desktop app, encrypted at rest with AES-256-GCM, answered
// over the bus (protocol.ListVault, SetVault, DeleteVault, RevealVault,
// ResolveModelKey, ResolveSearchKey).
//
// The key is 32 random bytes in <data-dir>/vault.key (0600, created on
// first use); the secrets are <data-dir>/vault.json, rewritten atomically,
// each value sealed with its own nonce and bound to its team and name (the
// GCM additional data), so a sealed value moved to another entry does not
// open. Nothing here logs a value, and a listing carries none.
package vault

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/private"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/jsonl"
)

// File names under the data dir.
const (
	KeyFile     = "vault.key"
	SecretsFile = "vault.json"
)

// DefaultType is the type of a secret saved without one.
const DefaultType = "api_key"

// maxEntries bounds one team's vault: a client cannot grow the file
// without limit.
const maxEntries = 512

// ErrNotFound is the answer for a name the vault does not hold, in the
// original's words.
var ErrNotFound = protocol.Errorf(protocol.NotFound, "Secret not found").WithCode("SECRET_NOT_FOUND")

// Config configures the vault.
type Config struct {
	// DataDir holds the key and the secrets. Required.
	DataDir string
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Changed, when set, is called after every change (the store
	// publishes protocol.SettingsChanges).
	Changed func()
}

// Vault is the file-backed vault. Safe for concurrent use.
type Vault struct {
	cfg Config

	mu   sync.Mutex
	aead cipher.AEAD // nil until the key is loaded
}

// file is vault.json: team ("" = local) → name → sealed entry.
type file struct {
	Version int                         `json:"version"`
	Teams   map[string]map[string]entry `json:"teams"`
}

type entry struct {
	Type      string    `json:"type"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Sealed is nonce‖ciphertext‖tag.
	Sealed []byte `json:"sealed"`
}

// New returns a vault over cfg.DataDir; nothing is read until first use.
func New(cfg Config) (*Vault, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("vault: DataDir is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Vault{cfg: cfg}, nil
}

// Register adds the vault's endpoints to svc.
func Register(svc *bus.Service, cfg Config, _ *slog.Logger) error {
	v, err := New(cfg)
	if err != nil {
		return err
	}
	return errors.Join(
		bus.Handle(svc, protocol.ListVault, func(_ context.Context, r protocol.VaultListRequest) (protocol.VaultListReply, error) {
			return v.List(r.Team)
		}),
		bus.Handle(svc, protocol.SetVault, func(_ context.Context, r protocol.VaultSetRequest) (protocol.VaultEntry, error) {
			return v.Set(r)
		}),
		bus.Handle(svc, protocol.DeleteVault, func(_ context.Context, r protocol.VaultNameRequest) (protocol.DeletedReply, error) {
			return v.Delete(r.Team, r.Name)
		}),
		bus.Handle(svc, protocol.RevealVault, func(_ context.Context, r protocol.VaultNameRequest) (protocol.VaultSecret, error) {
			return v.Reveal(r.Team, r.Name)
		}),
		bus.Handle(svc, protocol.ResolveModelKey, func(_ context.Context, r protocol.ModelKeyRequest) (protocol.ModelKeyReply, error) {
			return v.ModelKey(r.Model)
		}),
		bus.Handle(svc, protocol.ResolveSearchKey, func(_ context.Context, r protocol.SearchKeyRequest) (protocol.ModelKeyReply, error) {
			return v.SearchKey(r.Team, r.Provider)
		}),
	)
}

// List returns team's secrets by name, without values.
func (v *Vault) List(team string) (protocol.VaultListReply, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	f, err := v.read()
	if err != nil {
		return protocol.VaultListReply{}, err
	}
	out := protocol.VaultListReply{Secrets: []protocol.VaultEntry{}}
	for name, e := range f.Teams[team] {
		out.Secrets = append(out.Secrets, protocol.VaultEntry{Name: name, Type: e.Type, UpdatedAt: e.UpdatedAt})
	}
	slices.SortFunc(out.Secrets, func(a, b protocol.VaultEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Set seals and stores one secret.
func (v *Vault) Set(r protocol.VaultSetRequest) (protocol.VaultEntry, error) {
	if err := checkName(r.Name); err != nil {
		return protocol.VaultEntry{}, err
	}
	switch {
	case r.Value == "":
		return protocol.VaultEntry{}, protocol.Errorf(protocol.Invalid, "value is required")
	case len(r.Value) > protocol.MaxVaultValueLength:
		return protocol.VaultEntry{}, protocol.Errorf(protocol.TooLarge, "value is longer than %d bytes", protocol.MaxVaultValueLength)
	case len(r.Type) > 64:
		return protocol.VaultEntry{}, protocol.Errorf(protocol.Invalid, "type is too long")
	}
	typ := r.Type
	if typ == "" {
		typ = DefaultType
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	f, err := v.read()
	if err != nil {
		return protocol.VaultEntry{}, err
	}
	if err := v.loadKey(true); err != nil {
		return protocol.VaultEntry{}, err
	}
	nonce := make([]byte, v.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return protocol.VaultEntry{}, fmt.Errorf("vault: nonce: %w", err)
	}
	sealed := v.aead.Seal(nonce, nonce, []byte(r.Value), additional(r.Team, r.Name))
	ents := f.Teams[r.Team]
	if ents == nil {
		ents = map[string]entry{}
		f.Teams[r.Team] = ents
	}
	if _, ok := ents[r.Name]; !ok && len(ents) >= maxEntries {
		return protocol.VaultEntry{}, protocol.Errorf(protocol.Conflict, "the vault holds %d secrets already", maxEntries).WithCode("VAULT_FULL")
	}
	e := entry{Type: typ, UpdatedAt: v.cfg.Now().UTC(), Sealed: sealed}
	ents[r.Name] = e
	if err := v.write(f); err != nil {
		return protocol.VaultEntry{}, err
	}
	v.changed()
	return protocol.VaultEntry{Name: r.Name, Type: e.Type, UpdatedAt: e.UpdatedAt}, nil
}

// Delete removes one secret; Deleted is false when there was none (the
// caller answers 404).
func (v *Vault) Delete(team, name string) (protocol.DeletedReply, error) {
	if err := checkName(name); err != nil {
		return protocol.DeletedReply{}, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	f, err := v.read()
	if err != nil {
		return protocol.DeletedReply{}, err
	}
	if _, ok := f.Teams[team][name]; !ok {
		return protocol.DeletedReply{}, ErrNotFound
	}
	delete(f.Teams[team], name)
	if len(f.Teams[team]) == 0 {
		delete(f.Teams, team)
	}
	if err := v.write(f); err != nil {
		return protocol.DeletedReply{}, err
	}
	v.changed()
	return protocol.DeletedReply{Deleted: true}, nil
}

// Reveal opens one secret.
func (v *Vault) Reveal(team, name string) (protocol.VaultSecret, error) {
	if err := checkName(name); err != nil {
		return protocol.VaultSecret{}, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	value, typ, err := v.open(team, name)
	if err != nil {
		return protocol.VaultSecret{}, err
	}
	return protocol.VaultSecret{Name: name, Value: value, Type: typ}, nil
}

// ModelKey returns the local vault's key for model: the first entry of
// protocol.VaultModelKeyNames the vault holds.
func (v *Vault) ModelKey(model string) (protocol.ModelKeyReply, error) {
	return v.firstOf("", protocol.VaultModelKeyNames(model))
}

// SearchKey returns team's key for web search provider: the first entry
// of protocol.VaultSearchKeyNames the team's vault holds.
func (v *Vault) SearchKey(team, provider string) (protocol.ModelKeyReply, error) {
	return v.firstOf(team, protocol.VaultSearchKeyNames(provider))
}

// firstOf opens the first of names team's vault holds ("" for none).
func (v *Vault) firstOf(team string, names []string) (protocol.ModelKeyReply, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	f, err := v.read()
	if err != nil {
		return protocol.ModelKeyReply{}, err
	}
	for _, name := range names {
		if _, ok := f.Teams[team][name]; !ok {
			continue
		}
		value, _, err := v.open(team, name)
		if err != nil {
			return protocol.ModelKeyReply{}, err
		}
		return protocol.ModelKeyReply{Key: value, Entry: name}, nil
	}
	return protocol.ModelKeyReply{}, nil
}

// open decrypts one entry; v.mu is held.
func (v *Vault) open(team, name string) (value, typ string, err error) {
	f, err := v.read()
	if err != nil {
		return "", "", err
	}
	e, ok := f.Teams[team][name]
	if !ok {
		return "", "", ErrNotFound
	}
	if err := v.loadKey(false); err != nil {
		return "", "", err
	}
	n := v.aead.NonceSize()
	if len(e.Sealed) < n {
		return "", "", fmt.Errorf("vault: entry %q is damaged", name)
	}
	plain, err := v.aead.Open(nil, e.Sealed[:n], e.Sealed[n:], additional(team, name))
	if err != nil {
		// A different key file (a data dir restored without it) or a
		// tampered entry: say which entry, never the bytes.
		return "", "", fmt.Errorf("vault: entry %q does not open with %s: %w", name, KeyFile, err)
	}
	return string(plain), e.Type, nil
}

func (v *Vault) changed() {
	if v.cfg.Changed != nil {
		v.cfg.Changed()
	}
}

// additional binds a sealed value to its team and name.
func additional(team, name string) []byte { return []byte("waggle-vault\x00" + team + "\x00" + name) }

func checkName(name string) error {
	if name == "" {
		return protocol.Errorf(protocol.Invalid, "name is required")
	}
	if !protocol.ValidVaultName(name) {
		return protocol.Errorf(protocol.Invalid, "name must be 1-%d letters, digits or _-.:", protocol.MaxVaultNameLength)
	}
	return nil
}

// read loads vault.json (an empty vault when there is none); v.mu is held.
// The file is small and read on every call, so a restore or a second
// store process is seen at once.
func (v *Vault) read() (file, error) {
	path := filepath.Join(v.cfg.DataDir, SecretsFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return file{Version: 1, Teams: map[string]map[string]entry{}}, nil
	}
	if err != nil {
		return file{}, fmt.Errorf("vault: read %s: %w", path, err)
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return file{}, fmt.Errorf("vault: %s is damaged: %w", path, err)
	}
	if f.Teams == nil {
		f.Teams = map[string]map[string]entry{}
	}
	return f, nil
}

func (v *Vault) write(f file) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("vault: encode: %w", err)
	}
	if err := private.MkdirAll(v.cfg.DataDir); err != nil {
		return fmt.Errorf("vault: data dir: %w", err)
	}
	if err := jsonl.WriteFileAtomic(filepath.Join(v.cfg.DataDir, SecretsFile), b); err != nil {
		return fmt.Errorf("vault: write: %w", err)
	}
	return nil
}

// loadKey reads the key file, creating it when create is set and there is
// none; v.mu is held.
func (v *Vault) loadKey(create bool) error {
	if v.aead != nil {
		return nil
	}
	path := filepath.Join(v.cfg.DataDir, KeyFile)
	key, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && create {
		key, err = newKeyFile(v.cfg.DataDir, path)
	}
	if err != nil {
		return fmt.Errorf("vault: key %s: %w", path, err)
	}
	if len(key) != 32 {
		return fmt.Errorf("vault: key %s has %d bytes, want 32", path, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return fmt.Errorf("vault: key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return fmt.Errorf("vault: key: %w", err)
	}
	v.aead = aead
	return nil
}

// newKeyFile writes a fresh key with O_EXCL, so two processes racing on
// one data dir end with one key (the loser reads the winner's).
func newKeyFile(dir, path string) ([]byte, error) {
	if err := private.MkdirAll(dir); err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, private.FileMode)
	if errors.Is(err, fs.ErrExist) {
		return os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	if _, err := fh.Write(key); err != nil {
		fh.Close()
		return nil, err
	}
	if err := fh.Sync(); err != nil {
		fh.Close()
		return nil, err
	}
	return key, fh.Close()
}
