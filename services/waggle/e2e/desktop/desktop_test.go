// Package desktop holds black-box tests of the desktop app's routes: the
// vault, settings and models, against a real waggle app and the scripted
// model server (libs/llmtest), over real HTTP.
package desktop

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

func newLLM(t *testing.T, opts ...llmtest.Option) *llmtest.Server {
	t.Helper()
	s := llmtest.New(opts...)
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func chat(message string) map[string]any {
	return map[string]any{"message": message, "workspace": "desk", "session": "s1"}
}

// turn runs one chat turn to its end and returns its events' names.
func turn(t *testing.T, srv *waggletest.Server, message string) []string {
	t.Helper()
	st := srv.Chat(chat(message))
	defer st.Close()
	evs := st.All(t)
	names := waggletest.Names(evs)
	if len(names) == 0 || names[len(names)-1] != "done" {
		t.Fatalf("turn %q ended with %v", message, names)
	}
	return names
}

func lastChat(t *testing.T, llm *llmtest.Server) *llmtest.Request {
	t.Helper()
	reqs := llm.ChatRequests()
	if len(reqs) == 0 {
		t.Fatal("the model got no chat request")
	}
	return reqs[len(reqs)-1]
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// filesHolding lists the files under dir whose bytes contain secret.
func filesHolding(t *testing.T, dir, secret string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err == nil && bytes.Contains(b, []byte(secret)) {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestVaultKeyReachesTheModel: a desktop user with no key configured saves
// one from the app; the next turn sends it to the model server as the
// bearer token (no restart), it is in no file of the data dir in clear,
// and no listing shows it.
func TestVaultKeyReachesTheModel(t *testing.T) {
	const secret = "sk-desktop-0123456789-secret"
	llm := newLLM(t, llmtest.WithDefault(llmtest.Reply("hello")))
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()))

	turn(t, srv, "first")
	if got := lastChat(t, llm).Header.Get("Authorization"); got != "" {
		t.Fatalf("before a key was saved the model got Authorization %q", got)
	}

	if code := srv.JSON("POST", "/api/vault", map[string]any{"name": "openai", "value": secret}, nil); code != http.StatusOK {
		t.Fatalf("save key: %d", code)
	}
	turn(t, srv, "second")
	if got := lastChat(t, llm).Header.Get("Authorization"); got != "Bearer "+secret {
		t.Fatalf("after saving the key the model got Authorization %q", got)
	}

	if files := filesHolding(t, srv.DataDir, secret); len(files) > 0 {
		t.Fatalf("the key is in clear in %v", files)
	}
	list := body(t, srv.Do("GET", "/api/vault", nil))
	if strings.Contains(list, secret) || !strings.Contains(list, `"name":"openai"`) {
		t.Fatalf("listing %s", list)
	}
	settings := body(t, srv.Do("GET", "/api/settings", nil))
	if strings.Contains(settings, secret) || !strings.Contains(settings, `"openai":{"apiKey":"****"`) {
		t.Fatalf("settings %s", settings)
	}

	// Deleting the key: the next turn sends none again.
	if code := srv.JSON("DELETE", "/api/vault/openai", nil, nil); code != http.StatusOK {
		t.Fatalf("delete: %d", code)
	}
	turn(t, srv, "third")
	if got := lastChat(t, llm).Header.Get("Authorization"); got != "" {
		t.Fatalf("after deleting the key the model got Authorization %q", got)
	}
	if code := srv.JSON("DELETE", "/api/vault/openai", nil, nil); code != http.StatusNotFound {
		t.Fatalf("delete again: %d, want 404", code)
	}
}

// TestVaultRevealIsSameOriginOnly: a local non-browser client and the
// server's own page may read a secret back; the desktop app's origin and
// another site may not, nor may a request relayed by a proxy.
func TestVaultRevealIsSameOriginOnly(t *testing.T) {
	srv := waggletest.Start(t)
	if code := srv.JSON("POST", "/api/vault", map[string]any{"name": "GITHUB_TOKEN", "value": "ghp_x", "type": "bearer"}, nil); code != http.StatusOK {
		t.Fatalf("save: %d", code)
	}
	var got struct{ Name, Value, Type string }
	if code := srv.JSON("POST", "/api/vault/GITHUB_TOKEN/reveal", nil, &got); code != http.StatusOK || got.Value != "ghp_x" || got.Type != "bearer" {
		t.Fatalf("reveal from a local client: %d %+v", code, got)
	}
	if code := srv.JSON("POST", "/api/vault/GITHUB_TOKEN/reveal", nil, nil, "Origin", srv.URL, "Sec-Fetch-Site", "same-origin"); code != http.StatusOK {
		t.Fatalf("reveal from the server's own page: %d", code)
	}
	for _, h := range [][]string{
		{"Origin", "tauri://localhost"},
		{"Origin", "http://evil.example"},
		{"Sec-Fetch-Site", "cross-site"},
		{"X-Forwarded-For", "203.0.113.9"},
	} {
		resp := srv.Do("POST", "/api/vault/GITHUB_TOKEN/reveal", nil, h...)
		// A relayed request is not the local user's: it needs the token
		// first (401); the others are refused (403).
		if b := body(t, resp); resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusUnauthorized || strings.Contains(b, "ghp_x") {
			t.Errorf("reveal with %v: %d %s", h, resp.StatusCode, b)
		}
	}
	for _, bad := range []map[string]any{{"value": "x"}, {"name": "a b", "value": "x"}, {"name": "x"}, {"name": "x", "value": 5}, {"name": "x", "value": "y", "extra": 1}} {
		if code := srv.JSON("POST", "/api/vault", bad, nil); code != http.StatusBadRequest {
			t.Errorf("save %v: %d, want 400", bad, code)
		}
	}
}

// TestSettingsChangeTheModel: the model saved in the app's settings is the
// model the next turn asks for; a broken hand edit of config.json is
// reported with its line and keeps the saved settings in force.
func TestSettingsChangeTheModel(t *testing.T) {
	llm := newLLM(t, llmtest.WithDefault(llmtest.Reply("ok")), llmtest.WithModels("claude-sonnet-4-6", "local-llama"))
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()))

	turn(t, srv, "before")
	if got := lastChat(t, llm).Chat.Model; got != "claude-sonnet-4-6" {
		t.Fatalf("default model %q", got)
	}
	var s struct {
		DefaultModel string  `json:"defaultModel"`
		DailyBudget  float64 `json:"dailyBudget"`
		ConfigError  string  `json:"configError"`
	}
	if code := srv.JSON("PUT", "/api/settings", map[string]any{"defaultModel": "local-llama", "dailyBudget": 5}, &s); code != http.StatusOK || s.DefaultModel != "local-llama" || s.DailyBudget != 5 {
		t.Fatalf("put settings: %d %+v", code, s)
	}
	turn(t, srv, "after")
	if got := lastChat(t, llm).Chat.Model; got != "local-llama" {
		t.Fatalf("after the settings change the turn used %q", got)
	}
	b, err := os.ReadFile(filepath.Join(srv.DataDir, "config.json"))
	if err != nil || !strings.Contains(string(b), `"local-llama"`) {
		t.Fatalf("config.json %s %v", b, err)
	}

	if err := os.WriteFile(filepath.Join(srv.DataDir, "config.json"), []byte("{\n  \"defaultModel\": \"claude-sonnet-4-6\"\n  oops\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := srv.JSON("GET", "/api/settings", nil, &s); code != http.StatusOK || !strings.Contains(s.ConfigError, "line 3") || s.DefaultModel != "local-llama" {
		t.Fatalf("after a bad edit: %d %+v", code, s)
	}
	if code := srv.JSON("PUT", "/api/settings", map[string]any{"defaultModel": "x"}, nil); code != http.StatusConflict {
		t.Fatalf("a change over a broken file: %d, want 409", code)
	}
	for _, bad := range []map[string]any{{"apiKeys": []string{"k"}}, {"dailyBudget": -1}, {"defaultModel": 3}} {
		if code := srv.JSON("PUT", "/api/settings", bad, nil); code != http.StatusBadRequest {
			t.Errorf("put %v: %d, want 400", bad, code)
		}
	}
}

// TestModelsComeFromTheModelServer: the models list and status are the
// configured server's.
func TestModelsComeFromTheModelServer(t *testing.T) {
	llm := newLLM(t, llmtest.WithModels("alpha-1", "beta-2"))
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()))
	var models struct{ Models []string }
	if code := srv.JSON("GET", "/api/litellm/models", nil, &models); code != http.StatusOK || strings.Join(models.Models, ",") != "alpha-1,beta-2" {
		t.Fatalf("models: %d %v", code, models.Models)
	}
	var status struct {
		Running bool `json:"running"`
	}
	if code := srv.JSON("GET", "/api/litellm/status", nil, &status); code != http.StatusOK || !status.Running {
		t.Fatalf("status: %d %+v", code, status)
	}
	providers := body(t, srv.Do("GET", "/api/providers", nil))
	if !strings.Contains(providers, `"alpha-1"`) {
		t.Fatalf("providers %s", providers)
	}

	down := waggletest.Start(t)
	if code := down.JSON("GET", "/api/litellm/models", nil, &models); code != http.StatusOK || len(models.Models) != 0 {
		t.Fatalf("models of an unreachable server: %d %v", code, models.Models)
	}
}

// TestModelServerThatWantsAKeyIsSeenWithTheVaultKey: a model server that
// refuses requests without its key (401) is unavailable to /health and
// the models list until the user saves the key in the vault; then both
// report it (the gateway asks a turn runner, which holds the vault's key,
// instead of reading the key itself), and the next turn is served by the
// model with that key rather than in echo mode.
func TestModelServerThatWantsAKeyIsSeenWithTheVaultKey(t *testing.T) {
	const secret = "sk-hosted-0123456789-secret"
	llm := newLLM(t, llmtest.WithAPIKey(secret), llmtest.WithModels("alpha-1", "beta-2"), llmtest.WithDefault(llmtest.Reply("from the model")))
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()))
	var health struct {
		LLM struct{ Reachable bool } `json:"llm"`
	}
	var models struct{ Models []string }
	if code := srv.JSON("GET", "/health", nil, &health); code != http.StatusOK || health.LLM.Reachable {
		t.Fatalf("health before the key: %d %+v", code, health)
	}
	if code := srv.JSON("GET", "/api/litellm/models", nil, &models); code != http.StatusOK || len(models.Models) != 0 {
		t.Fatalf("models before the key: %d %v", code, models.Models)
	}

	if code := srv.JSON("POST", "/api/vault", map[string]any{"name": "openai", "value": secret}, nil); code != http.StatusOK {
		t.Fatalf("save key: %d", code)
	}
	waitfor.NoError(t, "the models list comes from the server", func() error {
		if code := srv.JSON("GET", "/api/litellm/models", nil, &models); code != http.StatusOK || strings.Join(models.Models, ",") != "alpha-1,beta-2" {
			return fmt.Errorf("models: %d %v", code, models.Models)
		}
		return nil
	})
	if code := srv.JSON("GET", "/health", nil, &health); code != http.StatusOK || !health.LLM.Reachable {
		t.Fatalf("health after the key: %d %+v", code, health)
	}
	st := srv.Chat(chat("hello"))
	defer st.Close()
	evs := st.All(t)
	if last := evs[len(evs)-1]; last.Name != "done" || !strings.Contains(string(last.Data), `"content":"from the model"`) {
		t.Fatalf("the turn after the key ended with %s %s", last.Name, last.Data)
	}
}
