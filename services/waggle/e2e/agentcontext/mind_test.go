package agentcontext

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestIdentityAndAwareness: an identity saved with POST /api/identity is
// read back in the original's shape and reaches the prompt; a task the
// model adds with add_task is in /api/mind/awareness, get_awareness's
// result and the next turn's prompt.
func TestIdentityAndAwareness(t *testing.T) {
	llm := llmtest.New(llmtest.WithResponses(
		llmtest.Response{Steps: llmtest.Steps(llmtest.ToolCall(0, "c1", "add_task", `{"content":"write the press kit","priority":8}`, 2))},
		llmtest.Reply("Added."),
		llmtest.Response{Steps: llmtest.Steps(llmtest.ToolCall(0, "c2", "get_awareness", `{}`, 1))},
		llmtest.Reply("You have one task."),
	), llmtest.WithDefault(llmtest.Reply("ok")))
	llm.Start()
	t.Cleanup(llm.Close)
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()))
	if st := srv.JSON(http.MethodPost, "/api/workspaces", obj{"name": "Acme"}, nil); st != http.StatusCreated {
		t.Fatalf("create workspace: %d", st)
	}

	var id obj
	if st := srv.JSON(http.MethodGet, "/api/identity", nil, &id); st != 200 || id["configured"] != false || id["name"] != nil {
		t.Fatalf("placeholder identity: %d %v", st, id)
	}
	if st := srv.JSON(http.MethodPost, "/api/identity", obj{"workspace": ws, "name": "Bee", "role": "launch assistant"}, &id); st != 200 ||
		id["configured"] != true || id["name"] != "Bee" || id["department"] != "" || id["created_at"] == nil {
		t.Fatalf("set identity: %d %v", st, id)
	}
	if st := srv.JSON(http.MethodPost, "/api/identity", obj{"name": "Bee", "voice": "loud"}, nil); st != http.StatusBadRequest {
		t.Errorf("unknown identity key: %d", st)
	}
	srv.JSON(http.MethodGet, "/api/identity?workspace="+ws, nil, &id)
	if id["name"] != "Bee" {
		t.Errorf("workspace identity %v", id)
	}
	if srv.JSON(http.MethodGet, "/api/identity", nil, &id); id["configured"] != false {
		t.Errorf("the personal mind got the workspace's identity: %v", id)
	}
	var mi struct {
		Identity string `json:"identity"`
	}
	srv.JSON(http.MethodGet, "/api/mind/identity?workspace="+ws, nil, &mi)
	if mi.Identity != "Name: Bee\nRole: launch assistant" {
		t.Errorf("mind identity %q", mi.Identity)
	}

	chat := func(message string) string {
		before := len(llm.ChatRequests())
		evs := srv.Chat(obj{"message": message, "workspace": ws, "session": "s1"}).All(t)
		if names := waggletest.Names(evs); names[len(names)-1] != "done" {
			t.Fatalf("events %v", names)
		}
		return llm.ChatRequests()[before].Chat.Messages[0].Content
	}
	sys := chat("Please track the press kit as a task for me")
	mustContain(t, "system prompt", sys, "## Your Configured Identity\nName: Bee\nRole: launch assistant")

	var aw struct {
		Awareness string `json:"awareness"`
	}
	srv.JSON(http.MethodGet, "/api/mind/awareness?workspace="+ws, nil, &aw)
	if aw.Awareness != "Active Tasks:\n- write the press kit" {
		t.Errorf("awareness %q", aw.Awareness)
	}
	sys = chat("What am I tracking right now, according to your state?")
	mustContain(t, "system prompt", sys, "## Active Tasks & State\nActive Tasks:\n- write the press kit")
	reqs := llm.ChatRequests()
	last := reqs[len(reqs)-1].Chat.Messages
	if m := last[len(last)-1]; m.Role != "tool" || !strings.Contains(m.Content, "Active Tasks:\n- write the press kit") {
		t.Errorf("get_awareness result %+v", m)
	}
	if srv.JSON(http.MethodGet, "/api/mind/awareness", nil, &aw); aw.Awareness != "No active awareness items." {
		t.Errorf("personal awareness %q", aw.Awareness)
	}
}

// TestMindSkills: GET /api/mind/skills lists the workspace's captured
// workflow patterns in the original's shape ({skills:[{name, length}],
// count}); the personal mind and a workspace without patterns have none.
func TestMindSkills(t *testing.T) {
	natsAddr := waggletest.FreeAddr(t)
	srv, _ := start(t, waggletest.WithConfig(func(c *app.Config) { c.NATSListen = natsAddr }))
	type list struct {
		Skills []struct {
			Name   string `json:"name"`
			Length int    `json:"length"`
		} `json:"skills"`
		Count int `json:"count"`
	}
	var l list
	if st := srv.JSON(http.MethodGet, "/api/mind/skills?workspace="+ws, nil, &l); st != 200 || l.Count != 0 || l.Skills == nil {
		t.Fatalf("no skills yet: %d %+v", st, l)
	}
	// Three turns with the same tool sequence make a pattern (the
	// runner reports each finished turn's sequence like this).
	nc := srv.DialNATS()
	seq := []string{"web_search", "web_fetch", "save_memory"}
	for i := range 3 {
		waggletest.Operate(t, nc, protocol.ObserveWorkflow, protocol.WorkflowObserveRequest{Workspace: ws, Session: fmt.Sprint("s", i), Tools: seq})
	}
	l = list{}
	if st := srv.JSON(http.MethodGet, "/api/mind/skills?workspaceId="+ws, nil, &l); st != 200 || l.Count != 1 || len(l.Skills) != 1 {
		t.Fatalf("after a repeated workflow: %d %+v", st, l)
	}
	want := protocol.WorkflowPattern{Name: "web_search-then-web_fetch-then-save_memory"}
	if s := l.Skills[0]; s.Name != want.Name || s.Length < 200 {
		t.Errorf("skill %+v", s)
	}
	l = list{}
	if st := srv.JSON(http.MethodGet, "/api/mind/skills", nil, &l); st != 200 || l.Count != 0 || l.Skills == nil {
		t.Errorf("personal mind: %d %+v", st, l)
	}
	if st := srv.JSON(http.MethodGet, "/api/mind/skills?workspace=../etc", nil, nil); st != http.StatusBadRequest {
		t.Errorf("a bad workspace id: %d", st)
	}
}
