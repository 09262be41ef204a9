package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

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

// MCPStateIdle is a configured workspace server that is not running: it
// starts with the workspace's next turn. Listing servers never starts one.
const MCPStateIdle = "idle"

// MCPServersField is the workspace config field holding its MCP servers.
// Only SetWorkspaceMCPServers writes it; workspace create and update refuse
// it, since what it names runs code or is called by the server.
const MCPServersField = "mcpServers"

// MCPServersRoute is the HTTP route that sets a workspace's MCP servers,
// named in the error of a workspace create or update that carries them.
const MCPServersRoute = "PUT /api/workspaces/{id}/mcp-servers"

// WorkspaceMCPServers is a workspace's MCP servers: the request and the
// reply of SetWorkspaceMCPServers. Servers is a validated "mcpServers"
// object (ParseMCPServers); null or {} removes them.
type WorkspaceMCPServers struct {
	Workspace string          `json:"workspace"`
	Servers   json.RawMessage `json:"mcpServers"`
}

// MCPConfigChanged is the body of MCPConfigChanges.
type MCPConfigChanged struct {
	Workspace string `json:"workspace"`
	// Deleted is set when the workspace itself is gone.
	Deleted bool `json:"deleted,omitempty"`
}

// MCPServerEntry is one member of an "mcpServers" object as the API
// accepts it (Claude Desktop's format plus Waggle's fields): a stdio server
// (Command, Args, Env) or a Streamable HTTP one (URL, Headers, Bearer).
// The runner's own type (turnrunner/mcp.ServerConfig) has the same fields.
type MCPServerEntry struct {
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Bearer  string            `json:"bearer,omitempty"`
	// Type is "stdio", "http", "streamable-http" or "streamableHttp".
	Type string `json:"type,omitempty"`
	// Trust is "readOnly" or a list of tool names.
	Trust    json.RawMessage `json:"trust,omitempty"`
	Timeout  float64         `json:"timeout,omitempty"`
	Disabled bool            `json:"disabled,omitempty"`
}

// ValidMCPServerName reports a usable server name: a protocol ID (so it
// fits a tool name and a policy entry) of at most 32 characters without
// "__", which separates the server from the tool.
func ValidMCPServerName(name string) bool {
	return ValidID(name) && !strings.Contains(name, mcpSep) && len(name) <= 32
}

// ParseMCPServers decodes an "mcpServers" object strictly: every name
// valid, every entry an object with known fields of the right types (no
// unknown or duplicate keys) naming exactly one transport. null is no
// servers. The error (Invalid) names the entry and what is wrong.
func ParseMCPServers(raw json.RawMessage) (map[string]MCPServerEntry, error) {
	raw = bytes.TrimSpace(raw)
	out := map[string]MCPServerEntry{}
	if len(raw) == 0 || string(raw) == "null" {
		return out, nil
	}
	if raw[0] != '{' {
		return nil, Errorf(Invalid, "mcpServers must be an object of servers by name")
	}
	if err := noDuplicateKeys(raw); err != nil {
		return nil, Errorf(Invalid, "mcpServers: %v", err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return nil, Errorf(Invalid, "mcpServers must be an object of servers by name")
	}
	for name, m := range members {
		if !ValidMCPServerName(name) {
			return nil, Errorf(Invalid, "mcpServers: server name %q: use letters, digits, '-' and '_' (no \"__\", at most 32)", name)
		}
		e, err := parseMCPEntry(m)
		if err != nil {
			return nil, Errorf(Invalid, "mcpServers.%s: %v", name, err)
		}
		out[name] = e
	}
	return out, nil
}

func parseMCPEntry(raw json.RawMessage) (MCPServerEntry, error) {
	var e MCPServerEntry
	if b := bytes.TrimSpace(raw); len(b) == 0 || b[0] != '{' {
		return e, errors.New("must be an object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return e, fmt.Errorf("%s has the wrong type", typeErr.Field)
		}
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return e, fmt.Errorf("unknown field %s", f)
		}
		return e, errors.New("must be an object")
	}
	if len(e.Trust) > 0 && string(e.Trust) != "null" {
		var s string
		var names []string
		if json.Unmarshal(e.Trust, &s) == nil {
			if s != "readOnly" {
				return e, errors.New(`trust must be "readOnly" or a list of tool names`)
			}
		} else if json.Unmarshal(e.Trust, &names) != nil {
			return e, errors.New(`trust must be "readOnly" or a list of tool names`)
		}
	}
	if e.Timeout < 0 {
		return e, errors.New("timeout must not be negative")
	}
	stdio := e.Command != ""
	web := e.URL != ""
	switch e.Type {
	case "":
	case "stdio":
		if !stdio || web {
			return e, errors.New(`a "stdio" server needs "command" and no "url"`)
		}
	case "http", "streamable-http", "streamableHttp":
		if !web || stdio {
			return e, errors.New(`an "http" server needs "url" and no "command"`)
		}
	default:
		return e, errors.New(`type must be "stdio" or "http" (the legacy SSE transport is not supported)`)
	}
	switch {
	case stdio == web:
		return e, errors.New(`needs either "command" (stdio) or "url" (Streamable HTTP)`)
	case web:
		if len(e.Args) > 0 || len(e.Env) > 0 {
			return e, errors.New(`"args" and "env" belong to a stdio server`)
		}
		u, err := url.Parse(e.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return e, errors.New("url must be an http(s) URL")
		}
	default:
		if len(e.Headers) > 0 || e.Bearer != "" {
			return e, errors.New(`"headers" and "bearer" belong to an HTTP server`)
		}
	}
	return e, nil
}

// noDuplicateKeys refuses an object with a key twice at its top level (Go's
// decoder would keep the last one silently, so two readers could disagree).
func noDuplicateKeys(raw json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		if seen[key] {
			return fmt.Errorf("server %q is named twice", key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	return nil
}
