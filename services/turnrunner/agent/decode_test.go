package agent

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/services/turnrunner/tools"
)

// builtins binds the real built-in tools to a temporary workspace.
func builtins(t *testing.T) ([]Tool, string) {
	t.Helper()
	dir := t.TempDir()
	var out []Tool
	for _, b := range tools.NewRegistry(tools.DefaultConfig()).Bind(tools.Env{FilesDir: dir, Workspace: "ws"}, nil) {
		out = append(out, b)
	}
	return out, dir
}

// TestDecodedInputIsWhatTheGateSeesAndRuns: the gate and the tool event get
// the canonical re-encoding of the decoded arguments, and that value is
// what runs.
func TestDecodedInputIsWhatTheGateSeesAndRuns(t *testing.T) {
	s := server(t, toolStep("c", "write_file", ` { "content" : "hi", "path" : "a.txt" } `), llmtest.Reply("ok"))
	a := newAgent(t, s.URL())
	ts, dir := builtins(t)
	var asked []ToolCall
	gate := gateFunc(func(c ToolCall) Verdict {
		asked = append(asked, c)
		return Verdict{Allow: true}
	})
	rec := newRecorder()
	res, err := a.Run(context.Background(), Request{Model: sonnet(), Message: "m", Sink: rec, Tools: ts, Gate: gate})
	if err != nil {
		t.Fatal(err)
	}
	const canonical = `{"path":"a.txt","content":"hi"}`
	if len(asked) != 1 || string(asked[0].Input) != canonical {
		t.Fatalf("gate asked %+v, want the input %s", asked, canonical)
	}
	if len(res.Tools) != 1 || string(res.Tools[0].Input) != canonical {
		t.Fatalf("tool events %+v", res.Tools)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "hi" {
		t.Fatalf("a.txt = %q, %v", b, err)
	}
}

// TestInvalidArgumentsNeverReachTheGate: case-variant, duplicate and
// unknown keys are refused as a result the model reads; no approval is
// asked and nothing runs.
func TestInvalidArgumentsNeverReachTheGate(t *testing.T) {
	cases := map[string]string{
		"case variant": `{"path":"notes.txt","Path":"autorun.sh","content":"x"}`,
		"duplicate":    `{"path":"notes.txt","content":"x","path":"autorun.sh"}`,
		"unknown":      `{"path":"autorun.sh","content":"x","mode":"0777"}`,
		"wrong type":   `{"path":"autorun.sh","content":7}`,
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			s := server(t, toolStep("c", "write_file", args), llmtest.Reply("ok"))
			a := newAgent(t, s.URL())
			ts, dir := builtins(t)
			gate := gateFunc(func(c ToolCall) Verdict {
				t.Errorf("gate asked about %s", c.Input)
				return Verdict{Allow: true}
			})
			rec := newRecorder()
			res, err := a.Run(context.Background(), Request{Model: sonnet(), Message: "m", Sink: rec, Tools: ts, Gate: gate})
			if err != nil {
				t.Fatal(err)
			}
			equal(t, "events", rec.summary(), []string{"token:ok"})
			msgs := s.ChatRequests()[1].Chat.Messages
			if got := msgs[len(msgs)-1]; got.Role != "tool" || len(got.Content) < 40 || got.Content[:40] != "Error: Invalid arguments for write_file:" {
				t.Errorf("model got %+v", got)
			}
			if len(res.Tools) != 0 {
				t.Errorf("tool events %+v", res.Tools)
			}
			for _, f := range []string{"autorun.sh", "notes.txt"} {
				if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
					t.Errorf("%s exists", f)
				}
			}
		})
	}
}

// TestDuplicateKeysRefusedForEveryTool: a tool that does not decode its own
// arguments (an MCP tool) still never gets a key twice.
func TestDuplicateKeysRefusedForEveryTool(t *testing.T) {
	s := server(t, toolStep("c", "bash", `{"a":{"x":1,"x":2}}`), llmtest.Reply("ok"))
	a := newAgent(t, s.URL())
	gate := gateFunc(func(c ToolCall) Verdict {
		t.Errorf("gate asked about %s", c.Input)
		return Verdict{Allow: true}
	})
	_, err := a.Run(context.Background(), Request{Model: sonnet(), Message: "m", Sink: newRecorder(),
		Tools: []Tool{echoTool("bash")}, Gate: gate})
	if err != nil {
		t.Fatal(err)
	}
	msgs := s.ChatRequests()[1].Chat.Messages
	if got := msgs[len(msgs)-1]; got.Content != `Error: Invalid arguments for bash: duplicate key "x"` {
		t.Errorf("model got %+v", got)
	}
}
