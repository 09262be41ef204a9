package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// fakeSearch is a local stand-in for one provider's search API, answering
// in that provider's documented format and recording what it was asked.
type fakeSearch struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []string // "<query>|<credential>|<count>" per accepted request
}

const fakeKey = "k-test-123"

func newFakeSearch(t *testing.T, provider string) *fakeSearch {
	t.Helper()
	f := &fakeSearch{}
	results := func(query string) []map[string]string {
		return []map[string]string{
			{"title": "Honeybee <strong>waggle</strong> dance", "url": "https://example.org/waggle", "text": "Bees tell each other where &amp; how far the flowers are about " + query + "."},
			{"title": "Second hit", "url": "https://example.net/2", "text": "More\nabout it."},
			{"title": "Third hit", "url": "https://example.com/3", "text": "Third."},
		}
	}
	mux := http.NewServeMux()
	switch provider {
	case "searxng":
		// SearXNG: GET /search?q=...&format=json (no key).
		mux.HandleFunc("GET /search", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("format") != "json" {
				http.Error(w, "html only", http.StatusForbidden)
				return
			}
			q := r.URL.Query().Get("q")
			f.record(q, "", "")
			var out []map[string]string
			for _, x := range results(q) {
				out = append(out, map[string]string{"title": x["title"], "url": x["url"], "content": x["text"], "engine": "fake"})
			}
			writeJSON(w, map[string]any{"query": q, "number_of_results": len(out), "results": out})
		})
	case "brave":
		// Brave: GET /res/v1/web/search?q=...&count=N, X-Subscription-Token.
		mux.HandleFunc("GET /res/v1/web/search", func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Subscription-Token") != fakeKey {
				http.Error(w, `{"type":"ErrorResponse"}`, http.StatusUnauthorized)
				return
			}
			q := r.URL.Query().Get("q")
			f.record(q, r.Header.Get("X-Subscription-Token"), r.URL.Query().Get("count"))
			var out []map[string]string
			for _, x := range results(q) {
				out = append(out, map[string]string{"title": x["title"], "url": x["url"], "description": x["text"]})
			}
			writeJSON(w, map[string]any{"type": "search", "web": map[string]any{"type": "search", "results": out}})
		})
	case "tavily":
		// Tavily: POST /search {"api_key","query","max_results"}.
		mux.HandleFunc("POST /search", func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				APIKey     string `json:"api_key"`
				Query      string `json:"query"`
				MaxResults int    `json:"max_results"`
			}
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.APIKey != fakeKey {
				http.Error(w, `{"detail":{"error":"Unauthorized"}}`, http.StatusUnauthorized)
				return
			}
			f.record(body.Query, body.APIKey, fmt.Sprint(body.MaxResults))
			var out []map[string]any
			for _, x := range results(body.Query) {
				out = append(out, map[string]any{"title": x["title"], "url": x["url"], "content": x["text"], "score": 0.9})
			}
			writeJSON(w, map[string]any{"query": body.Query, "results": out, "response_time": 0.1})
		})
	}
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeSearch) record(q, key, count string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, q+"|"+key+"|"+count)
}

func (f *fakeSearch) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// startWithConfig starts waggle serve whose data dir holds config.json
// with cfg.
func startWithConfig(t *testing.T, llmURL string, cfg map[string]any) *waggletest.Proc {
	t.Helper()
	dir := t.TempDir()
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return waggletest.StartProc(t, waggleBin, waggletest.ProcDataDir(dir), waggletest.ProcEnv("WAGGLE_LLM_URL="+llmURL))
}

// TestWebSearchProviders: with each provider configured in config.json
// (its URL pointing at a local fake of its API), the model is offered
// web_search, its call reaches the provider in the provider's format (key
// included), and the model gets numbered title / URL / snippet lines.
func TestWebSearchProviders(t *testing.T) {
	for _, provider := range []string{"searxng", "brave", "tavily"} {
		t.Run(provider, func(t *testing.T) {
			fake := newFakeSearch(t, provider)
			llm := callerModel(t)
			cfg := map[string]any{"provider": provider, "url": fake.srv.URL}
			if provider != "searxng" {
				cfg["apiKey"] = fakeKey
			}
			p := startWithConfig(t, llm.URL(), map[string]any{"webSearch": cfg})
			evs := runChat(t, p, "research", "web_search", map[string]any{"query": "waggle dance", "maxResults": 2})
			if s := waggletest.Steps(evs); !slices.Contains(s, `Searching the web for "waggle dance"...`) {
				t.Errorf("steps %q lack the search step", s)
			}
			if !slices.Contains(offeredTools(llm), "web_search") {
				t.Errorf("web_search not offered with %s configured", provider)
			}
			reqs := fake.requests()
			wantKey, wantCount := fakeKey, "2"
			if provider == "searxng" {
				wantKey, wantCount = "", ""
			}
			if len(reqs) != 1 || reqs[0] != "waggle dance|"+wantKey+"|"+wantCount {
				t.Fatalf("provider asked %q", reqs)
			}
			res := toolResults(llm)
			want := "Results for \"waggle dance\":\n\n" +
				"1. Honeybee waggle dance\n   https://example.org/waggle\n   Bees tell each other where & how far the flowers are about waggle dance.\n\n" +
				"2. Second hit\n   https://example.net/2\n   More about it."
			if len(res) != 1 || res[0] != want {
				t.Fatalf("tool result:\n%q\nwant\n%q", res, want)
			}
			if strings.Contains(p.Output(), fakeKey) {
				t.Errorf("the API key appears in the server's log")
			}
		})
	}
}

// TestWebSearchWrongKey: a provider refusing the key gives the model a
// plain error naming the refusal — never the key itself.
func TestWebSearchWrongKey(t *testing.T) {
	fake := newFakeSearch(t, "brave")
	llm := callerModel(t)
	p := startWithConfig(t, llm.URL(), map[string]any{"webSearch": map[string]any{"provider": "brave", "url": fake.srv.URL, "apiKey": "wrong-key-456"}})
	runChat(t, p, "research", "web_search", map[string]any{"query": "bees"})
	res := toolResults(llm)
	if len(res) != 1 || !strings.Contains(res[0], "refused the API key (HTTP 401)") || strings.Contains(res[0], "wrong-key-456") {
		t.Fatalf("tool result: %q", res)
	}
}

// lastUserMessage is the content of the last user message the model got.
func lastUserMessage(t *testing.T, llm interface {
	ChatRequests() []*llmtest.Request
}) string {
	t.Helper()
	reqs := llm.ChatRequests()
	if len(reqs) == 0 {
		t.Fatal("the model was not called")
	}
	msgs := reqs[len(reqs)-1].Chat.Messages
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Content
		}
	}
	t.Fatal("no user message")
	return ""
}

// TestResearchNamesToolsThatExist: /research sent as a chat message
// reaches the agent as a prompt naming web_search only when the model is
// offered it; without a provider the prompt tells the model to say that
// web search is not configured.
func TestResearchNamesToolsThatExist(t *testing.T) {
	research := map[string]any{"message": "/research honeybee navigation", "workspace": "research"}

	llm := callerModel(t)
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL()))
	if evs := waggletest.NewStream(p.Do(t, "POST", "/api/chat", research)).All(t); evs[len(evs)-1].Name != "done" {
		t.Fatalf("/research without a provider ended with %s", evs[len(evs)-1].Name)
	}
	prompt := lastUserMessage(t, llm)
	if strings.Contains(prompt, "Use web_search") || !strings.Contains(prompt, "Web search is not configured on this server") ||
		!strings.Contains(prompt, "honeybee navigation") {
		t.Errorf("/research prompt without a provider:\n%s", prompt)
	}
	if slices.Contains(offeredTools(llm), "web_search") {
		t.Error("web_search offered without a provider")
	}

	fake := newFakeSearch(t, "searxng")
	llm2 := callerModel(t)
	p2 := startWithConfig(t, llm2.URL(), map[string]any{"webSearch": map[string]any{"provider": "searxng", "url": fake.srv.URL}})
	if evs := waggletest.NewStream(p2.Do(t, "POST", "/api/chat", research)).All(t); evs[len(evs)-1].Name != "done" {
		t.Fatalf("/research with a provider ended with %s", evs[len(evs)-1].Name)
	}
	prompt = lastUserMessage(t, llm2)
	if !strings.Contains(prompt, "Use web_search for current information") || strings.Contains(prompt, "not configured") {
		t.Errorf("/research prompt with a provider:\n%s", prompt)
	}
	if !slices.Contains(offeredTools(llm2), "web_search") {
		t.Error("web_search not offered with a provider")
	}
}

// TestWebSearchKeyFromVault (desktop): config.json names Tavily without a
// key; web_search is not offered until the user saves TAVILY_API_KEY in
// the vault (Settings > Vault), then the search reaches the provider with
// that key, which appears neither in the result nor in the server's log.
func TestWebSearchKeyFromVault(t *testing.T) {
	fake := newFakeSearch(t, "tavily")
	llm := callerModel(t)
	p := startWithConfig(t, llm.URL(), map[string]any{"webSearch": map[string]any{"provider": "tavily", "url": fake.srv.URL}})
	runChat(t, p, "research", "read_file", map[string]any{"path": "none.txt"})
	if slices.Contains(offeredTools(llm), "web_search") {
		t.Fatal("web_search offered with no key in config.json nor the vault")
	}
	resp := p.Do(t, "POST", "/api/vault", map[string]any{"name": "TAVILY_API_KEY", "value": fakeKey})
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("save the key in the vault: %d", resp.StatusCode)
	}
	runChat(t, p, "research", "web_search", map[string]any{"query": "waggle dance", "maxResults": 1})
	if reqs := fake.requests(); len(reqs) != 1 || reqs[0] != "waggle dance|"+fakeKey+"|1" {
		t.Fatalf("provider asked %q", reqs)
	}
	res := toolResults(llm)
	if len(res) != 2 || !strings.HasPrefix(res[1], `Results for "waggle dance":`) || strings.Contains(res[1], fakeKey) {
		t.Fatalf("tool results: %q", res)
	}
	if strings.Contains(p.Output(), fakeKey) {
		t.Error("the vault's key appears in the server's log")
	}
}

// TestWebSearchKeyPerTeam (team server, PostgreSQL): acme's owner saves
// BRAVE_API_KEY in acme's vault; her model searches with it in acme's
// workspace, while zeta's owner, whose team saved none, is not offered
// web_search in zeta's.
func TestWebSearchKeyPerTeam(t *testing.T) {
	fake := newFakeSearch(t, "brave")
	llm := callerModel(t)
	srv := startTeamServer(t, llm.URL(), map[string]any{"webSearch": map[string]any{"provider": "brave", "url": fake.srv.URL}})
	p := srv.p
	olga, zed := srv.team(t, "acme", "olga"), srv.team(t, "zeta", "zed")
	acmeWS, zetaWS := srv.workspace(t, "acme", "acme research", olga), srv.workspace(t, "zeta", "zeta research", zed)
	resp := p.Do(t, "POST", "/api/vault?team=acme", map[string]any{"name": "BRAVE_API_KEY", "value": fakeKey}, "Authorization", olga)
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("save acme's key: %d", resp.StatusCode)
	}

	chat := func(ws, auth string) {
		evs := waggletest.NewStream(p.Do(t, "POST", "/api/chat", callChat(ws, "web_search", map[string]any{"query": "bees"}), "Authorization", auth)).All(t)
		if end := evs[len(evs)-1]; end.Name != protocol.EventDone {
			t.Fatalf("turn ended with %s %s", end.Name, end.Data)
		}
	}
	chat(zetaWS, zed)
	if slices.Contains(offeredTools(llm), "web_search") {
		t.Error("zeta's member is offered web_search with acme's key")
	}
	if reqs := fake.requests(); len(reqs) != 0 {
		t.Fatalf("zeta's turn reached the provider: %q", reqs)
	}
	chat(acmeWS, olga)
	if !slices.Contains(offeredTools(llm), "web_search") {
		t.Error("acme's owner is not offered web_search with acme's key")
	}
	if reqs := fake.requests(); len(reqs) != 1 || !strings.HasPrefix(reqs[0], "bees|"+fakeKey+"|") {
		t.Fatalf("provider asked %q", reqs)
	}
	if strings.Contains(p.Output(), fakeKey) {
		t.Error("the vault's key appears in the server's log")
	}
}

// TestSettingsCannotRedirectWebSearch (DESIGN §11, SSRF): the web app's
// own page cannot point web_search (or any URL the server then calls) at
// an internal address through the settings routes: PUT and PATCH
// /api/settings refuse webSearch with 400, a provider's baseUrl is not
// stored, config.json keeps the operator's provider and the next search
// still goes there.
func TestSettingsCannotRedirectWebSearch(t *testing.T) {
	fake := newFakeSearch(t, "searxng")
	llm := callerModel(t)
	p := startWithConfig(t, llm.URL(), map[string]any{"webSearch": map[string]any{"provider": "searxng", "url": fake.srv.URL}})
	before, err := os.ReadFile(filepath.Join(p.DataDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	browser := []string{"Origin", p.URL, "Sec-Fetch-Site", "same-origin"}
	metadata := map[string]any{"provider": "searxng", "url": "http://169.254.169.254/latest"}
	for _, c := range []struct {
		method string
		body   map[string]any
		want   int
	}{
		{"PUT", map[string]any{"webSearch": metadata}, http.StatusBadRequest},
		{"PATCH", map[string]any{"webSearch": metadata}, http.StatusBadRequest},
		{"PATCH", map[string]any{"webSearch.url": "http://127.0.0.1:1"}, http.StatusBadRequest},
		{"PUT", map[string]any{"providers": map[string]any{"searxng": map[string]any{"baseUrl": "http://127.0.0.1:1"}}}, http.StatusOK},
	} {
		resp := p.Do(t, c.method, "/api/settings", c.body, browser...)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s /api/settings %v: %d, want %d", c.method, c.body, resp.StatusCode, c.want)
		}
	}
	after, err := os.ReadFile(filepath.Join(p.DataDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("config.json changed:\n%s\nnow\n%s", before, after)
	}
	runChat(t, p, "research", "web_search", map[string]any{"query": "bees"})
	if reqs := fake.requests(); len(reqs) != 1 || !strings.HasPrefix(reqs[0], "bees|") {
		t.Fatalf("the operator's provider got %q", reqs)
	}
}
