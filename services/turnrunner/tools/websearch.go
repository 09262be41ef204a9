package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// Web search providers (config.json "webSearch.provider").
const (
	SearchSearXNG = "searxng"
	SearchBrave   = "brave"
	SearchTavily  = "tavily"
)

// Default API base URLs of the hosted providers; SearXNG has none (it is
// self-hosted, so its url is required).
const (
	DefaultBraveURL  = "https://api.search.brave.com"
	DefaultTavilyURL = "https://api.tavily.com"
)

// web_search limits.
const (
	defaultSearchResults = 5
	maxSearchResults     = 20
	maxSearchQuery       = 400
	webSearchTimeout     = 20 * time.Second
	// webSearchMaxBytes bounds a provider's answer.
	webSearchMaxBytes = 2 << 20
	// maxSnippetChars bounds one result's snippet.
	maxSnippetChars = 500
)

// WebSearchConfig is config.json's "webSearch" object: which provider
// web_search asks and how to reach it. It is operator configuration (a
// file on the server), never a request field; APIKey is a secret and is
// never logged or shown.
type WebSearchConfig struct {
	// Provider is SearchSearXNG, SearchBrave or SearchTavily; empty means
	// web search is off and the tool is not offered.
	Provider string `json:"provider,omitempty"`
	// URL is the provider's base URL: required for SearXNG (for example
	// http://127.0.0.1:8888), the hosted API's address by default for the
	// others.
	URL string `json:"url,omitempty"`
	// APIKey authenticates to Brave (X-Subscription-Token) and Tavily
	// (api_key); SearXNG takes none. Without one the runner looks in the
	// vault (protocol.VaultSearchKeyNames); with none there either the
	// tool is not offered.
	APIKey string `json:"apiKey,omitempty"`
}

// Check reports what keeps the configuration from working; nil for a
// usable one and for the zero value (search off).
func (c WebSearchConfig) Check() error {
	switch c.Provider {
	case "":
		return nil
	case SearchSearXNG:
		if c.URL == "" {
			return errors.New(`webSearch: provider "searxng" needs "url"`)
		}
	case SearchBrave, SearchTavily:
		// The key may be in the vault instead (Available checks it).
	default:
		return fmt.Errorf("webSearch: unknown provider %q (searxng, brave or tavily)", c.Provider)
	}
	if _, err := c.baseURL(); err != nil {
		return err
	}
	return nil
}

// baseURL is the provider's base URL, the default for hosted ones.
func (c WebSearchConfig) baseURL() (*url.URL, error) {
	raw := c.URL
	if raw == "" {
		switch c.Provider {
		case SearchBrave:
			raw = DefaultBraveURL
		case SearchTavily:
			raw = DefaultTavilyURL
		}
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New(`webSearch: "url" must be an http:// or https:// URL`)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}

// searchResult is one hit, whatever the provider.
type searchResult struct {
	Title, URL, Snippet string
}

type webSearchTool struct{}

func (webSearchTool) Name() string { return "web_search" }

func (webSearchTool) Description() string {
	return "Search the web and return the top results as numbered lines: title, URL and a short snippet. " +
		"Use web_fetch on a result's URL to read the page."
}

func (webSearchTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"query":{"type":"string","description":"What to search for"},` +
		`"maxResults":{"type":"integer","minimum":1,"maximum":20,"description":"Most results to return (default 5)"}` +
		`},"required":["query"]}`)
}

// Available offers web_search only when a usable provider is configured,
// with its API key when it needs one.
func (webSearchTool) Available(env Env) bool {
	c := env.WebSearch
	return c.Provider != "" && c.Check() == nil && (c.Provider == SearchSearXNG || c.APIKey != "")
}

type webSearchInput struct {
	Query      string  `json:"query"`
	MaxResults *intArg `json:"maxResults,omitempty"`
}

func (in *webSearchInput) validate() error {
	in.Query = strings.TrimSpace(in.Query)
	if in.Query == "" {
		return errors.New("query is required")
	}
	if len(in.Query) > maxSearchQuery {
		return fmt.Errorf("query is longer than %d bytes", maxSearchQuery)
	}
	if in.MaxResults != nil && (*in.MaxResults < 1 || *in.MaxResults > maxSearchResults) {
		return fmt.Errorf("maxResults must be between 1 and %d", maxSearchResults)
	}
	return nil
}

func (webSearchTool) Decode(input json.RawMessage) (Call, error) {
	return decodeCall(input, func(ctx context.Context, env Env, in *webSearchInput) (string, error) {
		n := defaultSearchResults
		if in.MaxResults != nil {
			n = int(*in.MaxResults)
		}
		results, err := webSearch(ctx, env.WebSearch, in.Query, n)
		if err != nil {
			return "", err
		}
		return formatResults(in.Query, results, n), nil
	})
}

// webSearch asks the configured provider for n results of query.
func webSearch(ctx context.Context, cfg WebSearchConfig, query string, n int) ([]searchResult, error) {
	if err := cfg.Check(); err != nil || cfg.Provider == "" {
		return nil, errors.New("web search is not configured on this server")
	}
	base, _ := cfg.baseURL()
	ctx, cancel := context.WithTimeout(ctx, webSearchTimeout)
	defer cancel()
	var (
		req *http.Request
		err error
	)
	switch cfg.Provider {
	case SearchSearXNG:
		q := url.Values{"q": {query}, "format": {"json"}}
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, base.String()+"/search?"+q.Encode(), nil)
	case SearchBrave:
		q := url.Values{"q": {query}, "count": {fmt.Sprint(n)}}
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, base.String()+"/res/v1/web/search?"+q.Encode(), nil)
		if err == nil {
			req.Header.Set("X-Subscription-Token", cfg.APIKey)
		}
	case SearchTavily:
		body, _ := json.Marshal(map[string]any{"api_key": cfg.APIKey, "query": query, "max_results": n})
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, base.String()+"/search", bytes.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
		}
	}
	if err != nil {
		return nil, errors.New("web search is misconfigured on this server")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "Waggle")
	body, err := searchDo(req)
	if err != nil {
		return nil, fmt.Errorf("the search provider (%s) %w", cfg.Provider, err)
	}
	results, err := parseResults(cfg.Provider, body)
	if err != nil {
		return nil, fmt.Errorf("the search provider (%s) gave an answer that could not be read", cfg.Provider)
	}
	if len(results) > n {
		results = results[:n]
	}
	return results, nil
}

// searchClient follows no redirects: the provider is the one configured,
// and an API that answers with a redirect is misconfigured.
var searchClient = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// searchDo sends req and returns the body of a 200 answer. Errors read
// after "the search provider (x) " and never carry the key or the body.
func searchDo(req *http.Request) ([]byte, error) {
	resp, err := searchClient.Do(req)
	if err != nil {
		if req.Context().Err() != nil {
			return nil, errors.New("did not answer in time")
		}
		return nil, errors.New("could not be reached")
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("refused the API key (HTTP %d)", resp.StatusCode)
	case resp.StatusCode == http.StatusTooManyRequests:
		return nil, errors.New("is rate-limiting this server (HTTP 429); try again later")
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("answered HTTP %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, webSearchMaxBytes+1))
	if err != nil {
		return nil, errors.New("broke off its answer")
	}
	if len(body) > webSearchMaxBytes {
		return nil, errors.New("answered with more than 2 MiB")
	}
	return body, nil
}

// parseResults reads each provider's documented answer format.
func parseResults(provider string, body []byte) ([]searchResult, error) {
	var out []searchResult
	switch provider {
	case SearchSearXNG:
		// GET /search?format=json → {"results":[{"title","url","content"}]}
		var r struct {
			Results []struct {
				Title   string `json:"title"`
				URL     string `json:"url"`
				Content string `json:"content"`
			} `json:"results"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			return nil, err
		}
		for _, x := range r.Results {
			out = append(out, searchResult{x.Title, x.URL, x.Content})
		}
	case SearchBrave:
		// GET /res/v1/web/search → {"web":{"results":[{"title","url","description"}]}}
		var r struct {
			Web struct {
				Results []struct {
					Title       string `json:"title"`
					URL         string `json:"url"`
					Description string `json:"description"`
				} `json:"results"`
			} `json:"web"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			return nil, err
		}
		for _, x := range r.Web.Results {
			out = append(out, searchResult{x.Title, x.URL, x.Description})
		}
	case SearchTavily:
		// POST /search → {"results":[{"title","url","content"}]}
		var r struct {
			Results []struct {
				Title   string `json:"title"`
				URL     string `json:"url"`
				Content string `json:"content"`
			} `json:"results"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			return nil, err
		}
		for _, x := range r.Results {
			out = append(out, searchResult{x.Title, x.URL, x.Content})
		}
	}
	return out, nil
}

// formatResults renders results as numbered title / URL / snippet lines.
// Providers' snippets may carry HTML emphasis (<strong>); it is removed.
func formatResults(query string, results []searchResult, n int) string {
	if len(results) == 0 {
		return fmt.Sprintf("No results for %q.", query)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Results for %q:\n", query)
	for i, r := range results {
		if i == n {
			break
		}
		title := oneLine(stripTags(r.Title))
		if title == "" {
			title = "(untitled)"
		}
		fmt.Fprintf(&b, "\n%d. %s\n   %s\n", i+1, title, oneLine(r.URL))
		if s := oneLine(stripTags(r.Snippet)); s != "" {
			if utf8.RuneCountInString(s) > maxSnippetChars {
				s = string([]rune(s)[:maxSnippetChars]) + "…"
			}
			fmt.Fprintf(&b, "   %s\n", s)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// oneLine collapses whitespace runs (newlines included) to single spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// stripTags removes HTML tags and decodes the few entities search
// snippets use.
func stripTags(s string) string {
	var b strings.Builder
	in := false
	for _, r := range s {
		switch {
		case r == '<':
			in = true
		case r == '>' && in:
			in = false
		case !in:
			b.WriteRune(r)
		}
	}
	return strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">", "&quot;", `"`, "&#39;", "'", "&nbsp;", " ").Replace(b.String())
}
