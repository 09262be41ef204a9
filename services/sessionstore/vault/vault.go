// Package vault is the session store's secret store: API keys and tokens
// saved from the desktop app, encrypted at rest with AES-256-GCM, answered
// over the bus (protocol.ListVault, SetVault, DeleteVault, RevealVault,
// ResolveModelKey, ResolveSearchKey).
//
// The key is 32 random bytes in <data-dir>/vault.key (0600, created on
// first use). Each value is sealed with its own nonce and bound to its
// team and name (the GCM additional data), so a sealed value moved to
// another entry does not open. Where the sealed values live:
// <data-dir>/vault.json, rewritten atomically, for the local vault (team
// ""); on a team server (Config.Pool) every team's vault is in
// PostgreSQL, so every session store process shares it — and, with
// --store=postgres, the local one too. The key never goes to PostgreSQL:
// only its fingerprint, so a store whose vault.key differs from the one
// the table was sealed with refuses to seal or open rather than mixing
// keys. Nothing here logs a value, and a listing carries none.
package vault

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
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

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/private"
	"github.com/waggle-os/core/libs/protocol"
)

// File names under the data dir.
const (
	KeyFile     = "vault.key"
	SecretsFile = "vault.json"
)

// DefaultType is the type of a secret saved without one.
const DefaultType = "api_key"

// maxEntries bounds one team's vault: a client cannot grow it without
// limit.
const maxEntries = 512

// ErrNotFound is the answer for a name the vault does not hold, in the
// original's words.
var ErrNotFound = protocol.Errorf(protocol.NotFound, "Secret not found").WithCode("SECRET_NOT_FOUND")

// errFull is the answer when a team's vault holds maxEntries already.
var errFull = protocol.Errorf(protocol.Conflict, "the vault holds %d secrets already", maxEntries).WithCode("VAULT_FULL")

// Config configures the vault.
type Config struct {
	// DataDir holds the key (and the local secrets). Required.
	DataDir string
	// Pool, when set, keeps the teams' vaults in PostgreSQL (team
	// servers); the local vault (team "") stays in DataDir unless
	// AllInPool.
	Pool *pgxpool.Pool
	// AllInPool keeps the local vault in PostgreSQL too (--store=postgres:
	// several store processes, no shared data dir).
	AllInPool bool
	// WorkspaceTeam returns a workspace's team ("" for none): a turn's
	// model key comes from its workspace's team's vault. Nil: every
	// workspace is local.
	WorkspaceTeam func(ctx context.Context, workspace string) (string, error)
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Changed, when set, is called after every change (the store
	// publishes protocol.SettingsChanges).
	Changed func()
}

// entry is one sealed secret as a backend keeps it.
type entry struct {
	Type      string    `json:"type"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Sealed is nonce‖ciphertext‖tag.
	Sealed []byte `json:"sealed"`
}

// backend keeps sealed entries; it never sees a value in clear.
type backend interface {
	list(ctx context.Context, team string) (map[string]entry, error)
	get(ctx context.Context, team, name string) (entry, bool, error)
	// put stores e, refusing a new name past maxEntries with errFull.
	put(ctx context.Context, team, name string, e entry) error
	// remove reports whether there was an entry.
	remove(ctx context.Context, team, name string) (bool, error)
}

// Vault is the vault. Safe for concurrent use.
type Vault struct {
	cfg   Config
	files *fileBackend
	pg    *pgBackend // nil without Config.Pool

	mu   sync.Mutex
	aead cipher.AEAD // nil until the key is loaded
	// fp is the key's fingerprint (an HMAC of a fixed text under the
	// key), which PostgreSQL keeps to tell a store with another key.
	fp []byte
	// pgChecked says the key's fingerprint matched PostgreSQL's.
	pgChecked bool
}

// New returns a vault over cfg; nothing is read until first use.
func New(cfg Config) (*Vault, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("vault: DataDir is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	v := &Vault{cfg: cfg, files: &fileBackend{dir: cfg.DataDir}}
	if cfg.Pool != nil {
		v.pg = &pgBackend{pool: cfg.Pool}
	}
	return v, nil
}

// Register migrates v's table and moves an older version's team secrets
// out of vault.json (with a pool, ImportFile), then adds v's endpoints to
// svc.
func Register(ctx context.Context, svc *bus.Service, v *Vault, log *slog.Logger) error {
	if v.pg != nil {
		if err := Migrate(ctx, v.pg.pool); err != nil {
			return err
		}
		if _, err := v.ImportFile(ctx, log); err != nil {
			return err
		}
	}
	return errors.Join(
		bus.Handle(svc, protocol.ListVault, func(ctx context.Context, r protocol.VaultListRequest) (protocol.VaultListReply, error) {
			return v.List(ctx, r.Team)
		}),
		bus.Handle(svc, protocol.SetVault, func(ctx context.Context, r protocol.VaultSetRequest) (protocol.VaultEntry, error) {
			return v.Set(ctx, r)
		}),
		bus.Handle(svc, protocol.DeleteVault, func(ctx context.Context, r protocol.VaultNameRequest) (protocol.DeletedReply, error) {
			return v.Delete(ctx, r.Team, r.Name)
		}),
		bus.Handle(svc, protocol.RevealVault, func(ctx context.Context, r protocol.VaultNameRequest) (protocol.VaultSecret, error) {
			return v.Reveal(ctx, r.Team, r.Name)
		}),
		bus.Handle(svc, protocol.ResolveModelKey, func(ctx context.Context, r protocol.ModelKeyRequest) (protocol.ModelKeyReply, error) {
			return v.ModelKey(ctx, r.Workspace, r.Model)
		}),
		bus.Handle(svc, protocol.ResolveSearchKey, func(ctx context.Context, r protocol.SearchKeyRequest) (protocol.ModelKeyReply, error) {
			return v.SearchKey(ctx, r.Team, r.Provider)
		}),
	)
}

// backend picks where team's secrets live.
func (v *Vault) backend(team string) backend {
	if v.pg != nil && (team != "" || v.cfg.AllInPool) {
		return v.pg
	}
	return v.files
}

// List returns team's secrets by name, without values.
func (v *Vault) List(ctx context.Context, team string) (protocol.VaultListReply, error) {
	ents, err := v.backend(team).list(ctx, team)
	if err != nil {
		return protocol.VaultListReply{}, err
	}
	out := protocol.VaultListReply{Secrets: []protocol.VaultEntry{}}
	for name, e := range ents {
		out.Secrets = append(out.Secrets, protocol.VaultEntry{Name: name, Type: e.Type, UpdatedAt: e.UpdatedAt})
	}
	slices.SortFunc(out.Secrets, func(a, b protocol.VaultEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Set seals and stores one secret.
func (v *Vault) Set(ctx context.Context, r protocol.VaultSetRequest) (protocol.VaultEntry, error) {
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
	b := v.backend(r.Team)
	aead, err := v.cipher(ctx, b, true)
	if err != nil {
		return protocol.VaultEntry{}, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return protocol.VaultEntry{}, fmt.Errorf("vault: nonce: %w", err)
	}
	e := entry{Type: typ, UpdatedAt: v.cfg.Now().UTC(), Sealed: aead.Seal(nonce, nonce, []byte(r.Value), additional(r.Team, r.Name))}
	if err := b.put(ctx, r.Team, r.Name, e); err != nil {
		return protocol.VaultEntry{}, err
	}
	v.changed()
	return protocol.VaultEntry{Name: r.Name, Type: e.Type, UpdatedAt: e.UpdatedAt}, nil
}

// Delete removes one secret (ErrNotFound when there was none).
func (v *Vault) Delete(ctx context.Context, team, name string) (protocol.DeletedReply, error) {
	if err := checkName(name); err != nil {
		return protocol.DeletedReply{}, err
	}
	found, err := v.backend(team).remove(ctx, team, name)
	if err != nil {
		return protocol.DeletedReply{}, err
	}
	if !found {
		return protocol.DeletedReply{}, ErrNotFound
	}
	v.changed()
	return protocol.DeletedReply{Deleted: true}, nil
}

// DeleteTeam removes every secret of team: a deleted team's keys must not
// pass to a team created later under the same id.
func (v *Vault) DeleteTeam(ctx context.Context, team string) error {
	if team == "" {
		return errors.New("vault: DeleteTeam needs a team")
	}
	var err error
	if v.pg != nil {
		_, err = v.pg.pool.Exec(ctx, `DELETE FROM vault_secrets WHERE team = $1`, team)
		if err != nil {
			err = fmt.Errorf("vault: delete team %s: %w", team, err)
		}
	}
	// An older version's file may still hold entries of the team (ones
	// that did not open and so were not moved).
	b := v.files
	b.mu.Lock()
	defer b.mu.Unlock()
	f, ferr := b.read()
	if ferr == nil && len(f.Teams[team]) > 0 {
		delete(f.Teams, team)
		ferr = b.write(f)
	}
	if err = errors.Join(err, ferr); err != nil {
		return err
	}
	v.changed()
	return nil
}

// Reveal opens one secret.
func (v *Vault) Reveal(ctx context.Context, team, name string) (protocol.VaultSecret, error) {
	if err := checkName(name); err != nil {
		return protocol.VaultSecret{}, err
	}
	value, typ, err := v.open(ctx, team, name)
	if err != nil {
		return protocol.VaultSecret{}, err
	}
	return protocol.VaultSecret{Name: name, Value: value, Type: typ}, nil
}

// ModelKey returns the model server's key for a turn in workspace: the
// first entry of protocol.VaultModelKeyNames(model) in the vault of the
// workspace's team (the local vault for a workspace of no team). A team's
// turn never gets another team's key, nor the local one.
func (v *Vault) ModelKey(ctx context.Context, workspace, model string) (protocol.ModelKeyReply, error) {
	team := ""
	if workspace != "" && v.cfg.WorkspaceTeam != nil {
		t, err := v.cfg.WorkspaceTeam(ctx, workspace)
		if protocol.KindOf(err) == protocol.NotFound {
			// A workspace not created yet (the first chat makes it): it
			// has no team.
			t, err = "", nil
		}
		if err != nil {
			return protocol.ModelKeyReply{}, fmt.Errorf("vault: team of workspace %s: %w", workspace, err)
		}
		team = t
	}
	return v.firstOf(ctx, team, protocol.VaultModelKeyNames(model))
}

// SearchKey returns team's key for web search provider: the first entry
// of protocol.VaultSearchKeyNames the team's vault holds.
func (v *Vault) SearchKey(ctx context.Context, team, provider string) (protocol.ModelKeyReply, error) {
	return v.firstOf(ctx, team, protocol.VaultSearchKeyNames(provider))
}

// firstOf opens the first of names team's vault holds ("" for none).
func (v *Vault) firstOf(ctx context.Context, team string, names []string) (protocol.ModelKeyReply, error) {
	ents, err := v.backend(team).list(ctx, team)
	if err != nil {
		return protocol.ModelKeyReply{}, err
	}
	for _, name := range names {
		if _, ok := ents[name]; !ok {
			continue
		}
		value, _, err := v.open(ctx, team, name)
		if err != nil {
			return protocol.ModelKeyReply{}, err
		}
		return protocol.ModelKeyReply{Key: value, Entry: name, Team: team}, nil
	}
	return protocol.ModelKeyReply{Team: team}, nil
}

// open decrypts one entry.
func (v *Vault) open(ctx context.Context, team, name string) (value, typ string, err error) {
	b := v.backend(team)
	e, ok, err := b.get(ctx, team, name)
	if err != nil {
		return "", "", err
	}
	if !ok {
		return "", "", ErrNotFound
	}
	aead, err := v.cipher(ctx, b, false)
	if err != nil {
		return "", "", err
	}
	n := aead.NonceSize()
	if len(e.Sealed) < n {
		return "", "", fmt.Errorf("vault: entry %q is damaged", name)
	}
	plain, err := aead.Open(nil, e.Sealed[:n], e.Sealed[n:], additional(team, name))
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

// cipher returns the AEAD of the key file, creating the file when create
// is set and there is none. For the PostgreSQL backend the key must be
// the one the table's entries were sealed with (its fingerprint).
func (v *Vault) cipher(ctx context.Context, b backend, create bool) (cipher.AEAD, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.aead == nil {
		path := filepath.Join(v.cfg.DataDir, KeyFile)
		key, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) && create {
			key, err = newKeyFile(v.cfg.DataDir, path)
		}
		if err != nil {
			return nil, fmt.Errorf("vault: key %s: %w", path, err)
		}
		if len(key) != 32 {
			return nil, fmt.Errorf("vault: key %s has %d bytes, want 32", path, len(key))
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("vault: key: %w", err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("vault: key: %w", err)
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte("waggle-vault-key-check"))
		v.aead, v.fp = aead, mac.Sum(nil)
	}
	if pg, ok := b.(*pgBackend); ok && !v.pgChecked {
		if err := pg.checkKey(ctx, v.fp); err != nil {
			return nil, err
		}
		v.pgChecked = true
	}
	return v.aead, nil
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
