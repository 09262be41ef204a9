package protocol

import "strings"

// MCPToolPrefix starts the name of every MCP tool offered to the model:
// mcp__<server>__<tool>.
const MCPToolPrefix = "mcp__"

// mcpSep separates the server from the tool in an MCP tool name.
const mcpSep = "__"

// MCPToolName is the name the model sees for tool of server.
func MCPToolName(server, tool string) string { return MCPToolPrefix + server + mcpSep + tool }

// ParseMCPToolName splits an MCP tool name into its server and tool. Server
// names never contain "__", so the first separator after the prefix is the
// boundary.
func ParseMCPToolName(name string) (server, tool string, ok bool) {
	rest, found := strings.CutPrefix(name, MCPToolPrefix)
	if !found {
		return "", "", false
	}
	server, tool, found = strings.Cut(rest, mcpSep)
	if !found || server == "" || tool == "" {
		return "", "", false
	}
	return server, tool, true
}

// MCPServerBlockName is the policy entry that blocks every tool of server.
func MCPServerBlockName(server string) string { return MCPToolPrefix + server }

// BlocksMCP reports whether the policy blocks an MCP tool: by its full name
// or through its server's entry (MCPServerBlockName). Other names are
// judged by Blocks alone.
func (p ToolPolicy) BlocksMCP(name string) bool {
	if p.Blocks(name) {
		return true
	}
	server, _, ok := ParseMCPToolName(name)
	return ok && p.Blocks(MCPServerBlockName(server))
}

// MCP server states.
const (
	MCPStateConnecting = "connecting"
	MCPStateConnected  = "connected"
	// MCPStateError is a server that failed to start or crashed; it is
	// retried with backoff (Error says why).
	MCPStateError = "error"
	// MCPStateRefused is a server this runner will not start (a stdio
	// server on a team server without a sandbox, an invalid entry); it is
	// not retried until its config changes.
	MCPStateRefused = "refused"
)

// MCPServersRequest asks for the MCP servers of Workspace's turns (the
// global ones plus the workspace's own); an empty Workspace lists the
// global ones.
type MCPServersRequest struct {
	Workspace string `json:"workspace,omitempty"`
}

// MCPServersReply lists the servers by name.
type MCPServersReply struct {
	// Runner names the runner that answered (each keeps its own connections).
	Runner  string            `json:"runner"`
	Servers []MCPServerStatus `json:"servers"`
	// ConfigErrors are config documents that could not be read (their
	// servers keep running as they were).
	ConfigErrors []string `json:"configErrors,omitempty"`
}

// MCPServerStatus is one server as a runner sees it. Secrets (env values,
// headers) are never included.
type MCPServerStatus struct {
	Name string `json:"name"`
	// Scope is "global" (config.json) or "workspace" (workspace.json).
	Scope string `json:"scope"`
	// Transport is "stdio" or "http".
	Transport string `json:"transport"`
	State     string `json:"state"`
	// Error is why the server is not connected (state error or refused).
	Error string `json:"error,omitempty"`
	// Restarts counts the restarts after crashes since the server was
	// configured.
	Restarts int           `json:"restarts"`
	Tools    []MCPToolInfo `json:"tools"`
}

// MCPToolInfo is one tool of a server.
type MCPToolInfo struct {
	// Name is the name the model calls (mcp__<server>__<tool>).
	Name string `json:"name"`
	// Tool is the server's own name for it.
	Tool        string `json:"tool"`
	Description string `json:"description,omitempty"`
	// Gated is false for a tool the server's trust setting lets run
	// without an approval.
	Gated bool `json:"gated"`
}
