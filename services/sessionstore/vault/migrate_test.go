package vault

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
)

// oldFile reads vault.json as the previous version wrote it: team → name.
func oldFile(t *testing.T, dir string) map[string]map[string]entry {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, SecretsFile))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var f file
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return f.Teams
}

// TestTeamSecretsMoveFromTheOldFileIntoPostgres: a team server of the
// previous version kept every team's vault in <data-dir>/vault.json. The
// next start moves the teams' entries into PostgreSQL, still sealed, and
// takes them out of the file (the local vault's stay, as --store=jsonl
// keeps it there); a name saved again in PostgreSQL since keeps its newer
// value; an entry that does not open stays in the file; starting again
// moves nothing and changes nothing; with AllInPool the local vault moves
// too and the file goes.
func TestTeamSecretsMoveFromTheOldFileIntoPostgres(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	clock := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { clock = clock.Add(time.Minute); return clock }

	// The previous version: no pool, every team's vault in vault.json.
	old, err := New(Config{DataDir: dir, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	const acmeKey, boltKey, localKey, staleKey = "sk-acme-old-0123456789", "sk-bolt-0123456789", "sk-local-0123456789", "sk-acme-stale-0123456789"
	for _, s := range []protocol.VaultSetRequest{
		{Team: "acme", Name: "OPENAI_API_KEY", Value: acmeKey},
		{Team: "acme", Name: "anthropic", Value: staleKey},
		{Team: "bolt", Name: "OPENAI_API_KEY", Value: boltKey, Type: "token"},
		{Team: "bolt", Name: "tampered", Value: "x-0123456789"},
		{Name: "OPENAI_API_KEY", Value: localKey},
	} {
		if _, err := old.Set(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// An entry whose seal was copied from another name does not open.
	teams := oldFile(t, dir)
	forged := teams["bolt"]["tampered"]
	forged.Sealed = teams["bolt"]["OPENAI_API_KEY"].Sealed
	teams["bolt"]["tampered"] = forged
	data, _ := json.Marshal(file{Version: 1, Teams: teams})
	if err := os.WriteFile(filepath.Join(dir, SecretsFile), data, 0o600); err != nil {
		t.Fatal(err)
	}

	// After the upgrade, before this store's first start, another store
	// (same key) saved acme's anthropic key again.
	const newKey = "sk-acme-new-0123456789"
	other := t.TempDir()
	key, _ := os.ReadFile(filepath.Join(dir, KeyFile))
	if err := os.WriteFile(filepath.Join(other, KeyFile), key, 0o600); err != nil {
		t.Fatal(err)
	}
	o, _ := New(Config{DataDir: other, Pool: pool, Now: now})
	if _, err := o.Set(ctx, protocol.VaultSetRequest{Team: "acme", Name: "anthropic", Value: newKey}); err != nil {
		t.Fatal(err)
	}

	v, _ := New(Config{DataDir: dir, Pool: pool, Now: now})
	moved, err := v.ImportFile(ctx, log)
	if err != nil || moved != 3 {
		t.Fatalf("import: moved %d, %v; want 3 (acme's two, bolt's good one)", moved, err)
	}
	for _, c := range []struct{ team, name, want string }{
		{"acme", "OPENAI_API_KEY", acmeKey}, {"acme", "anthropic", newKey}, {"bolt", "OPENAI_API_KEY", boltKey}, {"", "OPENAI_API_KEY", localKey},
	} {
		// Read by a store that never saw the file: the entry is in PostgreSQL.
		r := o
		if c.team == "" {
			r = v
		}
		got, err := r.Reveal(ctx, c.team, c.name)
		if err != nil || got.Value != c.want {
			t.Errorf("%s/%s after the move = %q %v, want %q", c.team, c.name, got.Value, err, c.want)
		}
	}
	if got, _ := o.Reveal(ctx, "bolt", "OPENAI_API_KEY"); got.Type != "token" {
		t.Errorf("type after the move = %q", got.Type)
	}
	if k, err := o.ModelKey(ctx, "", "gpt-4o"); err != nil || k.Key != "" {
		t.Errorf("the local key reached PostgreSQL: %+v %v", k, err)
	}
	left := oldFile(t, dir)
	if len(left) != 2 || len(left[""]) != 1 || len(left["bolt"]) != 1 || left["bolt"]["tampered"].Sealed == nil {
		t.Fatalf("vault.json after the move = %v, want the local entry and the forged one only", left)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, SecretsFile))
	for _, secret := range []string{acmeKey, boltKey, localKey, staleKey, newKey} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Fatalf("a value in clear in vault.json")
		}
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM vault_secrets WHERE team = 'bolt' AND name = 'tampered'`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("the forged entry reached PostgreSQL: %d %v", rows, err)
	}

	// Again: nothing to move, nothing changed.
	if moved, err := v.ImportFile(ctx, log); err != nil || moved != 0 {
		t.Fatalf("second import: moved %d, %v", moved, err)
	}
	if got, _ := o.Reveal(ctx, "acme", "anthropic"); got.Value != newKey {
		t.Errorf("after the second import acme's anthropic = %q", got.Value)
	}

	// --store=postgres: the local vault moves too, and (the forged entry
	// deleted by hand) nothing is left for the file, which goes.
	if _, err := old.Delete(ctx, "bolt", "tampered"); err != nil {
		t.Fatal(err)
	}
	all, _ := New(Config{DataDir: dir, Pool: pool, AllInPool: true, Now: now})
	if moved, err := all.ImportFile(ctx, log); err != nil || moved != 1 {
		t.Fatalf("import of the local vault: moved %d, %v", moved, err)
	}
	if got, err := all.Reveal(ctx, "", "OPENAI_API_KEY"); err != nil || got.Value != localKey {
		t.Errorf("local key in PostgreSQL = %q %v", got.Value, err)
	}
	if _, err := os.Stat(filepath.Join(dir, SecretsFile)); !os.IsNotExist(err) {
		t.Errorf("vault.json is still there: %v", err)
	}
}

// TestImportRefusesAnotherKey: a data dir whose vault.key is not the one
// PostgreSQL's entries are sealed with moves nothing and fails, leaving
// vault.json as it was.
func TestImportRefusesAnotherKey(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	first, _ := New(Config{DataDir: t.TempDir(), Pool: pool})
	if _, err := first.Set(ctx, protocol.VaultSetRequest{Team: "acme", Name: "a", Value: "first-0123456789"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	old, _ := New(Config{DataDir: dir})
	if _, err := old.Set(ctx, protocol.VaultSetRequest{Team: "acme", Name: "b", Value: "second-0123456789"}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, SecretsFile))
	v, _ := New(Config{DataDir: dir, Pool: pool})
	if _, err := v.ImportFile(ctx, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("import with another key succeeded")
	}
	after, _ := os.ReadFile(filepath.Join(dir, SecretsFile))
	if !bytes.Equal(before, after) {
		t.Error("vault.json changed")
	}
}
