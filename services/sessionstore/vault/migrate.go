package vault

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"github.com/jackc/pgx/v5"
)

// ImportFile moves into PostgreSQL the sealed entries a previous version
// kept in vault.json for the teams (and the local vault's too when it
// lives in PostgreSQL, AllInPool): before this version a team server kept
// every team's vault in its data dir. It runs at start, before the vault
// answers, and again is harmless:
//
//   - An entry moves as it is sealed (the same key, bound to the same team
//     and name), once its seal is checked: one that does not open with
//     vault.key (a damaged file, another key) stays in vault.json and is
//     reported by team and name. The key must be the one PostgreSQL's
//     entries are sealed with (its fingerprint), else nothing moves and
//     the start fails: a key mismatch would leave every team's vault
//     unusable.
//   - A name PostgreSQL holds already keeps the newer of the two (a secret
//     saved again after the upgrade wins over the old file's).
//   - The moved entries are then taken out of vault.json (rewritten
//     atomically, or removed when nothing is left in it), so no secret is
//     kept twice. A crash before that repeats the move, which changes
//     nothing, at the next start.
//
// It returns how many entries moved.
func (v *Vault) ImportFile(ctx context.Context, log *slog.Logger) (int, error) {
	if v.pg == nil {
		return 0, nil
	}
	if log == nil {
		log = slog.Default()
	}
	b := v.files
	b.mu.Lock()
	defer b.mu.Unlock()
	f, err := b.read()
	if err != nil {
		return 0, err
	}
	var teams []string
	for team, ents := range f.Teams {
		if len(ents) > 0 && (team != "" || v.cfg.AllInPool) {
			teams = append(teams, team)
		}
	}
	if len(teams) == 0 {
		return 0, nil
	}
	slices.Sort(teams)
	keyPath := filepath.Join(v.cfg.DataDir, KeyFile)
	if _, err := os.Stat(keyPath); errors.Is(err, fs.ErrNotExist) {
		log.Error("vault.json holds team secrets but there is no vault.key to open them: they stay in vault.json",
			"path", filepath.Join(v.cfg.DataDir, SecretsFile), "teams", len(teams))
		return 0, nil
	}
	aead, err := v.cipher(ctx, v.pg, false)
	if err != nil {
		return 0, fmt.Errorf("vault: move %s into PostgreSQL: %w", SecretsFile, err)
	}
	type move struct {
		team, name string
		e          entry
	}
	var moves []move
	for _, team := range teams {
		for name, e := range f.Teams[team] {
			n := aead.NonceSize()
			if len(e.Sealed) < n {
				log.Warn("vault.json entry is damaged: it stays in vault.json", "team", team, "name", name)
				continue
			}
			if _, err := aead.Open(nil, e.Sealed[:n], e.Sealed[n:], additional(team, name)); err != nil {
				log.Warn("vault.json entry does not open with vault.key: it stays in vault.json", "team", team, "name", name)
				continue
			}
			moves = append(moves, move{team, name, e})
		}
	}
	if len(moves) == 0 {
		return 0, nil
	}
	err = pgx.BeginFunc(ctx, v.pg.pool, func(tx pgx.Tx) error {
		for _, m := range moves {
			_, err := tx.Exec(ctx, `INSERT INTO vault_secrets (team, name, type, updated_at, sealed) VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (team, name) DO UPDATE SET type = EXCLUDED.type, updated_at = EXCLUDED.updated_at, sealed = EXCLUDED.sealed
				WHERE vault_secrets.updated_at < EXCLUDED.updated_at`,
				m.team, m.name, m.e.Type, m.e.UpdatedAt, m.e.Sealed)
			if err != nil {
				return fmt.Errorf("vault: move %s of team %q: %w", m.name, m.team, err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, m := range moves {
		delete(f.Teams[m.team], m.name)
		if len(f.Teams[m.team]) == 0 {
			delete(f.Teams, m.team)
		}
	}
	path := filepath.Join(v.cfg.DataDir, SecretsFile)
	if len(f.Teams) == 0 {
		if err := os.Remove(path); err != nil {
			return 0, fmt.Errorf("vault: remove %s after the move: %w", path, err)
		}
		if err := syncDir(v.cfg.DataDir); err != nil {
			return 0, fmt.Errorf("vault: remove %s after the move: %w", path, err)
		}
	} else if err := b.write(f); err != nil {
		return 0, err
	}
	log.Info("vault: moved team secrets from vault.json into PostgreSQL", "entries", len(moves), "teams", len(teams))
	v.changed()
	return len(moves), nil
}

// syncDir makes a removal in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
