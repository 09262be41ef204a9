package tools

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestWebSearchConfigCheck(t *testing.T) {
	for _, c := range []struct {
		cfg  WebSearchConfig
		want string // "" = usable
	}{
		{WebSearchConfig{}, ""},
		{WebSearchConfig{Provider: "searxng", URL: "http://127.0.0.1:8888"}, ""},
		{WebSearchConfig{Provider: "brave", APIKey: "k"}, ""},
		{WebSearchConfig{Provider: "tavily", APIKey: "k", URL: "https://proxy.example/tavily/"}, ""},
		{WebSearchConfig{Provider: "searxng"}, `needs "url"`},
		// A key may come from the vault instead: the file alone is valid,
		// and Available (below) decides whether the tool is offered.
		{WebSearchConfig{Provider: "brave"}, ""},
		{WebSearchConfig{Provider: "google", APIKey: "secret-key-1"}, "unknown provider"},
		{WebSearchConfig{Provider: "searxng", URL: "file:///etc/passwd"}, "must be an http"},
	} {
		err := c.cfg.Check()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("Check(%+v) = %v, want %q", c.cfg, err, c.want)
		}
		if err != nil && c.cfg.APIKey != "" && strings.Contains(err.Error(), c.cfg.APIKey) {
			t.Errorf("Check(%+v) error shows the key", c.cfg)
		}
	}
}

// TestWebSearchOfferedOnlyWhenConfigured: Bind leaves web_search out
// without a usable provider.
func TestWebSearchOfferedOnlyWhenConfigured(t *testing.T) {
	r := NewRegistry(DefaultConfig())
	has := func(env Env) bool {
		for _, b := range r.Bind(env, nil) {
			if b.Name() == "web_search" {
				return true
			}
		}
		return false
	}
	env := newEnv(t)
	if has(env) {
		t.Error("web_search offered with no provider")
	}
	env.WebSearch = WebSearchConfig{Provider: "brave"} // no key
	if has(env) {
		t.Error("web_search offered with an unusable provider")
	}
	env.WebSearch.APIKey = "k"
	if !has(env) {
		t.Error("web_search not offered with brave and a key")
	}
}

func TestWebSearchProviderErrors(t *testing.T) {
	status := http.StatusTooManyRequests
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status == http.StatusFound {
			http.Redirect(w, r, "http://169.254.169.254/latest", status)
			return
		}
		if status == http.StatusOK {
			w.Write([]byte(`{"results":[]}`))
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	env := newEnv(t)
	env.WebSearch = WebSearchConfig{Provider: "searxng", URL: srv.URL}
	for _, c := range []struct {
		status int
		want   string
	}{
		{http.StatusTooManyRequests, "rate-limiting"},
		{http.StatusFound, "answered HTTP 302"},
		{http.StatusInternalServerError, "answered HTTP 500"},
	} {
		status = c.status
		if out, err := call(t, env, "web_search", map[string]any{"query": "x"}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("status %d: %q, %v; want an error with %q", c.status, out, err, c.want)
		}
	}
	status = http.StatusOK
	if out := mustCall(t, env, "web_search", map[string]any{"query": "nothing"}); out != `No results for "nothing".` {
		t.Errorf("empty results: %q", out)
	}
	if _, err := call(t, env, "web_search", map[string]any{"query": "x", "maxResults": 50}); err == nil {
		t.Error("maxResults 50 accepted")
	}
}
