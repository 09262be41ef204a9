package llmtest

import (
	"testing"
)

func TestCallDirective(t *testing.T) {
	tests := []struct {
		text     string
		ok       bool
		tool     string
		wantArgs string
	}{
		{`please CALL bash {"command":"ls"}`, true, "bash", `{"command":"ls"}`},
		{`CALL read_file {"path":"a b.txt"}`, true, "read_file", `{"path":"a b.txt"}`},
		{`CALL web_fetch {"url":1,"url":2}`, true, "web_fetch", `{"url":1,"url":2}`},
		{"hello there", false, "", ""},
	}
	for _, tc := range tests {
		resp, ok := CallDirective(tc.text)
		if ok != tc.ok {
			t.Fatalf("%q: ok = %v", tc.text, ok)
		}
		if !ok {
			continue
		}
		var name, args string
		for _, s := range resp.Steps {
			switch s.kind {
			case stepToolStart:
				name = s.name
			case stepToolArgs:
				args += s.text
			}
		}
		if name != tc.tool || args != tc.wantArgs {
			t.Errorf("%q: call %s(%s), want %s(%s)", tc.text, name, args, tc.tool, tc.wantArgs)
		}
	}
}
