package protocol

import "testing"

func TestParseMCPToolName(t *testing.T) {
	tests := []struct {
		name, server, tool string
		ok                 bool
	}{
		{"mcp__fs__read_file", "fs", "read_file", true},
		{"mcp__git-hub__create__issue", "git-hub", "create__issue", true},
		{"mcp__fs", "", "", false},
		{"mcp____x", "", "", false},
		{"mcp__fs__", "", "", false},
		{"read_file", "", "", false},
		{"MCP__fs__x", "", "", false},
	}
	for _, tc := range tests {
		server, tool, ok := ParseMCPToolName(tc.name)
		if server != tc.server || tool != tc.tool || ok != tc.ok {
			t.Errorf("ParseMCPToolName(%q) = %q, %q, %v", tc.name, server, tool, ok)
		}
		if tc.ok && MCPToolName(server, tool) != tc.name {
			t.Errorf("MCPToolName does not round-trip %q", tc.name)
		}
	}
}

func TestBlocksMCP(t *testing.T) {
	p := ToolPolicy{Governed: true, BlockedTools: []string{"write_file", "mcp__github", "mcp__fs__write_file"}}
	tests := []struct {
		name string
		want bool
	}{
		{"mcp__github__create_issue", true}, // the whole server
		{"mcp__github__search", true},
		{"mcp__fs__write_file", true}, // one tool
		{"mcp__fs__read_file", false},
		{"mcp__githubx__search", false}, // a server name is matched whole
		{"write_file", true},
		{"read_file", false},
		{"mcp__github", true}, // not a tool name; the plain rule applies
	}
	for _, tc := range tests {
		if got := p.BlocksMCP(tc.name); got != tc.want {
			t.Errorf("BlocksMCP(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
