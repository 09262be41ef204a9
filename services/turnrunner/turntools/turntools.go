// Package turntools chooses the tools one agent turn offers its model and
// its sub-agents: the built-in tools bound to the turn, less what the
// team's policy blocks, then the MCP servers' tools, filtered by the
// turn's persona; and the turn's web search provider and key.
package turntools

import (
	"context"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/agentcontext"
	"github.com/waggle-os/core/services/turnrunner/mcp"
	"github.com/waggle-os/core/services/turnrunner/tools"
)

// Offer is what a turn offers.
type Offer struct {
	// MCP is the workspace's MCP tools bound to the turn (its Gate wraps
	// the turn's approval gate).
	MCP *mcp.ToolSet
	// Offered is what the model is offered; Workers what the turn's
	// sub-agents draw from; Blocked what the model is told it may not use.
	Offered, Workers []agent.Tool
	Blocked          []string
}

// Choose is the tools the turn offers the model: the built-ins of reg
// bound to env that policy and persona allow, then the MCP servers' tools
// of env's workspace bound by mgr (none for a read-only or delegating
// persona: what they do is not known here); workers draw from the same,
// but for a delegating persona from the tools before its filter (policy
// still applied), as its workers do the work it does not. step shows an
// MCP server's trouble as a step of the turn.
func Choose(ctx context.Context, reg *tools.Registry, mgr *mcp.Manager, env tools.Env, step func(string), persona agentcontext.Persona, policy protocol.ToolPolicy) Offer {
	bound := reg.Bind(env, nil)
	builtIns := make([]agent.Tool, 0, len(bound))
	for _, b := range bound {
		if !policy.Blocks(b.Name()) {
			builtIns = append(builtIns, b)
		}
	}
	var o Offer
	if policy.Governed {
		o.Blocked = policy.BlockedTools
	}
	// The MCP tools the team's policy blocks (by tool or by server) are
	// added to Blocked, so a call to one reads as a governance block.
	o.MCP = mgr.Bind(ctx, env.Workspace, step)
	pool := builtIns
	for _, mt := range o.MCP.Tools() {
		if policy.BlocksMCP(mt.Name()) {
			o.Blocked = append(o.Blocked, mt.Name())
			continue
		}
		pool = append(pool, mt)
	}
	o.Offered, o.Workers = PersonaTools(pool, len(builtIns), persona)
	return o
}

// PersonaTools splits pool — nBuiltIn built-ins, then MCP tools — into
// what persona's turn is offered and what its sub-agents draw from.
func PersonaTools(pool []agent.Tool, nBuiltIn int, persona agentcontext.Persona) (offered, workers []agent.Tool) {
	strict := persona.ReadOnly || persona.Delegates
	offered = make([]agent.Tool, 0, len(pool))
	for i, tool := range pool {
		// The persona's lists name built-ins only, so they do not filter
		// MCP tools; a strict persona gets none.
		builtIn := i < nBuiltIn
		if builtIn && persona.Allows(tool.Name()) || !builtIn && !strict {
			offered = append(offered, tool)
		}
	}
	if persona.Delegates && !persona.ReadOnly {
		return offered, pool
	}
	return offered, offered
}

// WebSearch is the turn's web search provider: config.json's (cfg), its
// API key from the vault of the workspace's team (the local vault on a
// desktop) when the file has none; with no provider in the file, the
// first of Tavily and Brave whose key the vault holds (the desktop app's
// Settings > Vault). key reads the vault. The key goes to the provider
// only: never logged, never in a result.
func WebSearch(cfg tools.WebSearchConfig, key func(provider string) string) tools.WebSearchConfig {
	if cfg.Provider != "" {
		if cfg.APIKey == "" && protocol.VaultSearchKeyNames(cfg.Provider) != nil {
			cfg.APIKey = key(cfg.Provider)
		}
		return cfg
	}
	for _, p := range []string{tools.SearchTavily, tools.SearchBrave} {
		if k := key(p); k != "" {
			return tools.WebSearchConfig{Provider: p, APIKey: k}
		}
	}
	return cfg
}
