package vault

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
)

var ctx = context.Background()

func newVault(t *testing.T, dir string) *Vault {
	t.Helper()
	v, err := New(Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A saved key is nowhere on disk in clear, the key file is 0600, a
// listing has no value, and a second vault over the same dir (a restart)
// opens it.
func TestSecretsAreSealedAtRest(t *testing.T) {
	dir := t.TempDir()
	const secret = "sk-test-0123456789abcdef"
	if _, err := newVault(t, dir).Set(ctx, protocol.VaultSetRequest{Name: "openai", Value: secret}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{KeyFile, SecretsFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(secret)) {
			t.Fatalf("%s holds the secret in clear", name)
		}
		info, _ := os.Stat(filepath.Join(dir, name))
		if info.Mode().Perm() != 0o600 {
			t.Fatalf("%s mode %v, want 0600", name, info.Mode().Perm())
		}
	}
	v := newVault(t, dir)
	list, err := v.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(list)
	if bytes.Contains(b, []byte(secret)) || len(list.Secrets) != 1 || list.Secrets[0].Name != "openai" || list.Secrets[0].Type != DefaultType {
		t.Fatalf("listing %s", b)
	}
	got, err := v.Reveal(ctx, "", "openai")
	if err != nil || got.Value != secret {
		t.Fatalf("reveal %+v %v", got, err)
	}
	key, err := v.ModelKey(ctx, "", "gpt-4o")
	if err != nil || key.Key != secret || key.Entry != "openai" {
		t.Fatalf("model key %+v %v", key, err)
	}
}

// Teams do not see each other's secrets; a sealed value copied to another
// team's entry does not open (it is bound to its team and name).
func TestTeamsAreSeparateAndEntriesBound(t *testing.T) {
	dir := t.TempDir()
	v := newVault(t, dir)
	if _, err := v.Set(ctx, protocol.VaultSetRequest{Team: "red", Name: "openai", Value: "red-key"}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Reveal(ctx, "blue", "openai"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("blue reads red's secret: %v", err)
	}
	if list, _ := v.List(ctx, "blue"); len(list.Secrets) != 0 {
		t.Fatalf("blue lists %+v", list)
	}
	if key, _ := v.ModelKey(ctx, "", "gpt-4o"); key.Key != "" {
		t.Fatal("a team's key is used as the local model key")
	}
	// Copy red's sealed entry to blue by hand.
	path := filepath.Join(dir, SecretsFile)
	var f file
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	f.Teams["blue"] = map[string]entry{"openai": f.Teams["red"]["openai"]}
	b, _ = json.Marshal(f)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := newVault(t, dir).Reveal(ctx, "blue", "openai"); err == nil {
		t.Fatal("a moved sealed value opened")
	}
}

func TestDeleteAndValidation(t *testing.T) {
	v := newVault(t, t.TempDir())
	if _, err := v.Delete(ctx, "", "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete missing: %v", err)
	}
	for _, r := range []protocol.VaultSetRequest{{Name: "", Value: "x"}, {Name: "a/b", Value: "x"}, {Name: "ok", Value: ""}} {
		if _, err := v.Set(ctx, r); protocol.KindOf(err) != protocol.Invalid {
			t.Fatalf("set %+v: %v", r, err)
		}
	}
	if _, err := v.Set(ctx, protocol.VaultSetRequest{Name: "WAGGLE_LLM_API_KEY", Value: "k1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Set(ctx, protocol.VaultSetRequest{Name: "anthropic", Value: "k2"}); err != nil {
		t.Fatal(err)
	}
	// The server's own entry wins over a provider's.
	if key, _ := v.ModelKey(ctx, "", "claude-sonnet-4-6"); key.Key != "k1" {
		t.Fatalf("model key %+v", key)
	}
	if rep, err := v.Delete(ctx, "", "WAGGLE_LLM_API_KEY"); err != nil || !rep.Deleted {
		t.Fatalf("delete %v %v", rep, err)
	}
	if key, _ := v.ModelKey(ctx, "", "claude-sonnet-4-6"); key.Key != "k2" {
		t.Fatalf("model key %+v", key)
	}
}

// A search provider's key is its team's: acme's Brave key answers acme
// only, the desktop app's name wins over the provider's own, and a
// provider that takes no key has none.
func TestSearchKeyIsPerTeam(t *testing.T) {
	v := newVault(t, t.TempDir())
	for _, s := range []protocol.VaultSetRequest{
		{Team: "acme", Name: "brave", Value: "acme-plain"},
		{Team: "acme", Name: "BRAVE_API_KEY", Value: "acme-brave"},
		{Team: "", Name: "TAVILY_API_KEY", Value: "local-tavily"},
	} {
		if _, err := v.Set(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ team, provider, want string }{
		{"acme", "brave", "acme-brave"},
		{"zeta", "brave", ""},
		{"", "brave", ""},
		{"", "tavily", "local-tavily"},
		{"acme", "tavily", ""},
		{"", "searxng", ""},
	} {
		got, err := v.SearchKey(context.Background(), c.team, c.provider)
		if err != nil || got.Key != c.want {
			t.Errorf("SearchKey(%q, %q) = %+v, %v; want %q", c.team, c.provider, got, err, c.want)
		}
	}
}
