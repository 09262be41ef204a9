// Package agentcontext holds black-box tests of what the agent knows: a
// real waggle app talking to libs/llmtest, asserting on the system prompt
// the scripted model received and on the profile and briefing routes.
package agentcontext

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
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

type obj = map[string]any

const ws = "acme"

// start runs waggle against a model that always answers "ok".
func start(t testing.TB, opts ...waggletest.Option) (*waggletest.Server, *llmtest.Server) {
	t.Helper()
	llm := llmtest.New(llmtest.WithDefault(llmtest.Reply("ok")))
	llm.Start()
	t.Cleanup(llm.Close)
	srv := waggletest.Start(t, append([]waggletest.Option{waggletest.WithLLM(llm.URL())}, opts...)...)
	if st := srv.JSON(http.MethodPost, "/api/workspaces", obj{"name": "Acme"}, nil); st != http.StatusCreated {
		t.Fatalf("create workspace: %d", st)
	}
	return srv, llm
}

// turn runs one chat turn to done and returns the system prompt the
// model received for it.
func turn(t *testing.T, srv *waggletest.Server, llm *llmtest.Server, session, message string) string {
	t.Helper()
	before := len(llm.ChatRequests())
	evs := srv.Chat(obj{"message": message, "workspace": ws, "session": session}).All(t)
	if names := waggletest.Names(evs); names[len(names)-1] != "done" {
		t.Fatalf("turn %q: events %v", message, names)
	}
	reqs := llm.ChatRequests()
	if len(reqs) <= before {
		t.Fatalf("turn %q reached no model", message)
	}
	m := reqs[before].Chat.Messages[0]
	if m.Role != "system" {
		t.Fatalf("first message %+v", m)
	}
	return m.Content
}

func addFrame(t *testing.T, srv *waggletest.Server, body obj) {
	t.Helper()
	var rep obj
	if st := srv.JSON(http.MethodPost, "/api/memory/frames", body, &rep); st != 200 || rep["saved"] != true {
		t.Fatalf("add frame %v: %d %v", body, st, rep)
	}
}

func mustContain(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}

// TestProfileReachesThePrompt: what PUT /api/profile saves is merged into
// the original's profile shape, kept in the data dir's profile.json, and
// the next turn's prompt knows the user's name.
func TestProfileReachesThePrompt(t *testing.T) {
	srv, llm := start(t)
	var p obj
	if st := srv.JSON(http.MethodGet, "/api/profile", nil, &p); st != 200 || p["name"] != "" || p["communicationStyle"] != "balanced" {
		t.Fatalf("default profile: %d %v", st, p)
	}
	body := obj{"name": "Ada Lovelace", "role": "CTO", "writingStyle": obj{"tone": "casual"}, "brand": obj{"styles": obj{"docx": obj{"margins": "wide", "notes": ""}}}}
	if st := srv.JSON(http.MethodPut, "/api/profile", body, &p); st != 200 {
		t.Fatalf("put profile: %d", st)
	}
	ws := p["writingStyle"].(obj)
	styles := p["brand"].(obj)["styles"].(obj)
	if p["name"] != "Ada Lovelace" || ws["tone"] != "casual" || ws["vocabulary"] != "moderate" ||
		styles["docx"].(obj)["margins"] != "wide" || styles["pptx"].(obj)["layout"] != "16:9" || p["updatedAt"] == "" {
		t.Errorf("merged profile %v", p)
	}
	// Unknown keys and wrong types are refused, the profile unchanged.
	for _, bad := range []obj{{"nmae": "typo"}, {"name": 7}, {"writingStyle": obj{"tone": "x", "colour": "red"}}} {
		if st := srv.JSON(http.MethodPut, "/api/profile", bad, nil); st != http.StatusBadRequest {
			t.Errorf("put %v: %d, want 400", bad, st)
		}
	}
	data, err := os.ReadFile(filepath.Join(srv.DataDir, "profile.json"))
	if err != nil {
		t.Fatal(err)
	}
	var stored obj
	if err := json.Unmarshal(data, &stored); err != nil || stored["name"] != "Ada Lovelace" {
		t.Fatalf("profile.json %s (%v)", data, err)
	}
	if info, err := os.Stat(filepath.Join(srv.DataDir, "profile.json")); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("profile.json mode %v (%v)", info.Mode(), err)
	}

	var style, brand obj
	if st := srv.JSON(http.MethodGet, "/api/profile/style", nil, &style); st != 200 ||
		style["summary"] != "Tone: casual. Sentences: medium. Vocabulary: moderate. Structure: mixed." || style["tone"] != "casual" {
		t.Errorf("style: %d %v", st, style)
	}
	if st := srv.JSON(http.MethodGet, "/api/profile/brand", nil, &brand); st != 200 || brand["primaryColor"] != "#D4A84B" {
		t.Errorf("brand: %d %v", st, brand)
	}
	sys := turn(t, srv, llm, "s1", "How should I plan the launch of our product next quarter?")
	mustContain(t, "system prompt", sys, "# About the User", "- Name: Ada Lovelace", "- Role: CTO", "# How You Work")
}

// TestPreferencesAndCorrectionsEveryTurn: a preference and a correction
// saved earlier reach an unrelated later turn, which recall alone would
// not find, the correction in its own section.
func TestPreferencesAndCorrectionsEveryTurn(t *testing.T) {
	srv, llm := start(t)
	addFrame(t, srv, obj{"content": "User preference: answer in French"})
	addFrame(t, srv, obj{"content": "Correction from user: the launch budget is 40k, not 30k", "importance": "important"})

	sys := turn(t, srv, llm, "s1", "hi there")
	mustContain(t, "system prompt", sys,
		"## Personal Preferences (across all workspaces)\n- User preference: answer in French",
		"# User Corrections (from earlier sessions — follow these)\n- [", "] the launch budget is 40k, not 30k")
	if strings.Contains(sys, "## Personal Memory") {
		t.Errorf("a greeting recalled memories; the test would not show preloading:\n%s", sys)
	}

	// A preference the user states in a turn (auto-saved) reaches a later,
	// unrelated turn in another session.
	turn(t, srv, llm, "s2", "I prefer tables over prose in every report")
	sys = turn(t, srv, llm, "s3", "hello again")
	mustContain(t, "system prompt", sys, "- User preference: I prefer tables over prose in every report")
}

// TestWorkspaceNowAfterAFewTurns: after a few turns and a decision, the
// next turn's prompt carries the workspace's briefing, /catchup shows it,
// and GET /api/workspaces/{id}/context answers in the original's shape.
func TestWorkspaceNowAfterAFewTurns(t *testing.T) {
	srv, llm := start(t)
	empty := turn(t, srv, llm, "s1", "Let us plan the spring launch of the product")
	if strings.Contains(empty, "# Workspace Now") {
		t.Errorf("a workspace with nothing to tell has a briefing:\n%s", empty)
	}
	turn(t, srv, llm, "s1", "The launch needs a landing page and a press kit")
	addFrame(t, srv, obj{"content": "Decision: the launch date is 14 April", "workspace": ws, "importance": "important"})
	addFrame(t, srv, obj{"content": "Task: write the press kit", "workspace": ws})

	sys := turn(t, srv, llm, "s2", "Draft an agenda for tomorrow's meeting")
	mustContain(t, "system prompt", sys, "# Workspace Now — Acme", "## Recent Decisions\n- Decision: the launch date is 14 April",
		"## Active Threads\n- ", "## Progress\n- task: write the press kit", "## Likely Next Actions\n- Continue: write the press kit")

	var rep struct {
		Result string `json:"result"`
	}
	if st := srv.JSON(http.MethodPost, "/api/commands/execute", obj{"command": "/catchup", "workspaceId": ws}, &rep); st != 200 {
		t.Fatalf("catchup: %d", st)
	}
	mustContain(t, "/catchup", rep.Result, "# Workspace Now — Acme", "Decision: the launch date is 14 April")
	if strings.Contains(rep.Result, "No workspace state available") {
		t.Errorf("/catchup: %q", rep.Result)
	}
	if st := srv.JSON(http.MethodPost, "/api/commands/execute", obj{"command": "/now", "workspaceId": ws}, &rep); st != 200 ||
		!strings.HasPrefix(rep.Result, "## Right Now\n\n# Workspace Now — Acme") {
		t.Errorf("/now: %d %q", st, rep.Result)
	}

	var ctx struct {
		Workspace struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"workspace"`
		Summary         string   `json:"summary"`
		RecentThreads   []obj    `json:"recentThreads"`
		RecentDecisions []obj    `json:"recentDecisions"`
		RecentMemories  []obj    `json:"recentMemories"`
		ProgressItems   []obj    `json:"progressItems"`
		Suggested       []string `json:"suggestedPrompts"`
		Stats           struct {
			MemoryCount, SessionCount, FileCount int
		} `json:"stats"`
		LastActive   string   `json:"lastActive"`
		Greeting     string   `json:"greeting"`
		PendingTasks []string `json:"pendingTasks"`
	}
	if st := srv.JSON(http.MethodGet, "/api/workspaces/"+ws+"/context", nil, &ctx); st != 200 {
		t.Fatalf("context: %d", st)
	}
	if ctx.Workspace.ID != ws || ctx.Workspace.Name != "Acme" || ctx.Stats.SessionCount < 1 || ctx.Stats.MemoryCount != 2 ||
		len(ctx.RecentDecisions) != 1 || ctx.RecentDecisions[0]["content"] != "Decision: the launch date is 14 April" || ctx.RecentDecisions[0]["date"] == "" ||
		len(ctx.RecentThreads) == 0 || ctx.RecentThreads[0]["lastActive"] == "" || ctx.LastActive == "" ||
		!slices.Contains(ctx.Suggested, "Catch me up on this workspace") || !slices.Equal(ctx.PendingTasks, []string{"write the press kit"}) ||
		!strings.HasPrefix(ctx.Summary, "Decision: the launch date is 14 April.") {
		t.Errorf("context %+v", ctx)
	}
	resp := srv.Do(http.MethodGet, "/api/workspaces/nope/context", nil)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown workspace: %d", resp.StatusCode)
	}
}

// TestCatchUpRecallsByImportance: "catch me up" recalls the workspace's
// important frames by importance and recency, not by the words of the
// message, under the per-mind headings with date and importance.
func TestCatchUpRecallsByImportance(t *testing.T) {
	srv, llm := start(t)
	addFrame(t, srv, obj{"content": "Decision: pricing stays at 20 dollars", "workspace": ws, "importance": "critical"})
	addFrame(t, srv, obj{"content": "The office plants need water", "workspace": ws, "importance": "temporary"})
	sys := turn(t, srv, llm, "s1", "catch me up")
	mustContain(t, "system prompt", sys, "wants to catch up", "## Workspace Memory\n- [", ", critical] Decision: pricing stays at 20 dollars")
	if strings.Contains(sys, "Workspace Memory\n- [") && strings.Contains(sys[strings.Index(sys, "## Workspace Memory"):], "office plants") {
		t.Errorf("a temporary frame was recalled for a catch-up:\n%s", sys)
	}
}

// TestPromptBudgetTrimsInOrder: with a small --prompt-budget the prompt
// stays under it: the recent workspace memory loses lines first while
// Workspace Now and the user's corrections stay whole.
func TestPromptBudgetTrimsInOrder(t *testing.T) {
	const budget = 1000
	srv, llm := start(t, waggletest.WithConfig(func(c *app.Config) { c.TurnRunner.PromptBudget = budget }))
	for _, c := range []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"} {
		addFrame(t, srv, obj{"content": "Milestone " + c + ": " + strings.Repeat(c+" ", 30), "workspace": ws, "importance": "important"})
	}
	addFrame(t, srv, obj{"content": "Correction from user: the launch budget is 40k, not 30k"})

	sys := turn(t, srv, llm, "s1", "hi there")
	if tokens := (len(sys) + 3) / 4; tokens > budget {
		t.Errorf("prompt of %d tokens over its budget %d", tokens, budget)
	}
	// Recent memory is trimmed first, from its last line; the parts
	// trimmed later (Workspace Now, corrections) are whole.
	mustContain(t, "system prompt", sys, "# Who You Are", "# How You Work", "# User Corrections", "the launch budget is 40k",
		"# Workspace Now — Acme", "## Recent Workspace Memory\n- [important] Milestone hotel")
	if strings.Contains(sys, "Milestone alpha") {
		t.Errorf("recent memory kept whole over the budget:\n%s", sys)
	}

	// With the default budget the same turn keeps it.
	srv2, llm2 := start(t)
	addFrame(t, srv2, obj{"content": "Milestone alpha: " + strings.Repeat("alpha ", 30), "workspace": ws, "importance": "important"})
	if sys := turn(t, srv2, llm2, "s1", "hi there"); !strings.Contains(sys, "## Recent Workspace Memory\n- [important] Milestone alpha") {
		t.Errorf("default budget dropped the recent memory:\n%s", sys)
	}
}

// TestWorkspaceNowShowsTranscriptProgress: what was said in the
// workspace's conversations — a task the user set, a blocker — is
// Workspace Now's progress in a later session's prompt and in the
// briefing, without anyone saving a frame.
func TestWorkspaceNowShowsTranscriptProgress(t *testing.T) {
	srv, llm := start(t)
	turn(t, srv, llm, "s1", "We need to book the venue for the launch party")
	turn(t, srv, llm, "s1", "We are blocked by the deposit terms of the venue contract")

	sys := turn(t, srv, llm, "s2", "Draft an agenda for tomorrow's meeting")
	mustContain(t, "system prompt", sys, "# Workspace Now — Acme",
		"## Progress\n- task: book the venue for the launch party\n- blocker: the deposit terms of the venue contract",
		"## Likely Next Actions\n- Resolve: the deposit terms of the venue contract\n- Continue: book the venue for the launch party")

	var ctx struct {
		ProgressItems []protocol.ProgressItem `json:"progressItems"`
		PendingTasks  []string                `json:"pendingTasks"`
	}
	if st := srv.JSON(http.MethodGet, "/api/workspaces/"+ws+"/context", nil, &ctx); st != 200 {
		t.Fatalf("context: %d", st)
	}
	if len(ctx.ProgressItems) != 2 || ctx.ProgressItems[0].Type != "task" || ctx.ProgressItems[0].Date == "" ||
		!slices.Equal(ctx.PendingTasks, []string{"book the venue for the launch party", "the deposit terms of the venue contract"}) {
		t.Errorf("briefing progress %+v pending %q", ctx.ProgressItems, ctx.PendingTasks)
	}
}

// TestWorkspaceNowReadsTheNewest200Frames: the briefing reads a bounded
// window of the workspace's newest frames — an old frame past the 200th
// is not in it however important — while its count is the mind's total.
func TestWorkspaceNowReadsTheNewest200Frames(t *testing.T) {
	srv, _ := start(t)
	addFrame(t, srv, obj{"content": "Decision: the oldest critical fact", "workspace": ws, "importance": "critical"})
	for i := range 200 {
		addFrame(t, srv, obj{"content": fmt.Sprintf("Note %d about the launch", i), "workspace": ws})
	}
	var ctx struct {
		RecentMemories []protocol.MemoryBrief `json:"recentMemories"`
		Stats          protocol.WorkspaceCounts
	}
	if st := srv.JSON(http.MethodGet, "/api/workspaces/"+ws+"/context", nil, &ctx); st != 200 {
		t.Fatalf("context: %d", st)
	}
	if ctx.Stats.MemoryCount != 201 || len(ctx.RecentMemories) == 0 {
		t.Fatalf("stats %+v memories %d", ctx.Stats, len(ctx.RecentMemories))
	}
	for _, m := range ctx.RecentMemories {
		if strings.Contains(m.Content, "oldest critical") {
			t.Errorf("a frame older than the newest 200 was read: %+v", m)
		}
	}
	// The newest ones are.
	if !strings.Contains(ctx.RecentMemories[0].Content, "Note 199") {
		t.Errorf("newest memory %+v", ctx.RecentMemories[0])
	}
}
