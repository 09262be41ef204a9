// Package settings keeps, between turns, what a turn reads of other
// services' settings: config.json's model settings and the vault's keys
// (asked of the session store) and the teams' tool policies (asked of the
// teams service), each asked again after its change event or a short
// while.
package settings

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
)

// Cache keeps config.json's settings between turns. The session
// store owns the file (DESIGN: one reader and writer); the runner asks it
// over the bus at most once per check interval, and at once after the
// store announces a change (protocol.SettingsChanges), so a setting saved
// in the app applies to the next turn without a restart. When the store
// does not answer, the last settings stay in force.
//
// It also keeps the model server's key from the vault, used when no key
// is configured (--llm-api-key, config.json apiKeys): asked per model,
// cached like the settings; and web search providers' keys, per team.
type Cache struct {
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

// New returns a cache that asks the store at most once per every, each
// request bounded by timeout; it asks nothing before Connect.
func New(every, timeout time.Duration, log *slog.Logger) *Cache {
	return &Cache{every: every, timeout: timeout, log: log, keys: map[string]vaultKey{}}
}

// Connect starts asking the store over nc.
func (c *Cache) Connect(nc *nats.Conn) { c.nc.Store(nc) }

// Invalidate makes the next Get (and, for a vault change, the next key
// lookup) ask the store.
func (c *Cache) Invalidate(ev protocol.SettingsChanged) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ev.Vault {
		clear(c.keys)
		return
	}
	c.checked = time.Time{}
}

// Get returns the current model config.
func (c *Cache) Get() agent.ModelConfig {
	c.refresh()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg
}

// AutoSaveOn reads the switch in config.json: "autoSave" (all
// workspaces; default true) and "autoSaveWorkspaces" ({"<id>": false}
// per workspace, which wins). Unknown or unreadable is on.
func (c *Cache) AutoSaveOn(workspace string) bool {
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
func (c *Cache) refresh() {
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
func (c *Cache) ModelKey(ctx context.Context, workspace, model string) string {
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
func (c *Cache) SearchKey(ctx context.Context, team, provider string) string {
	return c.vaultKey(ctx, "search\x00"+team+"\x00"+provider, func(ctx context.Context, nc *nats.Conn) (protocol.ModelKeyReply, error) {
		return bus.Call(ctx, nc, protocol.ResolveSearchKey, protocol.SearchKeyRequest{Team: team, Provider: provider})
	}).Key
}

// vaultKey asks the vault through ask, caching the answer (a key or
// none) under name for the check interval or until the vault changes.
// The key itself is never logged.
func (c *Cache) vaultKey(ctx context.Context, name string, ask func(context.Context, *nats.Conn) (protocol.ModelKeyReply, error)) protocol.ModelKeyReply {
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

// ProbeKey is the key the model-server probe sends when none is
// configured: the last key the local vault gave.
func (c *Cache) ProbeKey() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastKey
}
