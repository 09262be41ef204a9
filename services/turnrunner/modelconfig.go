package turnrunner

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/llmprobe"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
)

// settingsCache keeps config.json's settings between turns. The session
// store owns the file (DESIGN: one reader and writer); the runner asks it
// over the bus at most once per check interval, and at once after the
// store announces a change (protocol.SettingsChanges), so a setting saved
// in the app applies to the next turn without a restart. When the store
// does not answer, the last settings stay in force.
//
// It also keeps the model server's key from the vault, used when no key
// is configured (--llm-api-key, config.json apiKeys): asked per model,
// cached like the settings; and web search providers' keys, per team.
type settingsCache struct {
	every   time.Duration
	timeout time.Duration
	log     *slog.Logger
	nc      atomic.Pointer[nats.Conn]

	mu       sync.Mutex
	checked  time.Time
	reported string // the last settings error logged
	doc      json.RawMessage
	cfg      agent.ModelConfig
	keys     map[string]vaultKey // by model and workspace, or by team and search provider
	// lastKey is the last key found in the local vault (a workspace of no
	// team), for the probe: a team's key is used for that team's turns
	// only, never to probe for everyone.
	lastKey string
}

type vaultKey struct {
	reply   protocol.ModelKeyReply
	checked time.Time
}

func newSettingsCache(every, timeout time.Duration, log *slog.Logger) *settingsCache {
	return &settingsCache{every: every, timeout: timeout, log: log, keys: map[string]vaultKey{}}
}

// connect starts asking the store over nc.
func (c *settingsCache) connect(nc *nats.Conn) { c.nc.Store(nc) }

// invalidate makes the next Get (and, for a vault change, the next key
// lookup) ask the store.
func (c *settingsCache) invalidate(ev protocol.SettingsChanged) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ev.Vault {
		clear(c.keys)
		return
	}
	c.checked = time.Time{}
}

// Get returns the current model config.
func (c *settingsCache) Get() agent.ModelConfig {
	c.refresh()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg
}

// AutoSaveOn reads the switch in config.json: "autoSave" (all
// workspaces; default true) and "autoSaveWorkspaces" ({"<id>": false}
// per workspace, which wins). Unknown or unreadable is on.
func (c *settingsCache) AutoSaveOn(workspace string) bool {
	c.refresh()
	c.mu.Lock()
	doc := c.doc
	c.mu.Unlock()
	var cfg struct {
		AutoSave           *bool           `json:"autoSave"`
		AutoSaveWorkspaces map[string]bool `json:"autoSaveWorkspaces"`
	}
	if json.Unmarshal(doc, &cfg) != nil {
		return true
	}
	if on, ok := cfg.AutoSaveWorkspaces[workspace]; ok {
		return on
	}
	return cfg.AutoSave == nil || *cfg.AutoSave
}

// refresh asks the store when the cached settings are older than the
// check interval.
func (c *settingsCache) refresh() {
	nc := c.nc.Load()
	if nc == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.checked.IsZero() && time.Since(c.checked) < c.every {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	rep, err := bus.Call(ctx, nc, protocol.GetSettings, protocol.Empty{})
	if err != nil {
		c.log.Warn("settings unavailable; keeping the last ones", "err", err)
		return
	}
	c.checked = time.Now()
	if rep.Error != c.reported {
		if rep.Error != "" {
			c.log.Warn("config.json invalid; the store keeps the last good one", "err", rep.Error)
		}
		c.reported = rep.Error
	}
	var mc agent.ModelConfig
	if err := json.Unmarshal(rep.Doc, &mc); err != nil {
		// A field of the wrong type (a hand edit): keep what worked.
		c.log.Warn("config.json model settings invalid; keeping the last ones", "err", err)
		return
	}
	if err := mc.WebSearch.Check(); err != nil {
		// The rest of the file is good: only web_search is left out.
		c.log.Warn("web search configuration unusable; web_search is not offered", "err", err)
	}
	c.doc, c.cfg = rep.Doc, mc
}

// ModelKey returns the vault's key for model for a turn in workspace
// ("" when it has none or the store does not answer). The store picks the
// vault of the workspace's team.
func (c *settingsCache) ModelKey(ctx context.Context, workspace, model string) string {
	rep := c.vaultKey(ctx, "model\x00"+workspace+"\x00"+model, func(ctx context.Context, nc *nats.Conn) (protocol.ModelKeyReply, error) {
		return bus.Call(ctx, nc, protocol.ResolveModelKey, protocol.ModelKeyRequest{Model: model, Workspace: workspace})
	})
	if rep.Key != "" && rep.Team == "" {
		c.mu.Lock()
		c.lastKey = rep.Key
		c.mu.Unlock()
	}
	return rep.Key
}

// SearchKey returns web search provider's key in team's vault ("" the
// local one; "" when it has none or the store does not answer).
func (c *settingsCache) SearchKey(ctx context.Context, team, provider string) string {
	return c.vaultKey(ctx, "search\x00"+team+"\x00"+provider, func(ctx context.Context, nc *nats.Conn) (protocol.ModelKeyReply, error) {
		return bus.Call(ctx, nc, protocol.ResolveSearchKey, protocol.SearchKeyRequest{Team: team, Provider: provider})
	}).Key
}

// vaultKey asks the vault through ask, caching the answer (a key or
// none) under name for the check interval or until the vault changes.
// The key itself is never logged.
func (c *settingsCache) vaultKey(ctx context.Context, name string, ask func(context.Context, *nats.Conn) (protocol.ModelKeyReply, error)) protocol.ModelKeyReply {
	nc := c.nc.Load()
	if nc == nil {
		return protocol.ModelKeyReply{}
	}
	c.mu.Lock()
	if k, ok := c.keys[name]; ok && time.Since(k.checked) < c.every {
		c.mu.Unlock()
		return k.reply
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	rep, err := ask(ctx, nc)
	if err != nil {
		c.log.Warn("vault unavailable for a key", "err", err)
		return protocol.ModelKeyReply{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.keys) > 256 {
		clear(c.keys)
	}
	c.keys[name] = vaultKey{reply: rep, checked: time.Now()}
	return rep
}

// probeKey is the key the model-server probe sends when none is
// configured: the last key the local vault gave.
func (c *settingsCache) probeKey() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastKey
}

// fallbackModel is the model of a turn that nothing names (neither the
// request, the workspace nor config.json): --model, else agent's
// DefaultModel — unless the model server lists models and not that one
// (Ollama serves no claude-sonnet-4-6), then the first it lists.
func (s *Service) fallbackModel() string {
	if s.cfg.Model != "" {
		return s.cfg.Model
	}
	if st := s.probe.Last(); !st.Lists(agent.DefaultModel) {
		return st.Models[0]
	}
	return agent.DefaultModel
}

// reportModelServer logs each new outcome of the model-server probe: at
// start and whenever reachability or the model list changes. A configured
// model the server does not list is a warning naming it (every turn that
// uses it would fail).
func (s *Service) reportModelServer(st llmprobe.Status) {
	if !st.Reachable {
		s.log.Warn("the model server did not answer: turns run in echo mode until it does (set --llm-url / WAGGLE_LLM_URL)",
			"url", s.cfg.LLMURL, "detail", st.Detail)
		return
	}
	s.log.Info("the model server answered", "url", s.cfg.LLMURL, "models", len(st.Models))
	configured, source := s.models.Get().DefaultModel, "config.json defaultModel"
	if configured == "" {
		configured, source = s.cfg.Model, "--model"
	}
	switch {
	case configured != "" && !st.Lists(configured):
		s.log.Warn("the configured model is not served by the model server: turns that use it will fail",
			"model", configured, "from", source, "served", firstModels(st.Models))
	case configured == "" && !st.Lists(agent.DefaultModel):
		s.log.Info("no model configured and the model server does not serve the default: using its first model",
			"default", agent.DefaultModel, "model", st.Models[0])
	}
}

// firstModels is a short list of model ids for a log line.
func firstModels(ids []string) []string { return ids[:min(len(ids), 10)] }

// onSettingsChanged drops the cached settings (or vault keys) so the next
// turn asks the store; a vault change also re-probes the model server,
// which may have refused the old key.
func (s *Service) onSettingsChanged(ev protocol.SettingsChanged) {
	s.models.invalidate(ev)
	if ev.Vault {
		s.probe.Forget()
	}
}

// checkModelServer is the runner's probe for a gateway that has no key of
// its own: with no key configured, the local vault's is looked up first
// (as a turn does), so the answer is the one turns get.
func (s *Service) checkModelServer(ctx context.Context, _ protocol.Empty) (protocol.ModelServerStatus, error) {
	if s.cfg.LLMAPIKey == "" && !s.probe.Last().Reachable {
		s.models.ModelKey(ctx, "", "")
	}
	return protocol.ModelServerStatus(s.probe.Check(ctx)), nil
}
