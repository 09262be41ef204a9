// Package vaultapi serves the vault routes, in the original's shapes:
// GET/POST /api/vault, DELETE /api/vault/{name} and
// POST /api/vault/{name}/reveal. The secrets live in the session store's
// vault (encrypted at rest); this package never logs a value and a
// listing carries none.
//
// Who may call: locally, any client the edge lets through (its Host and
// origin rules), one vault; on a team server, an admin of the team named
// in ?team= (teamauth's scopeTeamQuery), one vault per team. Reveal is
// stricter: the server's own page or a non-browser client only (never the
// desktop app's or an operator-added origin), and locally only a direct
// loopback client.
package vaultapi

import (
	"net/http"
	"slices"

	"github.com/go-chi/chi/v5"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/forward"
	"github.com/waggle-os/core/services/gateway/internal/input"
	"github.com/waggle-os/core/services/gateway/internal/respond"
	"github.com/waggle-os/core/services/gateway/internal/teamauth"
)

// Mount adds the routes to r (mounted at /api).
func Mount(r chi.Router, d forward.Deps) {
	h := handlers{d: d}
	r.Get("/vault", h.list)
	r.Post("/vault", h.set)
	r.Delete("/vault/{name}", h.remove)
	r.Post("/vault/{name}/reveal", h.reveal)
}

type handlers struct{ d forward.Deps }

// ErrRevealOrigin refuses a reveal from anything but the server's own
// page or a non-browser local client.
var ErrRevealOrigin = protocol.Errorf(protocol.Forbidden,
	"Forbidden: external origin not allowed for vault reveal").WithCode("VAULT_REVEAL_ORIGIN")

// team is the vault a request acts on: the team teamauth authorized on a
// team server, "" (the local vault) otherwise.
func team(r *http.Request) string {
	sc, _ := teamauth.ScopeFrom(r.Context())
	if sc.User == "" {
		return ""
	}
	return sc.Team
}

// Entry is one secret in a listing.
type Entry struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	UpdatedAt string `json:"updatedAt"`
	IsCommon  bool   `json:"isCommon"`
}

// Listing is GET /api/vault's body.
type Listing struct {
	Secrets          []Entry         `json:"secrets"`
	SuggestedKeys    []string        `json:"suggestedKeys"`
	SuggestedSecrets []SuggestedList `json:"suggestedSecrets"`
}

func (h handlers) list(w http.ResponseWriter, r *http.Request) {
	rep, ok := forward.Call(h.d, w, r, protocol.ListVault, protocol.VaultListRequest{Team: team(r)})
	if !ok {
		return
	}
	out := Listing{Secrets: make([]Entry, 0, len(rep.Secrets)), SuggestedKeys: []string{}, SuggestedSecrets: []SuggestedList{}}
	have := map[string]bool{}
	for _, e := range rep.Secrets {
		have[e.Name] = true
		out.Secrets = append(out.Secrets, Entry{Name: e.Name, Type: e.Type,
			UpdatedAt: protocol.Timestamp(e.UpdatedAt), IsCommon: isCommon(e.Name)})
	}
	for _, cat := range suggested {
		items := slices.DeleteFunc(slices.Clone(cat.Items), func(s Suggested) bool { return have[s.Name] })
		for _, it := range items {
			out.SuggestedKeys = append(out.SuggestedKeys, it.Name)
		}
		if len(items) > 0 {
			out.SuggestedSecrets = append(out.SuggestedSecrets, SuggestedList{Category: cat.Category, Items: items})
		}
	}
	respond.JSON(w, http.StatusOK, out)
}

func (h handlers) set(w http.ResponseWriter, r *http.Request) {
	f, err := input.Decode(w, r, h.d.BodyLimit)
	if err != nil {
		respond.Error(w, h.d.Log, err)
		return
	}
	req := protocol.VaultSetRequest{Team: team(r)}
	for key := range f {
		if key != "name" && key != "value" && key != "type" {
			respond.Error(w, h.d.Log, protocol.Errorf(protocol.Invalid, "unknown field %s", key))
			return
		}
	}
	name, _, ok := f.Str("name")
	if !ok || name == "" {
		respond.Error(w, h.d.Log, protocol.Errorf(protocol.Invalid, "name is required"))
		return
	}
	value, _, ok := f.Str("value")
	if !ok || value == "" {
		respond.Error(w, h.d.Log, protocol.Errorf(protocol.Invalid, "value is required"))
		return
	}
	typ, _, err := f.OptString("type")
	if err != nil {
		respond.Error(w, h.d.Log, err)
		return
	}
	req.Name, req.Value, req.Type = name, value, typ
	if _, ok := forward.Call(h.d, w, r, protocol.SetVault, req); !ok {
		return
	}
	respond.JSON(w, http.StatusOK, map[string]any{"success": true, "name": name})
}

func (h handlers) remove(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	rep, ok := forward.Call(h.d, w, r, protocol.DeleteVault, protocol.VaultNameRequest{Team: team(r), Name: name})
	if !ok {
		return
	}
	respond.JSON(w, http.StatusOK, map[string]any{"deleted": rep.Deleted, "name": name})
}

// reveal answers {name, value, type}. The edge already refused a
// cross-site page; here only the server's own page or a non-browser
// client passes, and locally only from this machine.
func (h handlers) reveal(w http.ResponseWriter, r *http.Request) {
	if !trustedCaller(r) {
		respond.Error(w, h.d.Log, ErrRevealOrigin)
		return
	}
	name := chi.URLParam(r, "name")
	rep, ok := forward.Call(h.d, w, r, protocol.RevealVault, protocol.VaultNameRequest{Team: team(r), Name: name})
	if !ok {
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	respond.JSON(w, http.StatusOK, rep)
}

// trustedCaller: same-origin or no browser at all; locally also a
// direct loopback peer (team servers are reached over the network, and
// their admin check has run).
func trustedCaller(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return false
	}
	if origin := r.Header.Get("Origin"); origin != "" && !input.SameOrigin(origin, r.Host) {
		return false
	}
	if ref := r.Header.Get("Referer"); r.Header.Get("Origin") == "" && ref != "" && !input.SameOrigin(ref, r.Host) {
		return false
	}
	sc, _ := teamauth.ScopeFrom(r.Context())
	return sc.User != "" || input.DirectLoopback(r)
}

// Suggested is a well-known secret the app offers to add.
type Suggested struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Label string `json:"label"`
}

// SuggestedList is one category of suggestions.
type SuggestedList struct {
	Category string      `json:"category"`
	Items    []Suggested `json:"items"`
}

// suggested are the names the app offers, model servers first; the
// model client reads the first group (protocol.VaultModelKeyNames).
var suggested = []SuggestedList{
	{Category: "LLM Providers", Items: []Suggested{
		{protocol.VaultLLMKeyName, "api_key", "Model server key (WAGGLE_LLM_API_KEY)"},
		{"anthropic", "api_key", "Anthropic API Key"},
		{"openai", "api_key", "OpenAI API Key"},
		{"google", "api_key", "Google AI API Key"},
		{"mistral", "api_key", "Mistral API Key"},
		{"deepseek", "api_key", "DeepSeek API Key"},
		{"xai", "api_key", "xAI (Grok) API Key"},
		{"alibaba", "api_key", "Alibaba / Qwen API Key"},
		{"openrouter", "api_key", "OpenRouter API Key"},
	}},
	{Category: "Search & Tools", Items: []Suggested{
		{"TAVILY_API_KEY", "api_key", "Tavily Search API Key"},
		{"BRAVE_API_KEY", "api_key", "Brave Search API Key"},
	}},
	{Category: "Code & DevOps", Items: []Suggested{
		{"GITHUB_TOKEN", "bearer", "GitHub Personal Access Token"},
	}},
}

func isCommon(name string) bool {
	for _, c := range suggested {
		for _, s := range c.Items {
			if s.Name == name {
				return true
			}
		}
	}
	return false
}
