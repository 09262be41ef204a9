package tools

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// subAgentPromptStart begins every sub-agent's system prompt: how the
// scripted model tells a sub-agent's request from its turn's.
const subAgentPromptStart = "# Sub-Agent:"

// spawnModel is a scripted model for sub-agent tests: a turn's model asked
// to "DELEGATE" calls spawn_agent with spawn, then answers "parent got:
// <result>"; a sub-agent's model calls tool with args, then answers
// "sub-agent done: <result>".
func spawnModel(t *testing.T, spawn map[string]any, tool string, args map[string]any) *llmtest.Server {
	t.Helper()
	spawnArgs, _ := json.Marshal(spawn)
	toolArgs, _ := json.Marshal(args)
	s := llmtest.New(llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		msgs := r.Chat.Messages
		if len(msgs) == 0 {
			return llmtest.Reply("no messages")
		}
		last := msgs[len(msgs)-1]
		if isSubAgent(r) {
			if last.Role == "tool" {
				return llmtest.Reply("sub-agent done: " + last.Content)
			}
			return llmtest.Response{Steps: llmtest.ToolCall(0, "call_1", tool, string(toolArgs), 2)}
		}
		switch {
		case last.Role == "tool":
			return llmtest.Reply("parent got: " + last.Content)
		case strings.Contains(last.Content, "DELEGATE"):
			return llmtest.Response{Steps: llmtest.ToolCall(0, "call_1", "spawn_agent", string(spawnArgs), 2)}
		}
		return llmtest.Reply("nothing to do")
	}))
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func isSubAgent(r *llmtest.Request) bool {
	msgs := r.Chat.Messages
	return len(msgs) > 0 && msgs[0].Role == "system" && strings.HasPrefix(msgs[0].Content, subAgentPromptStart)
}

// subAgentRequests are the model requests sub-agents made.
func subAgentRequests(llm *llmtest.Server) []*llmtest.Request {
	return slices.DeleteFunc(llm.ChatRequests(), func(r *llmtest.Request) bool { return !isSubAgent(r) })
}

// activeSubAgents is GET /api/agents/active's sub-agents.
func activeSubAgents(t *testing.T, p *waggletest.Proc, headers ...string) []protocol.SubAgent {
	t.Helper()
	resp := p.Do(t, "GET", "/api/agents/active", nil, headers...)
	defer resp.Body.Close()
	var out struct {
		SubAgents []protocol.SubAgent `json:"subAgents"`
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/agents/active: %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.SubAgents == nil {
		t.Fatalf("GET /api/agents/active: %v (subAgents %v)", err, out.SubAgents)
	}
	return out.SubAgents
}

// TestSubAgentApprovalThroughParentStream: a turn's model spawns a
// sub-agent that writes a file. The sub-agent's write waits for an
// approval asked in the turn's own stream (nothing written before it);
// meanwhile GET /api/agents/active lists the sub-agent under its turn,
// with only the tool it was given. Once approved the file is written, the
// turn's model gets the sub-agent's answer as spawn_agent's result, the
// sub-agent's call shows in the stream and as a child of spawn_agent in
// the session timeline, and the list is empty again.
func TestSubAgentApprovalThroughParentStream(t *testing.T) {
	llm := spawnModel(t,
		map[string]any{"name": "Scribe", "task": "write the meeting notes", "tools": []string{"write_file"}},
		"write_file", map[string]any{"path": "notes.md", "content": "written by the sub-agent\n"})
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL()))
	ws := createWorkspace(t, p, "Team")
	notes := filepath.Join(p.DataDir, "workspaces", ws, "files", "notes.md")

	resp := p.Do(t, "POST", "/api/chat", map[string]any{"message": "DELEGATE the notes", "workspace": ws, "session": "s1"})
	turnID := resp.Header.Get("X-Waggle-Turn-Id")
	st := waggletest.NewStream(resp)
	defer st.Close()
	evs := st.Until(t, protocol.EventApprovalRequired, protocol.EventDone, protocol.EventError)
	if last := evs[len(evs)-1]; last.Name != protocol.EventApprovalRequired {
		t.Fatalf("the sub-agent's write_file did not ask for an approval; turn ended with %s %s", last.Name, last.Data)
	}
	var a approval
	evs[len(evs)-1].Decode(t, &a)
	if a.ToolName != "write_file" || !strings.Contains(string(a.Input), "notes.md") {
		t.Fatalf("approval asked for %s %s, want the sub-agent's write_file", a.ToolName, a.Input)
	}
	if !slices.Contains(waggletest.Steps(evs), `Spawning sub-agent "Scribe" (custom)...`) {
		t.Errorf("steps %q lack the spawn step", waggletest.Steps(evs))
	}
	if _, err := os.Stat(notes); !os.IsNotExist(err) {
		t.Fatalf("notes.md exists before the approval (%v)", err)
	}
	subs := activeSubAgents(t, p)
	if len(subs) != 1 {
		t.Fatalf("active sub-agents while one waits for approval: %+v", subs)
	}
	if s := subs[0]; s.Name != "Scribe" || s.ParentTurnID != turnID || s.Workspace != ws || s.Session != "s1" ||
		!slices.Equal(s.Tools, []string{"write_file"}) || s.Task != "write the meeting notes" || s.ParentCallID != "call_1" {
		t.Errorf("listed sub-agent = %+v (turn %s)", s, turnID)
	}
	// The sub-agent's model was offered exactly the tool it was given.
	for _, r := range subAgentRequests(llm) {
		var offered []string
		for _, tl := range r.Chat.Tools {
			offered = append(offered, tl.Function.Name)
		}
		if !slices.Equal(offered, []string{"write_file"}) {
			t.Errorf("sub-agent offered %v, want only write_file", offered)
		}
	}

	p.Do(t, "POST", "/api/approval/"+a.RequestID, map[string]any{"approved": true}).Body.Close()
	rest := st.All(t)
	if end := rest[len(rest)-1]; end.Name != protocol.EventDone {
		t.Fatalf("turn ended with %s %s", end.Name, end.Data)
	}
	if b, err := os.ReadFile(notes); err != nil || string(b) != "written by the sub-agent\n" {
		t.Fatalf("notes.md after the approval: %q, %v", b, err)
	}
	all := append(evs, rest...)
	var sawWrite bool
	for _, ev := range all {
		if ev.Name == protocol.EventToolResult && strings.Contains(string(ev.Data), `"name":"write_file"`) {
			sawWrite = true
		}
	}
	if !sawWrite {
		t.Errorf("the sub-agent's write_file result is not in the turn's stream: %v", waggletest.Names(all))
	}
	if !slices.ContainsFunc(waggletest.Steps(all), func(s string) bool { return strings.HasPrefix(s, "[Scribe] ") }) {
		t.Errorf("no step of the sub-agent in the turn's stream: %q", waggletest.Steps(all))
	}
	res := toolResults(llm)
	if want := "sub-agent done: "; len(res) < 2 || !strings.HasPrefix(res[len(res)-1], want) {
		t.Fatalf("spawn_agent's result given to the turn's model: %q", res)
	}
	if reply := waggletest.Text(all); !strings.HasPrefix(reply, "parent got: sub-agent done: ") {
		t.Errorf("reply %q, want the turn's model quoting the sub-agent", reply)
	}
	if subs := activeSubAgents(t, p); len(subs) != 0 {
		t.Errorf("sub-agents still listed after the turn: %+v", subs)
	}

	// The timeline nests the sub-agent's call under spawn_agent.
	resp = p.Do(t, "GET", "/api/workspaces/"+ws+"/sessions/s1/timeline", nil)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var tl []timelineEvent
	if err := json.Unmarshal(body, &tl); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("timeline: %d %s", resp.StatusCode, body)
	}
	i := slices.IndexFunc(tl, func(e timelineEvent) bool { return e.ToolName == "spawn_agent" })
	if i < 0 || len(tl[i].Children) != 1 || tl[i].Children[0].ToolName != "write_file" || tl[i].Children[0].Status != "success" {
		t.Errorf("timeline: %+v", tl)
	}
	if slices.ContainsFunc(tl, func(e timelineEvent) bool { return e.ToolName == "write_file" }) {
		t.Errorf("the sub-agent's call is also at the top of the timeline: %+v", tl)
	}
}

// createWorkspace creates a personal workspace named name and returns its id.
func createWorkspace(t *testing.T, p *waggletest.Proc, name string) string {
	t.Helper()
	resp := p.Do(t, "POST", "/api/workspaces", map[string]any{"name": name})
	defer resp.Body.Close()
	var ws struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ws); err != nil || ws.ID == "" || resp.StatusCode >= 300 {
		t.Fatalf("create workspace: %d %v", resp.StatusCode, err)
	}
	return ws.ID
}

// timelineEvent is the part of a timeline event these tests read.
type timelineEvent struct {
	ToolName string          `json:"toolName"`
	Status   string          `json:"status"`
	Children []timelineEvent `json:"children"`
}

// TestCancelledTurnCancelsSubAgent: cancelling a turn whose sub-agent
// waits for an approval ends the turn, denies nothing into effect (the
// file is never written, even when approved late), and the sub-agent
// leaves the active list.
func TestCancelledTurnCancelsSubAgent(t *testing.T) {
	llm := spawnModel(t,
		map[string]any{"name": "Scribe", "task": "write the notes", "tools": []string{"write_file"}},
		"write_file", map[string]any{"path": "late.md", "content": "too late\n"})
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL()))
	late := filepath.Join(p.DataDir, "workspaces", "w", "files", "late.md")

	resp := p.Do(t, "POST", "/api/chat", map[string]any{"message": "DELEGATE", "workspace": "w", "session": "s1"})
	turnID := resp.Header.Get("X-Waggle-Turn-Id")
	st := waggletest.NewStream(resp)
	defer st.Close()
	evs := st.Until(t, protocol.EventApprovalRequired, protocol.EventDone, protocol.EventError)
	if evs[len(evs)-1].Name != protocol.EventApprovalRequired {
		t.Fatalf("no approval asked: %v", waggletest.Names(evs))
	}
	var a approval
	evs[len(evs)-1].Decode(t, &a)
	if len(activeSubAgents(t, p)) != 1 {
		t.Fatal("the waiting sub-agent is not listed")
	}

	cancel := p.Do(t, "POST", "/api/chat/turns/"+turnID+"/cancel", nil)
	cancel.Body.Close()
	if cancel.StatusCode != http.StatusOK && cancel.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %d", cancel.StatusCode)
	}
	rest := st.All(t)
	if end := rest[len(rest)-1]; end.Name == protocol.EventDone {
		t.Fatalf("cancelled turn ended with done: %s", end.Data)
	}
	waitfor.True(t, "the cancelled sub-agent leaves the active list", func() bool { return len(activeSubAgents(t, p)) == 0 })
	// A late approval of the dead request is refused and runs nothing.
	late404 := p.Do(t, "POST", "/api/approval/"+a.RequestID, map[string]any{"approved": true})
	late404.Body.Close()
	if late404.StatusCode != http.StatusNotFound {
		t.Errorf("approving the cancelled sub-agent's approval: %d, want 404 (no longer pending)", late404.StatusCode)
	}
	if _, err := os.Stat(late); !os.IsNotExist(err) {
		t.Fatalf("the cancelled sub-agent wrote late.md (%v)", err)
	}
	if n := len(subAgentRequests(llm)); n != 1 {
		t.Errorf("the sub-agent's model was asked %d times, want once (cancelled while waiting)", n)
	}
}

// TestSubAgentCannotGainTools: a turn's model asking for a sub-agent with
// a tool it does not have itself (another spawn_agent, a made-up
// cross-workspace reader) gets an error result and no sub-agent runs; a
// role preset gives only the turn's own tools, never spawn_agent.
func TestSubAgentCannotGainTools(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spawn map[string]any
	}{
		{"nested spawn", map[string]any{"task": "spawn more", "tools": []string{"read_file", "spawn_agent"}}},
		{"tool the turn lacks", map[string]any{"task": "peek", "tools": []string{"read_other_workspace_file"}}},
		{"autonomy key", map[string]any{"task": "t", "role": "coder", "autonomy": "autonomous"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			llm := spawnModel(t, tc.spawn, "read_file", map[string]any{"path": "x"})
			p := waggletest.StartProc(t, waggleBin, waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL()))
			evs := waggletest.NewStream(p.Do(t, "POST", "/api/chat", map[string]any{"message": "DELEGATE", "workspace": "w"})).All(t)
			if end := evs[len(evs)-1]; end.Name != protocol.EventDone {
				t.Fatalf("turn ended with %s", end.Name)
			}
			if n := len(subAgentRequests(llm)); n != 0 {
				t.Errorf("a sub-agent ran (%d model requests)", n)
			}
			res := toolResults(llm)
			if len(res) != 1 || !strings.HasPrefix(res[0], "Error") {
				t.Errorf("spawn_agent result %q, want an error", res)
			}
		})
	}

	// The coder preset on this desktop: the turn's coding tools, no
	// spawn_agent, and the sub-agent's call runs (read_file asks nothing).
	llm := spawnModel(t, map[string]any{"name": "Rex", "role": "coder", "task": "read x"}, "read_file", map[string]any{"path": "x.txt"})
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL()))
	dir := filepath.Join(p.DataDir, "workspaces", "w", "files")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "x.txt"), "the content of x\n")
	evs := waggletest.NewStream(p.Do(t, "POST", "/api/chat", map[string]any{"message": "DELEGATE", "workspace": "w"})).All(t)
	if end := evs[len(evs)-1]; end.Name != protocol.EventDone {
		t.Fatalf("turn ended with %s", end.Name)
	}
	reqs := subAgentRequests(llm)
	if len(reqs) == 0 {
		t.Fatal("the coder sub-agent never ran")
	}
	offered := requestTools(reqs[0])
	if slices.Contains(offered, "spawn_agent") || !slices.Contains(offered, "read_file") || !slices.Contains(offered, "git_commit") {
		t.Errorf("coder sub-agent offered %v", offered)
	}
	if res := toolResults(llm); len(res) == 0 || !strings.Contains(res[len(res)-1], "the content of x") {
		t.Errorf("results %q, want the sub-agent's read of x.txt passed up", res)
	}
}

// TestActiveSubAgentsAreTeamScoped (team server, PostgreSQL): a member's
// sub-agent waiting for an approval in her team's workspace is listed
// for her, and not for the owner of another team.
func TestActiveSubAgentsAreTeamScoped(t *testing.T) {
	llm := spawnModel(t,
		map[string]any{"name": "Scribe", "task": "write the notes", "tools": []string{"write_file"}},
		"write_file", map[string]any{"path": "notes.md", "content": "acme notes\n"})
	srv := startTeamServer(t, llm.URL(), nil)
	p := srv.p
	olga := srv.team(t, "acme", "olga", "greg")
	zed := srv.team(t, "zeta", "zed")
	greg := srv.token(t, "greg")
	ws := srv.workspace(t, "acme", "Acme Notes", olga)

	st := waggletest.NewStream(p.Do(t, "POST", "/api/chat", map[string]any{"message": "DELEGATE", "workspace": ws}, "Authorization", greg))
	defer st.Close()
	evs := st.Until(t, protocol.EventApprovalRequired, protocol.EventDone, protocol.EventError)
	if evs[len(evs)-1].Name != protocol.EventApprovalRequired {
		t.Fatalf("no approval asked: %v", waggletest.Names(evs))
	}
	var a approval
	evs[len(evs)-1].Decode(t, &a)
	if subs := activeSubAgents(t, p, "Authorization", greg); len(subs) != 1 || subs[0].TeamID != "acme" || subs[0].Workspace != ws {
		t.Errorf("greg's active sub-agents: %+v", subs)
	}
	if subs := activeSubAgents(t, p, "Authorization", zed); len(subs) != 0 {
		t.Errorf("another team's owner sees acme's sub-agents: %+v", subs)
	}
	p.Do(t, "POST", "/api/approval/"+a.RequestID, map[string]any{"approved": true}, "Authorization", greg).Body.Close()
	if rest := st.All(t); rest[len(rest)-1].Name != protocol.EventDone {
		t.Fatalf("turn ended with %s", rest[len(rest)-1].Name)
	}
}

// TestSubAgentBounds: with --subagents-per-turn 1 a turn's second
// spawn_agent gets an error and runs no sub-agent; with
// --subagent-timeout 2s a sub-agent still waiting for an approval is
// stopped and the turn's model gets an error naming the limit (the turn
// itself goes on to done).
func TestSubAgentBounds(t *testing.T) {
	t.Run("per turn", func(t *testing.T) {
		// The turn's model spawns twice, then answers; a sub-agent answers
		// at once.
		llm := llmtest.New(llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
			if isSubAgent(r) {
				return llmtest.Reply("done")
			}
			var results int
			for _, m := range r.Chat.Messages {
				if m.Role == "tool" {
					results++
				}
			}
			if results < 2 {
				id := fmt.Sprintf("call_%d", results+1)
				return llmtest.Response{Steps: llmtest.ToolCall(0, id, "spawn_agent", `{"task":"task `+id+`"}`, 2)}
			}
			return llmtest.Reply("finished")
		}))
		llm.Start()
		t.Cleanup(llm.Close)
		p := waggletest.StartProc(t, waggleBin, waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL(), "WAGGLE_SUBAGENTS_PER_TURN=1"))
		evs := waggletest.NewStream(p.Do(t, "POST", "/api/chat", map[string]any{"message": "go", "workspace": "w"})).All(t)
		if end := evs[len(evs)-1]; end.Name != protocol.EventDone {
			t.Fatalf("turn ended with %s", end.Name)
		}
		if n := len(subAgentRequests(llm)); n != 1 {
			t.Errorf("%d sub-agent model requests, want 1", n)
		}
		res := toolResults(llm)
		if len(res) != 2 || res[0] != "done" || !strings.Contains(res[1], "already started 1 sub-agents") {
			t.Errorf("spawn_agent results %q", res)
		}
	})
	t.Run("time", func(t *testing.T) {
		llm := spawnModel(t, map[string]any{"task": "write", "tools": []string{"write_file"}},
			"write_file", map[string]any{"path": "slow.md", "content": "never\n"})
		p := waggletest.StartProc(t, waggleBin, waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL(), "WAGGLE_SUBAGENT_TIMEOUT=2s"))
		st := waggletest.NewStream(p.Do(t, "POST", "/api/chat", map[string]any{"message": "DELEGATE", "workspace": "w"}))
		defer st.Close()
		evs := st.Until(t, protocol.EventApprovalRequired, protocol.EventDone, protocol.EventError)
		if evs[len(evs)-1].Name != protocol.EventApprovalRequired {
			t.Fatalf("no approval asked: %v", waggletest.Names(evs))
		}
		// Nobody answers: the sub-agent's time runs out.
		rest := st.All(t)
		if end := rest[len(rest)-1]; end.Name != protocol.EventDone {
			t.Fatalf("turn ended with %s", end.Name)
		}
		res := toolResults(llm)
		if len(res) != 1 || !strings.HasPrefix(res[0], "Error") || !strings.Contains(res[0], "time limit of 2s") {
			t.Errorf("spawn_agent result %q", res)
		}
		if _, err := os.Stat(filepath.Join(p.DataDir, "workspaces", "w", "files", "slow.md")); !os.IsNotExist(err) {
			t.Errorf("the timed-out sub-agent wrote slow.md (%v)", err)
		}
		if subs := activeSubAgents(t, p); len(subs) != 0 {
			t.Errorf("timed-out sub-agent still listed: %+v", subs)
		}
	})
}

// TestTimedOutSubAgentWithdrawsItsApproval: a sub-agent whose time runs
// out while its write_file waits for an approval leaves nothing to
// approve while its turn goes on (here to an approval of the turn's own):
// the stream says its approval was withdrawn, the pending list holds
// only the turn's, approving the sub-agent's answers 404 "No pending
// approval" (nobody decided it) and writes nothing, and the turn's own
// approval still works.
func TestTimedOutSubAgentWithdrawsItsApproval(t *testing.T) {
	llm := llmtest.New(llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		msgs := r.Chat.Messages
		last := msgs[len(msgs)-1]
		switch {
		case isSubAgent(r) && last.Role == "tool":
			return llmtest.Reply("sub-agent done")
		case isSubAgent(r):
			return llmtest.Response{Steps: llmtest.ToolCall(0, "call_1", "write_file", `{"path":"sub.md","content":"late\n"}`, 2)}
		case last.Role == "tool" && strings.Contains(last.Content, "time limit"):
			return llmtest.Response{Steps: llmtest.ToolCall(0, "call_2", "write_file", `{"path":"parent.md","content":"mine\n"}`, 2)}
		case last.Role == "tool":
			return llmtest.Reply("parent got: " + last.Content)
		}
		return llmtest.Response{Steps: llmtest.ToolCall(0, "call_1", "spawn_agent", `{"name":"Scribe","task":"write","tools":["write_file"]}`, 2)}
	}))
	llm.Start()
	t.Cleanup(llm.Close)
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL(), "WAGGLE_SUBAGENT_TIMEOUT=2s"))
	files := filepath.Join(p.DataDir, "workspaces", "w", "files")

	st := waggletest.NewStream(p.Do(t, "POST", "/api/chat", map[string]any{"message": "DELEGATE", "workspace": "w"}))
	defer st.Close()
	evs := st.Until(t, protocol.EventApprovalRequired, protocol.EventDone, protocol.EventError)
	if evs[len(evs)-1].Name != protocol.EventApprovalRequired {
		t.Fatalf("the sub-agent asked no approval: %v", waggletest.Names(evs))
	}
	var sub approval
	evs[len(evs)-1].Decode(t, &sub)
	// Nobody answers: the sub-agent's time runs out, and the turn's model
	// writes a file of its own.
	evs = st.Until(t, protocol.EventApprovalRequired, protocol.EventDone, protocol.EventError)
	if evs[len(evs)-1].Name != protocol.EventApprovalRequired {
		t.Fatalf("the turn asked no approval after its sub-agent stopped: %v", waggletest.Names(evs))
	}
	var own approval
	evs[len(evs)-1].Decode(t, &own)
	if !strings.Contains(string(own.Input), "parent.md") {
		t.Fatalf("second approval is for %s, want the turn's parent.md", own.Input)
	}
	want := `[Scribe] ✖ write_file approval withdrawn: the sub-agent stopped at its time limit of 2s`
	if steps := waggletest.Steps(evs); !slices.Contains(steps, want) {
		t.Errorf("steps %q lack %q", steps, want)
	}

	resp := p.Do(t, "GET", "/api/approval/pending", nil)
	var pending struct {
		Pending []approval `json:"pending"`
	}
	err := json.NewDecoder(resp.Body).Decode(&pending)
	resp.Body.Close()
	if err != nil || len(pending.Pending) != 1 || pending.Pending[0].RequestID != own.RequestID {
		t.Errorf("pending approvals %+v (%v), want only the turn's %s", pending.Pending, err, own.RequestID)
	}
	resp = p.Do(t, "POST", "/api/approval/"+sub.RequestID, map[string]any{"approved": true})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "No pending approval with that ID") {
		t.Errorf("approving the withdrawn approval: %d %s, want 404 No pending approval", resp.StatusCode, body)
	}

	p.Do(t, "POST", "/api/approval/"+own.RequestID, map[string]any{"approved": true}).Body.Close()
	if rest := st.All(t); rest[len(rest)-1].Name != protocol.EventDone {
		t.Fatalf("turn ended with %s", rest[len(rest)-1].Name)
	}
	if _, err := os.Stat(filepath.Join(files, "sub.md")); !os.IsNotExist(err) {
		t.Errorf("the withdrawn approval's file was written (%v)", err)
	}
	if b, err := os.ReadFile(filepath.Join(files, "parent.md")); err != nil || string(b) != "mine\n" {
		t.Errorf("parent.md %q, %v", b, err)
	}
}
