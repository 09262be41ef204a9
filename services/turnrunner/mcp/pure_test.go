package mcp

import (
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestParseServers(t *testing.T) {
	entries, err := parseServers([]byte(`{"mcpServers": {
		"fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/data"], "env": {"A": "1"}},
		"web": {"url": "https://mcp.example.com/mcp", "headers": {"X-Key": "k"}, "trust": ["search"], "timeout": 5},
		"ro": {"url": "http://127.0.0.1:1/mcp", "trust": "readOnly"},
		"both": {"command": "x", "url": "http://a"},
		"sse": {"type": "sse", "url": "http://a/sse"},
		"badtrust": {"url": "http://a", "trust": "all"},
		"a__b": {"command": "x"},
		"neg": {"command": "x", "timeout": -1}
	}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ // name → error substring ("" = valid)
		"fs": "", "web": "", "ro": "", "both": `needs either "command"`, "sse": "legacy SSE",
		"badtrust": "trust must be", "a__b": "server names", "neg": "timeout must not be negative",
	}
	if len(entries) != len(want) {
		t.Fatalf("%d entries", len(entries))
	}
	for _, e := range entries {
		w, ok := want[e.name]
		switch {
		case !ok:
			t.Errorf("unexpected entry %s", e.name)
		case w == "" && e.err != nil:
			t.Errorf("%s: %v", e.name, e.err)
		case w != "" && (e.err == nil || !strings.Contains(e.err.Error(), w)):
			t.Errorf("%s: error %v, want %q", e.name, e.err, w)
		}
		switch e.name {
		case "fs":
			if e.cfg.transport() != transportStdio || e.cfg.Args[2] != "/data" || e.cfg.Env["A"] != "1" {
				t.Errorf("fs %+v", e.cfg)
			}
		case "web":
			if e.cfg.transport() != transportHTTP || !e.cfg.Trust.trusts("search", false) || e.cfg.Trust.trusts("other", true) ||
				e.cfg.callTimeout(0).Seconds() != 5 {
				t.Errorf("web %+v", e.cfg)
			}
		case "ro":
			if !e.cfg.Trust.trusts("x", true) || e.cfg.Trust.trusts("x", false) {
				t.Errorf("ro %+v", e.cfg)
			}
		}
	}
	if entries, err := parseServers([]byte(`{"defaultModel": "m"}`)); err != nil || len(entries) != 0 {
		t.Fatalf("no servers: %v %v", entries, err)
	}
	if _, err := parseServers([]byte(`{`)); err == nil {
		t.Fatal("bad JSON accepted")
	}
}

func TestExposedName(t *testing.T) {
	long := strings.Repeat("x", 80)
	tests := []struct{ tool, server, want string }{
		{"read_file", "fs", "read_file"},
		{"repo.search", "gh", "repo_search"},
		{"ünïcode tool", "s", "_n_code_tool"},
		{"", "s", "_"},
	}
	for _, tc := range tests {
		if got := exposedName(tc.tool, tc.server); got != tc.want {
			t.Errorf("exposedName(%q) = %q, want %q", tc.tool, got, tc.want)
		}
	}
	a, b := exposedName(long, "srv"), exposedName(long+"y", "srv")
	if a == b || len("mcp__srv__"+a) != maxToolName || len("mcp__srv__"+b) != maxToolName {
		t.Fatalf("long names %q %q", a, b)
	}
}

func TestResultText(t *testing.T) {
	res := &sdk.CallToolResult{Content: []sdk.Content{
		&sdk.TextContent{Text: "a"},
		&sdk.AudioContent{MIMEType: "audio/wav", Data: []byte("123")},
		&sdk.ResourceLink{Name: "doc", URI: "file:///d"},
		&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///t", Text: "inline"}},
		&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///b", MIMEType: "application/pdf", Blob: []byte("12")}},
	}}
	want := "a\n[audio content (audio/wav, 3 bytes) not shown]\n[resource link: doc file:///d]\ninline\n[embedded resource file:///b (application/pdf, 2 bytes) not shown]"
	if got := resultText(res, 0); got != want {
		t.Fatalf("got %q", got)
	}
	if got := resultText(&sdk.CallToolResult{StructuredContent: map[string]int{"n": 1}}, 0); got != `{"n":1}` {
		t.Fatalf("structured %q", got)
	}
	got := resultText(&sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Repeat("é", 10)}}}, 5)
	if !strings.HasPrefix(got, "éé\n\n[output truncated: 16 of 20 bytes omitted]") {
		t.Fatalf("truncated %q", got)
	}
}
