package protocol

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestParseMCPServers: the API takes Claude Desktop's shape and nothing
// looser: unknown or mistyped fields, two transports, a name twice or an
// unusable name are refused with the entry named.
func TestParseMCPServers(t *testing.T) {
	ok := []string{
		`null`, `{}`,
		`{"files": {"command": "npx", "args": ["-y", "x"], "env": {"A": "1"}, "trust": ["read"], "timeout": 5}}`,
		`{"gh": {"url": "https://example.com/mcp", "headers": {"X": "y"}, "bearer": "t", "trust": "readOnly", "type": "http"}}`,
		`{"off": {"command": "x", "disabled": true, "type": "stdio"}}`,
	}
	for _, raw := range ok {
		if _, err := ParseMCPServers(json.RawMessage(raw)); err != nil {
			t.Errorf("%s: %v", raw, err)
		}
	}
	bad := map[string]string{
		`[]`:                                    "object",
		`{"a": []}`:                             "mcpServers.a",
		`{"a": {"command": "x", "cmd": "y"}}`:   "unknown field",
		`{"a": {"command": 1}}`:                 "wrong type",
		`{"a": {"command": "x", "args": "-c"}}`: "wrong type",
		`{"a": {"command": "x", "url": "https://e.com"}}`: "either",
		`{"a": {}}`:                            "either",
		`{"a": {"url": "file:///etc/passwd"}}`: "http(s)",
		`{"a": {"url": "https://e.com", "env": {"A": "1"}}}`: "stdio server",
		`{"a": {"command": "x", "headers": {"A": "1"}}}`:     "HTTP server",
		`{"a": {"command": "x", "type": "sse"}}`:             "type",
		`{"a": {"command": "x", "trust": "all"}}`:            "trust",
		`{"a": {"command": "x", "timeout": -1}}`:             "timeout",
		`{"a": {"command": "x"}, "a": {"command": "y"}}`:     "twice",
		`{"a__b": {"command": "x"}}`:                         "server name",
	}
	for raw, want := range bad {
		_, err := ParseMCPServers(json.RawMessage(raw))
		if err == nil || KindOf(err) != Invalid || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an Invalid error about %q", raw, err, want)
		}
	}
}
