package distributed

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// Sub-agents on another runner (spawn_agent; services/turnrunner/subagent
// Remote and Host). A runner hands a sub-agent to a runner with more free
// turn slots than itself; with three idle runners, the one running the
// parent turn has one slot fewer than the others, so its sub-agent runs
// elsewhere — and, each runner having its own model server, the model
// calls say which runner ran what.

// subAgentPrompt begins every sub-agent's system prompt.
const subAgentPrompt = "# Sub-Agent:"

func isSubAgentCall(r *llmtest.Request) bool {
	m := r.Chat.Messages
	return len(m) > 0 && m[0].Role == "system" && strings.HasPrefix(m[0].Content, subAgentPrompt)
}

// spawnScript: a turn asked to "DELEGATE" calls spawn_agent (a sub-agent
// "Scribe" given write_file) and then answers "parent got: <result>"; the
// sub-agent calls write_file on file and then answers "sub-agent done:
// <result>".
func spawnScript(file string) func(int, *llmtest.Request) llmtest.Response {
	spawn, _ := json.Marshal(map[string]any{"name": "Scribe", "task": "write the notes", "tools": []string{"write_file"}})
	write, _ := json.Marshal(map[string]any{"path": file, "content": "written by the sub-agent\n"})
	return func(_ int, r *llmtest.Request) llmtest.Response {
		msgs := r.Chat.Messages
		lastMsg := msgs[len(msgs)-1]
		if isSubAgentCall(r) {
			if lastMsg.Role == "tool" {
				return llmtest.Reply("sub-agent done: " + lastMsg.Content)
			}
			return llmtest.Response{Steps: llmtest.ToolCall(0, "sub_1", "write_file", string(write), 2)}
		}
		if lastMsg.Role == "tool" {
			return llmtest.Reply("parent got: " + lastMsg.Content)
		}
		return llmtest.Response{Steps: llmtest.ToolCall(0, "call_spawn", "spawn_agent", string(spawn), 2)}
	}
}

// placedSubAgent starts a DELEGATE turn on gateway 0 and reads its stream
// until the sub-agent's write_file asks for approval. It returns the
// stream, the events so far, the approval's request id, and the runners of
// the parent turn and of the sub-agent (by their model servers); it fails
// unless the sub-agent runs on another runner than its turn.
func placedSubAgent(t *testing.T, c *cluster, session string) (st *waggletest.Stream, evs []waggletest.Event, requestID string, parent, child int) {
	t.Helper()
	st = c.chat(0, map[string]any{"message": "DELEGATE the notes", "session": session})
	t.Cleanup(st.Close)
	evs = readUntil(t, st, "the sub-agent's approval", func(e waggletest.Event) bool {
		return e.Name == protocol.EventApprovalRequired || e.Name == protocol.EventDone || e.Name == protocol.EventError
	})
	if last(evs).Name != protocol.EventApprovalRequired {
		t.Fatalf("the sub-agent's write_file asked no approval in its turn's stream: %v %s", waggletest.Names(evs), last(evs).Data)
	}
	var a struct {
		RequestID string `json:"requestId"`
		ToolName  string `json:"toolName"`
	}
	last(evs).Decode(t, &a)
	if a.ToolName != "write_file" {
		t.Fatalf("approval for %q, want the sub-agent's write_file", a.ToolName)
	}
	parent, child = -1, -1
	for _, call := range c.model.Calls() {
		if isSubAgentCall(call.req) {
			child = call.runner
		} else if parent < 0 {
			parent = call.runner
		}
	}
	if parent < 0 || child < 0 {
		t.Fatalf("model calls: %v", describeCalls(c.model.Calls()))
	}
	if parent == child {
		t.Fatalf("the sub-agent ran on its turn's runner %d, not on a runner with more room", parent)
	}
	return st, evs, a.RequestID, parent, child
}

// TestSubAgentOnAnotherRunner: a turn's sub-agent runs on another runner;
// its write_file is approved through the parent's stream (nothing written
// before), its steps and tool events reach that stream, its reply is
// spawn_agent's result, and its call is stored as a child of spawn_agent
// in the session's timeline.
func TestSubAgentOnAnotherRunner(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{})
	c.model.set(spawnScript("remote-notes.md"))
	notes := filepath.Join(c.dir, "data", "workspaces", "default", "files", "remote-notes.md")

	st, evs, requestID, parent, child := placedSubAgent(t, c, "sub-remote")
	t.Logf("turn on runner %d, sub-agent on runner %d", parent, child)
	if _, err := os.Stat(notes); !os.IsNotExist(err) {
		t.Fatalf("the file exists before the approval (%v)", err)
	}
	if code := c.json(1, http.MethodPost, "/api/approval/"+requestID, map[string]any{"approved": true}, nil); code != http.StatusOK {
		t.Fatalf("approve: %d", code)
	}
	rest := allWithin(t, st, 20*time.Second)
	if last(rest).Name != protocol.EventDone {
		t.Fatalf("turn ended with %s %s", last(rest).Name, last(rest).Data)
	}
	if b, err := os.ReadFile(notes); err != nil || string(b) != "written by the sub-agent\n" {
		t.Fatalf("after the approval: %q, %v", b, err)
	}
	if reply := waggletest.Text(rest); !strings.HasPrefix(reply, "parent got: sub-agent done: ") {
		t.Errorf("reply %q, want the turn's model quoting the sub-agent", reply)
	}
	all := append(evs, rest...)
	if !slices.ContainsFunc(all, func(e waggletest.Event) bool {
		return e.Name == protocol.EventToolResult && strings.Contains(string(e.Data), `"name":"write_file"`)
	}) {
		t.Errorf("the sub-agent's write_file result is not in the turn's stream: %v", waggletest.Names(all))
	}
	for _, call := range c.model.Calls() {
		if isSubAgentCall(call.req) && call.runner != child {
			t.Errorf("a sub-agent model call came from runner %d, want only %d", call.runner, child)
		}
	}

	var tl []struct {
		ToolName string `json:"toolName"`
		Children []struct {
			ToolName string `json:"toolName"`
			Status   string `json:"status"`
		} `json:"children"`
	}
	if code := c.json(0, http.MethodGet, "/api/workspaces/default/sessions/sub-remote/timeline", nil, &tl); code != http.StatusOK {
		t.Fatalf("timeline: %d", code)
	}
	i := slices.IndexFunc(tl, func(e struct {
		ToolName string `json:"toolName"`
		Children []struct {
			ToolName string `json:"toolName"`
			Status   string `json:"status"`
		} `json:"children"`
	}) bool {
		return e.ToolName == "spawn_agent"
	})
	if i < 0 || len(tl[i].Children) != 1 || tl[i].Children[0].ToolName != "write_file" || tl[i].Children[0].Status != "success" {
		t.Errorf("timeline: %+v", tl)
	}
}

// TestCancelledParentCancelsRemoteSubAgent: cancelling a turn whose
// sub-agent, on another runner, waits for an approval ends the turn and
// the sub-agent on its runner: the approval is withdrawn (404), nothing is
// written, the sub-agent's model is not asked again, and its runner logs
// its end.
func TestCancelledParentCancelsRemoteSubAgent(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{})
	c.model.set(spawnScript("cancelled.md"))
	file := filepath.Join(c.dir, "data", "workspaces", "default", "files", "cancelled.md")

	st, _, requestID, _, child := placedSubAgent(t, c, "sub-cancel")
	turnID := st.Resp.Header.Get("X-Waggle-Turn-Id")
	if code := c.json(1, http.MethodPost, "/api/chat/turns/"+turnID+"/cancel", nil, nil); code != http.StatusOK && code != http.StatusAccepted {
		t.Fatalf("cancel: %d", code)
	}
	rest := allWithin(t, st, 20*time.Second)
	if last(rest).Name == protocol.EventDone {
		t.Fatalf("cancelled turn ended with done")
	}
	childRunner := c.runners[child]
	waitfor.Within(10*time.Second).True(t, "the sub-agent ends on its runner", func() bool {
		out := childRunner.Output()
		return strings.Contains(out, "sub-agent for another runner ended") && strings.Contains(out, "its turn was cancelled")
	})
	if code := c.json(1, http.MethodPost, "/api/approval/"+requestID, map[string]any{"approved": true}, nil); code != http.StatusNotFound {
		t.Errorf("approving the cancelled sub-agent's call: %d, want 404", code)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("the cancelled sub-agent wrote its file (%v)", err)
	}
	n := 0
	for _, call := range c.model.Calls() {
		if isSubAgentCall(call.req) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the sub-agent's model was asked %d times, want once (cancelled while waiting)", n)
	}
}

// TestSubAgentRunnerKilled: the runner of a sub-agent waiting for an
// approval is killed; the parent's spawn_agent call fails with an error
// result within the liveness limit, the approval is withdrawn, and the
// turn goes on to done with its model's answer.
func TestSubAgentRunnerKilled(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{})
	c.model.set(spawnScript("killed.md"))

	st, _, requestID, _, child := placedSubAgent(t, c, "sub-killed")
	killed := time.Now()
	c.runners[child].Kill()
	rest := allWithin(t, st, 20*time.Second)
	if last(rest).Name != protocol.EventDone {
		t.Fatalf("turn ended with %s %s after its sub-agent's runner died", last(rest).Name, last(rest).Data)
	}
	took := time.Since(killed)
	reply := waggletest.Text(rest)
	if !strings.HasPrefix(reply, "parent got: ") || !strings.Contains(reply, "stopped answering") {
		t.Errorf("reply %q, want the turn's model given the sub-agent's failure", reply)
	}
	t.Logf("the turn went on %v after the kill", took)
	if code := c.json(1, http.MethodPost, "/api/approval/"+requestID, map[string]any{"approved": true}, nil); code != http.StatusNotFound {
		t.Errorf("approving the dead sub-agent's call: %d, want 404", code)
	}
}

// TestSubAgentEndsWithItsTurnsRunner: the runner of a turn whose sub-agent
// runs elsewhere is killed; the sub-agent ends on its own runner within
// the liveness limit (it does not wait its 10 minutes for an approval no
// one can give), its model not asked again.
func TestSubAgentEndsWithItsTurnsRunner(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{})
	c.model.set(spawnScript("orphan.md"))

	_, _, _, parent, child := placedSubAgent(t, c, "sub-orphan")
	killed := time.Now()
	c.runners[parent].Kill()
	childRunner := c.runners[child]
	waitfor.Within(15*time.Second).True(t, "the sub-agent ends on its runner", func() bool {
		return strings.Contains(childRunner.Output(), "the runner of a sub-agent's turn stopped answering: the sub-agent ends")
	})
	t.Logf("the sub-agent ended %v after its turn's runner was killed", time.Since(killed))
	n := 0
	for _, call := range c.model.Calls() {
		if isSubAgentCall(call.req) && call.runner == child {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the orphaned sub-agent's model was asked %d times, want once", n)
	}
}
