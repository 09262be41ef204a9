package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

// ServerConfig is one entry of an "mcpServers" object, in Claude Desktop's
// format: a command the runner starts (stdio) or a URL (Streamable HTTP),
// plus Waggle's own optional fields.
type ServerConfig struct {
	// Command and Args start a stdio server; Env is added to its
	// environment.
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// URL is a Streamable HTTP endpoint; Headers are sent with every
	// request and Bearer, when set, as "Authorization: Bearer <Bearer>".
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Bearer  string            `json:"bearer,omitempty"`
	// Type is optional ("stdio", "http" or "streamable-http"); the
	// transport otherwise follows from Command or URL.
	Type string `json:"type,omitempty"`
	// Trust lets some tools run without an approval: "readOnly" trusts the
	// tools the server marks read-only (annotations.readOnlyHint), a list
	// trusts the tools named in it.
	Trust Trust `json:"trust,omitzero"`
	// Timeout is the per-call time limit in seconds (default the manager's
	// CallTimeout, 60s).
	Timeout float64 `json:"timeout,omitempty"`
	// Disabled keeps the entry without starting the server.
	Disabled bool `json:"disabled,omitempty"`
}

// Trust is a server's "trust" setting.
type Trust struct {
	// ReadOnly trusts every tool annotated readOnlyHint.
	ReadOnly bool
	// Tools are trusted by their server-side name.
	Tools []string
}

// trustReadOnly is the string form of Trust.ReadOnly.
const trustReadOnly = "readOnly"

// UnmarshalJSON reads "readOnly" or a list of tool names.
func (t *Trust) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		*t = Trust{}
		return nil
	}
	var s string
	if json.Unmarshal(b, &s) == nil {
		if s != trustReadOnly {
			return fmt.Errorf("trust must be %q or a list of tool names, not %q", trustReadOnly, s)
		}
		*t = Trust{ReadOnly: true}
		return nil
	}
	var names []string
	if err := json.Unmarshal(b, &names); err != nil {
		return fmt.Errorf("trust must be %q or a list of tool names", trustReadOnly)
	}
	*t = Trust{Tools: names}
	return nil
}

// MarshalJSON writes the form UnmarshalJSON reads.
func (t Trust) MarshalJSON() ([]byte, error) {
	if t.ReadOnly {
		return json.Marshal(trustReadOnly)
	}
	return json.Marshal(t.Tools)
}

// IsZero reports a trust that trusts nothing.
func (t Trust) IsZero() bool { return !t.ReadOnly && len(t.Tools) == 0 }

// trusts reports whether the server-side tool may run ungated.
func (t Trust) trusts(tool string, readOnlyHint bool) bool {
	return (t.ReadOnly && readOnlyHint) || slices.Contains(t.Tools, tool)
}

// Transports.
const (
	transportStdio = "stdio"
	transportHTTP  = "http"
)

// transport is the entry's transport ("" when it names none or both).
func (c ServerConfig) transport() string {
	switch c.Type {
	case "stdio":
		return transportStdio
	case "http", "streamable-http", "streamableHttp":
		return transportHTTP
	case "":
	default:
		return ""
	}
	switch {
	case c.Command != "" && c.URL == "":
		return transportStdio
	case c.URL != "" && c.Command == "":
		return transportHTTP
	}
	return ""
}

// validate reports an entry the runner cannot start.
func (c ServerConfig) validate() error {
	switch c.transport() {
	case transportStdio:
		if c.Command == "" {
			return errors.New("a stdio server needs a command")
		}
	case transportHTTP:
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("url must be an http(s) URL")
		}
	default:
		if c.Type == "sse" {
			return errors.New("the legacy SSE transport is not supported; use the server's Streamable HTTP endpoint")
		}
		return errors.New(`needs either "command" (stdio) or "url" (Streamable HTTP)`)
	}
	if c.Timeout < 0 {
		return errors.New("timeout must not be negative")
	}
	return nil
}

// callTimeout is the entry's call limit, or def.
func (c ServerConfig) callTimeout(def time.Duration) time.Duration {
	if c.Timeout > 0 {
		return time.Duration(c.Timeout * float64(time.Second))
	}
	return def
}

// equal reports whether two entries start the same server the same way.
func (c ServerConfig) equal(o ServerConfig) bool {
	a, _ := json.Marshal(c)
	b, _ := json.Marshal(o)
	return bytes.Equal(a, b)
}

// entry is one parsed "mcpServers" member: its config, or why it is unusable.
type entry struct {
	name string
	cfg  ServerConfig
	err  error
}

// validServerName is protocol.ValidMCPServerName: the API and the runner
// accept the same names.
func validServerName(name string) bool { return protocol.ValidMCPServerName(name) }

// parseServers reads the "mcpServers" member of a config document (the
// whole config.json or a workspace's config). A missing member is no
// servers; an unusable entry is kept with its error so it can be reported.
func parseServers(doc []byte) ([]entry, error) {
	var top struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	if len(bytes.TrimSpace(doc)) == 0 {
		return nil, nil
	}
	if err := json.Unmarshal(doc, &top); err != nil {
		return nil, fmt.Errorf("mcp: parse config: %w", err)
	}
	return parseServerMap(top.MCPServers), nil
}

// parseServerMap parses the entries of an "mcpServers" object, by name.
func parseServerMap(m map[string]json.RawMessage) []entry {
	names := slices.Collect(maps.Keys(m))
	sort.Strings(names)
	out := make([]entry, 0, len(names))
	for _, name := range names {
		e := entry{name: name}
		switch {
		case !validServerName(name):
			e.err = errors.New("server names may use letters, digits, '-' and '_' (no \"__\", at most 32)")
		default:
			dec := json.NewDecoder(bytes.NewReader(m[name]))
			if err := dec.Decode(&e.cfg); err != nil {
				e.err = fmt.Errorf("invalid entry: %w", err)
			} else if err := e.cfg.validate(); err != nil {
				e.err = err
			}
		}
		out = append(out, e)
	}
	return out
}
