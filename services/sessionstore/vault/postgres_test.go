package vault

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
)

// TestPostgresVaultIsPerTeamAndSharedByStores: on a team server the
// teams' vaults are in PostgreSQL, so a second store process (another
// data dir, the same vault.key) reads what the first saved; a turn's key
// comes from its workspace's team only; the table holds no value in
// clear; and a store given another vault.key refuses instead of sealing
// with it.
func TestPostgresVaultIsPerTeamAndSharedByStores(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	teams := map[string]string{"acme-ops": "acme", "bolt-lab": "bolt"}
	wsTeam := func(_ context.Context, ws string) (string, error) { return teams[ws], nil }
	open := func(dir string) *Vault {
		v, err := New(Config{DataDir: dir, Pool: pool, WorkspaceTeam: wsTeam})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	dirA := t.TempDir()
	a := open(dirA)
	const acmeKey, localKey = "sk-acme-0123456789", "sk-local-0123456789"
	if _, err := a.Set(ctx, protocol.VaultSetRequest{Team: "acme", Name: "openai", Value: acmeKey}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Set(ctx, protocol.VaultSetRequest{Name: "openai", Value: localKey}); err != nil {
		t.Fatal(err)
	}

	// A second store: its own data dir, the same key file.
	dirB := t.TempDir()
	key, err := os.ReadFile(filepath.Join(dirA, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dirB, KeyFile), key, 0o600); err != nil {
		t.Fatal(err)
	}
	b := open(dirB)
	if got, err := b.Reveal(ctx, "acme", "openai"); err != nil || got.Value != acmeKey {
		t.Fatalf("the second store reveals acme's key: %+v %v", got, err)
	}
	// The local vault stays in the store's data dir (--store=jsonl).
	if _, err := b.Reveal(ctx, "", "openai"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the local vault of another data dir: %v", err)
	}

	for _, c := range []struct{ ws, want, team string }{
		{"acme-ops", acmeKey, "acme"}, {"bolt-lab", "", "bolt"}, {"personal", localKey, ""},
	} {
		rep, err := a.ModelKey(ctx, c.ws, "gpt-4o")
		if err != nil || rep.Key != c.want || rep.Team != c.team {
			t.Errorf("model key of a turn in %s: %+v %v, want %q from %q", c.ws, rep, err, c.want, c.team)
		}
	}
	if list, err := b.List(ctx, "bolt"); err != nil || len(list.Secrets) != 0 {
		t.Fatalf("bolt's vault: %+v %v", list, err)
	}

	var sealed []byte
	if err := pool.QueryRow(ctx, `SELECT sealed FROM vault_secrets WHERE team = 'acme' AND name = 'openai'`).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte(acmeKey)) {
		t.Fatal("PostgreSQL holds acme's key in clear")
	}

	// A store with a key of its own would seal what the others cannot
	// open: it refuses.
	c := open(t.TempDir())
	if _, err := c.Set(ctx, protocol.VaultSetRequest{Team: "bolt", Name: "openai", Value: "sk-bolt"}); !errors.Is(err, errOtherKey) {
		t.Fatalf("a store with another key saves: %v", err)
	}
	if list, _ := a.List(ctx, "bolt"); len(list.Secrets) != 0 {
		t.Fatalf("bolt's vault after the refused save: %+v", list)
	}
	if rep, err := a.Delete(ctx, "acme", "openai"); err != nil || !rep.Deleted {
		t.Fatalf("delete: %+v %v", rep, err)
	}
	if _, err := b.Reveal(ctx, "acme", "openai"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}
