// Package mcpapi serves GET /api/mcp/servers: the MCP tool servers a
// workspace's turns can use, with their state and tools, as one turn
// runner sees them (each runner keeps its own connections).
package mcpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/forward"
	"github.com/waggle-os/core/services/gateway/internal/input"
	"github.com/waggle-os/core/services/gateway/internal/respond"
)

// Mount adds the routes to r (mounted at /api).
func Mount(r chi.Router, d forward.Deps) {
	h := handlers{d: d}
	r.Get("/mcp/servers", h.servers)
}

type handlers struct{ d forward.Deps }

// servers answers {runner, servers: [{name, scope, transport, state,
// error?, restarts, tools: [{name, tool, description, gated}]}],
// configErrors?}. ?workspace= adds that workspace's own servers.
func (h handlers) servers(w http.ResponseWriter, r *http.Request) {
	ws := r.URL.Query().Get("workspace")
	if ws != "" {
		if err := input.CheckSegment("workspace", ws); err != nil {
			respond.Error(w, h.d.Log, err)
			return
		}
	}
	rep, ok := forward.Call(h.d, w, r, protocol.ListMCPServers, protocol.MCPServersRequest{Workspace: ws})
	if !ok {
		return
	}
	if rep.Servers == nil {
		rep.Servers = []protocol.MCPServerStatus{}
	}
	respond.JSON(w, http.StatusOK, rep)
}
