package distributed

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/turnrunner/mcp/mcptest"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestRunnerCrashDuringMCPCall: kill -9 of the runner while an MCP call
// runs: the runner that resumes the turn reports the call as interrupted
// and never calls the server again (it may have acted).
func TestRunnerCrashDuringMCPCall(t *testing.T) {
	t.Parallel()
	remote := mcptest.NewHTTP()
	t.Cleanup(remote.Close)
	c := startCluster(t, clusterOpts{config: `{"mcpServers": {"remote": {"url": "` + remote.URL() + `"}}}`})
	c.model.set(func(_ int, r *llmtest.Request) llmtest.Response {
		if toolResults(r) == 0 {
			return llmtest.Response{Steps: llmtest.ToolCall(0, "call_mcp", "mcp__remote__slow", `{}`, 1)}
		}
		return llmtest.Reply("checked")
	})
	st := c.chat(1, map[string]any{"message": "slow mcp tool", "session": "mcp", "autonomy": map[string]any{"level": "yolo"}})
	before := readUntil(t, st, "the tool event", named("tool"))
	started := func() int {
		n := 0
		for _, e := range remote.Events() {
			if e == "started slow" {
				n++
			}
		}
		return n
	}
	waitfor.True(t, "the MCP call reached the server", func() bool { return started() > 0 })
	victim := c.model.Calls()[0].runner
	c.runners[victim].Kill()
	after := allWithin(t, st, 20*time.Second)
	evs := append(before, after...)
	if last(evs).Name != "done" || waggletest.Text(evs) != "checked" {
		t.Fatalf("stream: %v %q", waggletest.Names(evs), waggletest.Text(evs))
	}
	i := slices.IndexFunc(evs, func(e waggletest.Event) bool {
		return e.Name == "tool_result" && strings.Contains(string(e.Data), `"name":"mcp__remote__slow"`)
	})
	if i < 0 {
		t.Fatalf("no tool_result for the interrupted call: %v", waggletest.Names(evs))
	}
	var res struct {
		Name    string
		Result  string
		IsError bool
	}
	evs[i].Decode(t, &res)
	if !res.IsError || !strings.Contains(res.Result, "interrupted") {
		t.Errorf("interrupted call's result: %+v", res)
	}
	if n := started(); n != 1 {
		t.Fatalf("the MCP call ran %d times", n)
	}
}
