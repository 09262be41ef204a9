// Package settingsapi serves the desktop app's settings and model routes
// in the original's shapes: GET/PUT/PATCH /api/settings,
// GET/PUT /api/settings/permissions, POST /api/settings/test-key,
// GET /api/providers, GET /api/litellm/models|status|pricing and
// GET /api/tier.
//
// The settings are config.json, read and written only by the session
// store (protocol.GetSettings, PatchSettings); API keys sent with them go
// to the vault, never to config.json. The model lists come from the
// configured OpenAI-compatible server's /models (the gateway's probe).
//
// Who may call: reads, anyone the edge and (on a team server) teamauth let
// through; changes are the operator's (refused on a team server, whose
// settings are its flags and config.json). test-key sends the key it is
// given to the configured model server only, never to a URL of the body.
package settingsapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/waggle-os/core/libs/llmprobe"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/forward"
	"github.com/waggle-os/core/services/gateway/internal/input"
	"github.com/waggle-os/core/services/gateway/internal/respond"
	"github.com/waggle-os/core/services/gateway/internal/teamauth"
)

// Config is what the routes need besides the bus.
type Config struct {
	// Probe is the gateway's view of the model server.
	Probe interface {
		Check(ctx context.Context) llmprobe.Status
	}
	// LLMURL is the model server's base URL (with /v1).
	LLMURL string
	// Client sends test-key's request. Default: 10 s timeout.
	Client *http.Client
}

// Mount adds the routes to r (mounted at /api).
func Mount(r chi.Router, d forward.Deps, cfg Config) {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	h := handlers{d: d, cfg: cfg}
	r.Get("/settings", h.get)
	r.Put("/settings", h.put)
	r.Patch("/settings", h.patch)
	r.Get("/settings/permissions", h.getPermissions)
	r.Put("/settings/permissions", h.putPermissions)
	r.Post("/settings/test-key", h.testKey)
	r.Get("/providers", h.providers)
	r.Get("/litellm/models", h.models)
	r.Get("/litellm/status", h.status)
	r.Get("/litellm/pricing", h.pricing)
	r.Get("/tier", h.tier)
}

type handlers struct {
	d   forward.Deps
	cfg Config
}

// doc is the part of config.json these routes show.
type doc struct {
	DefaultModel        string                     `json:"defaultModel"`
	FallbackModel       string                     `json:"fallbackModel"`
	BudgetModel         string                     `json:"budgetModel"`
	BudgetThreshold     float64                    `json:"budgetThreshold"`
	DailyBudget         *float64                   `json:"dailyBudget"`
	BudgetHardCap       bool                       `json:"budgetHardCap"`
	OnboardingCompleted bool                       `json:"onboardingCompleted"`
	Permissions         *Permissions               `json:"permissions"`
	Prices              map[string]json.RawMessage `json:"prices"`
}

// Settings is GET /api/settings's body.
type Settings struct {
	DefaultModel        string              `json:"defaultModel"`
	FallbackModel       *string             `json:"fallbackModel"`
	BudgetModel         *string             `json:"budgetModel"`
	BudgetThreshold     float64             `json:"budgetThreshold"`
	Providers           map[string]Provider `json:"providers"`
	DataDir             string              `json:"dataDir,omitempty"`
	LiteLLMURL          string              `json:"litellmUrl"`
	DailyBudget         *float64            `json:"dailyBudget"`
	BudgetHardCap       bool                `json:"budgetHardCap"`
	OnboardingCompleted bool                `json:"onboardingCompleted"`
	// ConfigError says why config.json on disk is not in force (the last
	// good version is), with the line and column.
	ConfigError string `json:"configError,omitempty"`
}

// Provider is a provider whose key is in the vault; the key is never
// shown, only that there is one.
type Provider struct {
	APIKey string   `json:"apiKey"`
	Models []string `json:"models"`
}

// maskedKey stands for a saved key: the value never leaves the vault
// through these routes.
const maskedKey = "****"

// defaultThreshold mirrors the runner's default budget threshold.
const defaultThreshold = 0.8

func (h handlers) load(w http.ResponseWriter, r *http.Request) (doc, protocol.SettingsDoc, bool) {
	rep, ok := forward.Call(h.d, w, r, protocol.GetSettings, protocol.Empty{})
	if !ok {
		return doc{}, rep, false
	}
	var d doc
	// A field of another type (a hand edit) shows as its zero value.
	_ = json.Unmarshal(rep.Doc, &d)
	return d, rep, true
}

func (h handlers) get(w http.ResponseWriter, r *http.Request) {
	d, rep, ok := h.load(w, r)
	if !ok {
		return
	}
	h.answer(w, r, d, rep)
}

func (h handlers) answer(w http.ResponseWriter, r *http.Request, d doc, rep protocol.SettingsDoc) {
	out := Settings{DefaultModel: d.DefaultModel, BudgetThreshold: d.BudgetThreshold, DailyBudget: d.DailyBudget,
		BudgetHardCap: d.BudgetHardCap, OnboardingCompleted: d.OnboardingCompleted, LiteLLMURL: h.cfg.LLMURL,
		Providers: map[string]Provider{}, ConfigError: rep.Error}
	if out.DefaultModel == "" {
		out.DefaultModel = protocol.DefaultAgentModel
	}
	if out.BudgetThreshold == 0 {
		out.BudgetThreshold = defaultThreshold
	}
	if d.FallbackModel != "" {
		out.FallbackModel = &d.FallbackModel
	}
	if d.BudgetModel != "" {
		out.BudgetModel = &d.BudgetModel
	}
	sc, _ := teamauth.ScopeFrom(r.Context())
	if sc.User == "" {
		// The local user's own machine; a team server's paths are its
		// operator's business.
		out.DataDir = h.d.DataDir
		if vault, ok := forward.Call(h.d, w, r, protocol.ListVault, protocol.VaultListRequest{}); ok {
			for _, e := range vault.Secrets {
				out.Providers[e.Name] = Provider{APIKey: maskedKey, Models: []string{}}
			}
		} else {
			return
		}
	}
	respond.JSON(w, http.StatusOK, out)
}

// modelFields are the PUT fields that name a model; null removes one.
var modelFields = []string{"defaultModel", "fallbackModel", "budgetModel"}

// put is PUT /api/settings: model, budget and provider keys. Keys go to
// the vault; the rest to config.json in one patch.
func (h handlers) put(w http.ResponseWriter, r *http.Request) {
	f, err := input.Decode(w, r, h.d.BodyLimit)
	if err != nil {
		respond.Error(w, h.d.Log, err)
		return
	}
	patch := protocol.SettingsPatch{Set: map[string]json.RawMessage{}}
	var keys []protocol.VaultSetRequest
	for k, v := range f {
		switch k {
		case "defaultModel", "fallbackModel", "budgetModel", "dailyBudget", "budgetThreshold", "budgetHardCap":
			if string(v) == "null" {
				if k == "defaultModel" || k == "budgetThreshold" || k == "budgetHardCap" {
					continue // the original ignores a null here
				}
				patch.Remove = append(patch.Remove, k)
				continue
			}
			patch.Set[k] = v
		case "providers":
			keys, err = providerKeys(v)
			if err != nil {
				respond.Error(w, h.d.Log, err)
				return
			}
		default:
			respond.Error(w, h.d.Log, protocol.Errorf(protocol.Invalid, "%s is not a setting that can be changed here", k))
			return
		}
	}
	for _, k := range keys {
		if _, ok := forward.Call(h.d, w, r, protocol.SetVault, k); !ok {
			return
		}
	}
	h.apply(w, r, patch)
}

// apply sends patch (when it changes anything) and answers GET's body.
func (h handlers) apply(w http.ResponseWriter, r *http.Request, patch protocol.SettingsPatch) {
	if len(patch.Set) == 0 && len(patch.Remove) == 0 {
		h.get(w, r)
		return
	}
	rep, ok := forward.Call(h.d, w, r, protocol.PatchSettings, patch)
	if !ok {
		return
	}
	var d doc
	_ = json.Unmarshal(rep.Doc, &d)
	h.answer(w, r, d, rep)
}

// providerKeys reads PUT's {"providers": {"<name>": {"apiKey": …,
// "models": […], "baseUrl": …}}}: the keys to save. A masked key (what GET
// shows) is no change.
func providerKeys(raw json.RawMessage) ([]protocol.VaultSetRequest, error) {
	var ps map[string]struct {
		APIKey  *string         `json:"apiKey"`
		Models  json.RawMessage `json:"models"`
		BaseURL json.RawMessage `json:"baseUrl"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ps); err != nil {
		return nil, protocol.Errorf(protocol.Invalid, `providers must be {"<name>": {"apiKey": "…"}}`)
	}
	var out []protocol.VaultSetRequest
	for name, p := range ps {
		if !protocol.ValidVaultName(name) {
			return nil, protocol.Errorf(protocol.Invalid, "provider %q is not a valid name", name)
		}
		if p.APIKey == nil || *p.APIKey == "" || *p.APIKey == maskedKey {
			continue
		}
		out = append(out, protocol.VaultSetRequest{Name: name, Value: *p.APIKey, Type: "api_key"})
	}
	return out, nil
}

// patch is PATCH /api/settings: onboarding and preferences, each field a
// setting the store accepts (null removes it).
func (h handlers) patch(w http.ResponseWriter, r *http.Request) {
	f, err := input.Decode(w, r, h.d.BodyLimit)
	if err != nil {
		respond.Error(w, h.d.Log, err)
		return
	}
	patch := protocol.SettingsPatch{Set: map[string]json.RawMessage{}}
	for k, v := range f {
		if string(v) == "null" {
			patch.Remove = append(patch.Remove, k)
		} else {
			patch.Set[k] = v
		}
	}
	rep, ok := forward.Call(h.d, w, r, protocol.PatchSettings, patch)
	if !ok {
		return
	}
	var d doc
	_ = json.Unmarshal(rep.Doc, &d)
	respond.JSON(w, http.StatusOK, map[string]any{"updated": true, "onboardingCompleted": d.OnboardingCompleted})
}

// Permissions is config.json's "permissions", in the original's shape.
type Permissions struct {
	DefaultAutonomy    string              `json:"defaultAutonomy"`
	ExternalGates      []string            `json:"externalGates"`
	WorkspaceOverrides map[string][]string `json:"workspaceOverrides"`
}

func (p *Permissions) fill() Permissions {
	out := Permissions{DefaultAutonomy: "normal", ExternalGates: []string{}, WorkspaceOverrides: map[string][]string{}}
	if p == nil {
		return out
	}
	if p.DefaultAutonomy != "" {
		out.DefaultAutonomy = p.DefaultAutonomy
	}
	if p.ExternalGates != nil {
		out.ExternalGates = p.ExternalGates
	}
	if p.WorkspaceOverrides != nil {
		out.WorkspaceOverrides = p.WorkspaceOverrides
	}
	return out
}

func (h handlers) getPermissions(w http.ResponseWriter, r *http.Request) {
	d, _, ok := h.load(w, r)
	if !ok {
		return
	}
	respond.JSON(w, http.StatusOK, d.Permissions.fill())
}

// putPermissions merges the body into the current permissions; the
// legacy yoloMode boolean maps to an autonomy level.
func (h handlers) putPermissions(w http.ResponseWriter, r *http.Request) {
	f, err := input.Decode(w, r, h.d.BodyLimit)
	if err != nil {
		respond.Error(w, h.d.Log, err)
		return
	}
	var body struct {
		DefaultAutonomy    *string             `json:"defaultAutonomy"`
		YoloMode           *bool               `json:"yoloMode"`
		ExternalGates      []string            `json:"externalGates"`
		WorkspaceOverrides map[string][]string `json:"workspaceOverrides"`
	}
	raw, _ := json.Marshal(f)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		respond.Error(w, h.d.Log, protocol.Errorf(protocol.Invalid, "body must be {defaultAutonomy, externalGates, workspaceOverrides}"))
		return
	}
	d, _, ok := h.load(w, r)
	if !ok {
		return
	}
	p := d.Permissions.fill()
	switch {
	case body.DefaultAutonomy != nil:
		switch *body.DefaultAutonomy {
		case "normal", "trusted", "yolo":
			p.DefaultAutonomy = *body.DefaultAutonomy
		default:
			respond.Error(w, h.d.Log, protocol.Errorf(protocol.Invalid, "defaultAutonomy must be one of normal, trusted, yolo"))
			return
		}
	case body.YoloMode != nil:
		p.DefaultAutonomy = "normal"
		if *body.YoloMode {
			p.DefaultAutonomy = "yolo"
		}
	}
	if body.ExternalGates != nil {
		p.ExternalGates = body.ExternalGates
	}
	if body.WorkspaceOverrides != nil {
		p.WorkspaceOverrides = body.WorkspaceOverrides
	}
	v, err := json.Marshal(p)
	if err != nil {
		respond.Error(w, h.d.Log, err)
		return
	}
	if _, ok := forward.Call(h.d, w, r, protocol.PatchSettings, protocol.SettingsPatch{Set: map[string]json.RawMessage{"permissions": v}}); !ok {
		return
	}
	respond.JSON(w, http.StatusOK, p)
}

// testKey is POST /api/settings/test-key {provider, apiKey}: the key is
// tried against the configured model server's /models (the only server
// this core calls), answering {valid, error?}. The key is not saved.
func (h handlers) testKey(w http.ResponseWriter, r *http.Request) {
	f, err := input.Decode(w, r, h.d.BodyLimit)
	if err != nil {
		respond.Error(w, h.d.Log, err)
		return
	}
	provider, _, ok1 := f.Str("provider")
	key, _, ok2 := f.Str("apiKey")
	if !ok1 || !ok2 || provider == "" || key == "" {
		respond.Error(w, h.d.Log, protocol.Errorf(protocol.Invalid, "provider and apiKey are required"))
		return
	}
	valid, why := h.try(r.Context(), key)
	out := map[string]any{"valid": valid, "provider": provider}
	if !valid {
		out["error"] = why
	}
	respond.JSON(w, http.StatusOK, out)
}

func (h handlers) try(ctx context.Context, key string) (bool, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(h.cfg.LLMURL, "/")+"/models", nil)
	if err != nil {
		return false, "the model server URL is not valid"
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := h.cfg.Client.Do(req)
	if err != nil {
		return false, "the model server did not answer"
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return false, "the model server refused this key"
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return false, fmt.Sprintf("the model server answered HTTP %d", resp.StatusCode)
	}
	return true, ""
}

// knownProviders are the providers the app offers keys for.
var knownProviders = []struct{ id, name string }{
	{"anthropic", "Anthropic"}, {"openai", "OpenAI"}, {"google", "Google"}, {"mistral", "Mistral"},
	{"deepseek", "DeepSeek"}, {"xai", "xAI"}, {"alibaba", "Alibaba / Qwen"}, {"openrouter", "OpenRouter"},
}

// ProviderInfo is one entry of GET /api/providers.
type ProviderInfo struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	RequiresKey bool     `json:"requiresKey"`
	HasKey      bool     `json:"hasKey"`
	Reachable   *bool    `json:"reachable,omitempty"`
	Models      []string `json:"models"`
	Badge       string   `json:"badge,omitempty"`
}

// providers is GET /api/providers: the configured model server (its
// models as it lists them) and the providers whose keys the vault holds.
func (h handlers) providers(w http.ResponseWriter, r *http.Request) {
	st := h.cfg.Probe.Check(r.Context())
	have := map[string]bool{}
	sc, _ := teamauth.ScopeFrom(r.Context())
	if sc.User == "" {
		vault, ok := forward.Call(h.d, w, r, protocol.ListVault, protocol.VaultListRequest{})
		if !ok {
			return
		}
		for _, e := range vault.Secrets {
			have[e.Name] = true
		}
	}
	reachable := st.Reachable
	server := ProviderInfo{ID: "waggle", Name: "Model server (" + hostOf(h.cfg.LLMURL) + ")", RequiresKey: false,
		HasKey: have[protocol.VaultLLMKeyName] || reachable, Reachable: &reachable, Models: orEmpty(st.Models)}
	if reachable {
		server.Badge = strconv.Itoa(len(st.Models)) + " models"
	} else {
		server.Badge = "Not reachable"
	}
	out := []ProviderInfo{server}
	for _, p := range knownProviders {
		out = append(out, ProviderInfo{ID: p.id, Name: p.name, RequiresKey: true, HasKey: have[p.id], Models: []string{}})
	}
	respond.JSON(w, http.StatusOK, map[string]any{"providers": out, "search": []any{}, "activeSearch": ""})
}

func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	return raw
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// models is GET /api/litellm/models: {models: [...]} as the model server
// lists them ([] when it does not answer).
func (h handlers) models(w http.ResponseWriter, r *http.Request) {
	st := h.cfg.Probe.Check(r.Context())
	respond.JSON(w, http.StatusOK, map[string]any{"models": orEmpty(st.Models)})
}

// status is GET /api/litellm/status: {running, port, error?} for the
// configured model server.
func (h handlers) status(w http.ResponseWriter, r *http.Request) {
	st := h.cfg.Probe.Check(r.Context())
	out := map[string]any{"running": st.Reachable, "port": port(h.cfg.LLMURL), "url": h.cfg.LLMURL}
	if !st.Reachable {
		out["error"] = "the model server did not answer (" + st.Detail + ")"
	}
	respond.JSON(w, http.StatusOK, out)
}

func port(raw string) int {
	u, err := url.Parse(raw)
	if err != nil {
		return 0
	}
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return p
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

// Price is one entry of GET /api/litellm/pricing.
type Price struct {
	Model       string  `json:"model"`
	InputPer1k  float64 `json:"inputPer1k"`
	OutputPer1k float64 `json:"outputPer1k"`
	Provider    string  `json:"provider"`
}

// pricing is GET /api/litellm/pricing: config.json's prices (dollars per
// thousand tokens, as the runner counts them).
func (h handlers) pricing(w http.ResponseWriter, r *http.Request) {
	d, _, ok := h.load(w, r)
	if !ok {
		return
	}
	out := []Price{}
	for model, raw := range d.Prices {
		var p struct {
			Input  float64 `json:"input"`
			Output float64 `json:"output"`
		}
		if json.Unmarshal(raw, &p) != nil {
			continue
		}
		out = append(out, Price{Model: model, InputPer1k: p.Input, OutputPer1k: p.Output, Provider: "waggle"})
	}
	respond.JSON(w, http.StatusOK, out)
}

// tier is GET /api/tier: this core gates no feature, so it answers the
// original's highest tier with every capability unlimited.
func (h handlers) tier(w http.ResponseWriter, r *http.Request) {
	caps := map[string]any{
		"connectorLimit": -1, "workspaceLimit": -1, "embeddingProviders": []string{"openai", "litellm"},
		"embeddingQuotaPerMonth": -1, "messageHistoryLimit": -1, "spawnAgents": true, "customSkills": true,
		"teamSkillLibrary": true, "cloudSync": false, "exportFormats": []string{"md", "json"},
		"teamMembersLimit": -1, "sharedWorkspaces": true, "adminPanel": true, "auditLog": "full",
		"selfHosted": true, "managedModelPool": false, "priorityModels": true, "kvarkCta": "none", "stripePriceId": nil,
	}
	respond.JSON(w, http.StatusOK, map[string]any{
		"tier": "ENTERPRISE", "rawTier": "ENTERPRISE", "trialStartedAt": nil, "trialDaysRemaining": 0, "trialExpired": false,
		"capabilities": caps, "teamsServerUrl": nil, "teamsServerAvailable": false, "usage": map[string]any{},
		"limits": map[string]any{"maxWorkspaces": -1, "maxSessions": -1, "maxMembers": -1, "features": map[string]bool{
			"teams": true, "marketplace": false, "budgetControls": true, "kvark": false, "governance": true, "customModels": true}},
	})
}
