// Package mcpapi serves the MCP routes: GET /api/mcp/servers, the MCP
// tool servers a workspace's turns can use, with their state and tools, as
// one turn runner sees them (each runner keeps its own connections); and
// GET/PUT /api/workspaces/{id}/mcp-servers, a workspace's own servers.
//
// What an mcpServers entry names runs on the server (a command) or is
// called by it (a URL), so it is never an ordinary workspace field:
// workspace create and update refuse it, and only this route sets it, for
// a trusted caller (trustedCaller; on a team server also an admin of the
// workspace's team, checked by teamauth before the handler).
package mcpapi

import (
	"encoding/json"
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
	r.Get("/workspaces/{id}/mcp-servers", h.workspaceServers)
	r.Put("/workspaces/{id}/mcp-servers", h.setWorkspaceServers)
}

type handlers struct{ d forward.Deps }

// servers answers {runner, servers: [{name, scope, transport, state,
// error?, restarts, tools: [{name, tool, description, gated}]}],
// configErrors?}. ?workspace= adds that workspace's own servers (idle
// when not running: listing starts nothing).
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

// ErrUntrustedCaller refuses the MCP configuration routes to a browser
// page of another origin, the desktop app's and operator-added origins
// included: only the server's own page or a non-browser client may read
// or set what the server runs.
var ErrUntrustedCaller = protocol.Errorf(protocol.Forbidden,
	"MCP servers can only be configured from this server's own page or a local client").WithCode("MCP_CONFIG_ORIGIN")

// trustedCaller reports whether r comes from a non-browser client (no
// Origin, no cross-site fetch metadata) or from a page of the server's
// own origin (the Origin's host is the request's Host, which the edge's
// Host check has already judged).
func trustedCaller(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return false
	}
	origin := r.Header.Get("Origin")
	return origin == "" || input.SameOrigin(origin, r.Host)
}

// workspaceServers answers {"mcpServers": {...}}, the workspace's own
// servers as configured (secrets included: trusted callers only).
func (h handlers) workspaceServers(w http.ResponseWriter, r *http.Request) {
	if !trustedCaller(r) {
		respond.Error(w, h.d.Log, ErrUntrustedCaller)
		return
	}
	id := chi.URLParam(r, "id")
	if err := input.CheckSegment("id", id); err != nil {
		respond.Error(w, h.d.Log, err)
		return
	}
	rep, ok := forward.Call(h.d, w, r, protocol.GetWorkspaceDoc, protocol.WorkspaceRequest{Workspace: id})
	if !ok {
		return
	}
	var doc struct {
		Servers json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal(rep.Workspace, &doc); err != nil {
		respond.Error(w, h.d.Log, err)
		return
	}
	respond.JSON(w, http.StatusOK, serversBody{Servers: orEmptyObject(doc.Servers)})
}

// serversBody is the body of both methods of the route.
type serversBody struct {
	Servers json.RawMessage `json:"mcpServers"`
}

// setWorkspaceServers replaces the workspace's servers with the body's
// {"mcpServers": {...}} (Claude Desktop's shape; {} or null removes
// them). The body is decoded strictly: no other field, every entry
// valid. Every runner applies the change at once (the store publishes
// protocol.MCPConfigChanges).
func (h handlers) setWorkspaceServers(w http.ResponseWriter, r *http.Request) {
	if !trustedCaller(r) {
		respond.Error(w, h.d.Log, ErrUntrustedCaller)
		return
	}
	id := chi.URLParam(r, "id")
	if err := input.CheckSegment("id", id); err != nil {
		respond.Error(w, h.d.Log, err)
		return
	}
	f, err := input.Decode(w, r, h.d.BodyLimit)
	if err != nil {
		respond.Error(w, h.d.Log, err)
		return
	}
	raw, present := f[protocol.MCPServersField]
	if !present || len(f) != 1 {
		respond.Error(w, h.d.Log, protocol.Errorf(protocol.Invalid, `body must be {"mcpServers": {...}} and nothing else`))
		return
	}
	servers, err := protocol.ParseMCPServers(raw)
	if err != nil {
		respond.Error(w, h.d.Log, err)
		return
	}
	value, err := json.Marshal(servers)
	if err != nil {
		respond.Error(w, h.d.Log, err)
		return
	}
	rep, ok := forward.Call(h.d, w, r, protocol.SetWorkspaceMCPServers, protocol.WorkspaceMCPServers{Workspace: id, Servers: value})
	if !ok {
		return
	}
	respond.JSON(w, http.StatusOK, serversBody{Servers: orEmptyObject(rep.Servers)})
}

func orEmptyObject(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage("{}")
	}
	return raw
}
