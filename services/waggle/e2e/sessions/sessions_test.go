package sessions

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/services/waggle/waggletest"
)

const badSegment = `{"statusCode":400,"error":"Bad Request","message":"Invalid %s: contains illegal characters"}`

// TestUnsafeSegments is reference §7.9 over HTTP plus every sessions
// route: any unsafe id is a 400 in Fastify's shape naming the field.
func TestUnsafeSegments(t *testing.T) {
	srv := waggletest.Start(t)
	tests := []struct {
		method, path, field string
	}{
		{"GET", "/api/workspaces/..%2F..%2Fetc", "id"},
		{"DELETE", "/api/workspaces/..%2Fsecret", "id"},
		{"GET", "/api/workspaces/..%2F..%2Fetc/sessions", "workspaceId"},
		{"DELETE", "/api/sessions/..%2F..%2Fetc%2Fpasswd", "sessionId"},
		{"DELETE", "/api/sessions/valid-id?workspace=..%2F..%2Fetc", "workspace"},
		{"DELETE", "/api/sessions/valid-id?workspace=", "workspace"},
		{"PATCH", "/api/sessions/foo.bar", "sessionId"},
		{"PATCH", "/api/sessions/ok?workspace=a%20b", "workspace"},
		{"GET", "/api/sessions/foo.bar/summary", "sessionId"},
		{"GET", "/api/sessions/ok/summary?workspace=...", "workspace"},
		{"POST", "/api/workspaces/foo.bar/sessions", "workspaceId"},
		{"GET", "/api/workspaces/foo.bar/sessions/search?q=abc", "workspaceId"},
		{"GET", "/api/workspaces/foo.bar/sessions/s1/export", "workspaceId"},
		{"GET", "/api/workspaces/default/sessions/foo.bar/export", "sessionId"},
		{"GET", "/api/workspaces/foo%00bar/sessions/s1/timeline", "workspaceId"},
		{"GET", "/api/workspaces/default/sessions/" + strings.Repeat("x", 129) + "/timeline", "sessionId"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			expect(t, srv, tt.method, tt.path, map[string]any{"title": "t"}, 400, fmt.Sprintf(badSegment, tt.field))
		})
	}
}

// TestWorkspaceAPIScenario re-checks reference §7.8 over HTTP.
func TestWorkspaceAPIScenario(t *testing.T) {
	srv := waggletest.Start(t)
	var ws map[string]any
	if st := srv.JSON("POST", "/api/workspaces", map[string]any{"name": "Session Test WS", "group": "Test"}, &ws); st != 201 || ws["id"] == "" {
		t.Fatalf("create workspace: %d %v", st, ws)
	}
	id := ws["id"].(string)
	if got := list(t, srv, id, ""); len(got) != 0 {
		t.Fatalf("fresh workspace lists %v", got)
	}
	_, _, body := raw(t, srv, "GET", "/api/workspaces/"+id+"/sessions", nil)
	if strings.TrimSpace(body) != "[]" {
		t.Fatalf("empty list body %q", body)
	}

	named := createSession(t, srv, id, map[string]any{"title": "My First Chat"})
	if !strings.HasPrefix(named.ID, "session-") || named.Title != "My First Chat" || named.MessageCount != 0 || named.LastActive == "" || named.Created == "" || named.Summary != nil {
		t.Fatalf("named session: %+v", named)
	}
	if !regexp.MustCompile(`^session-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(named.ID) {
		t.Fatalf("id %q is not session-<uuid v4>", named.ID)
	}
	untitled := createSession(t, srv, id, map[string]any{})
	if untitled.Title != untitled.ID {
		t.Fatalf("untitled title %v", untitled.Title)
	}
	noBody := createSession(t, srv, id, nil) // the web client sends no body
	if noBody.Title != noBody.ID {
		t.Fatalf("no-body title %v", noBody.Title)
	}
	if got := list(t, srv, id, ""); len(got) != 3 || find(got, named.ID).MessageCount != 0 {
		t.Fatalf("list after create: %+v", got)
	}

	appendLines(t, sessionPath(srv, id, named.ID), msg("user", "Hello there"), msg("assistant", "Hi!"))
	got := find(list(t, srv, id, ""), named.ID)
	if got.MessageCount != 2 || got.Title != "My First Chat" {
		t.Fatalf("after append: %+v", got)
	}

	writeSession(t, srv, id, "q2", append([]string{`{"type":"meta","title":"Q2 Planning","created":"2026-03-09T09:00:00.000Z"}`}, q2...)...)
	q := find(list(t, srv, id, ""), "q2")
	want := "Help me plan the Q2 marketing campaign — 6 messages · decisions"
	if q == nil || q.Summary == nil || *q.Summary != want {
		t.Fatalf("lazy summary: %+v", q)
	}
	if meta := fileLines(t, sessionPath(srv, id, "q2"))[0]; meta["summary"] != want || meta["title"] != "Q2 Planning" {
		t.Fatalf("summary not written back: %v", meta)
	}
	writeSession(t, srv, id, "short", q2[:2]...)
	if s := find(list(t, srv, id, ""), "short"); s.Summary != nil || s.MessageCount != 2 {
		t.Fatalf("2-message session: %+v", s)
	}

	expect(t, srv, "DELETE", "/api/sessions/"+named.ID+"?workspace="+id, nil, 200, `{"deleted":true}`)
	if find(list(t, srv, id, ""), named.ID) != nil {
		t.Fatal("deleted session still listed")
	}
	expect(t, srv, "DELETE", "/api/sessions/nonexistent-session", nil, 404, `{"error":"Session not found"}`)
	expect(t, srv, "GET", "/api/workspaces/nonexistent-ws/sessions", nil, 200, `[]`)

	// Search part.
	writeSession(t, srv, id, "db", `{"type":"meta","title":"Database Design","created":"2026-03-09T09:00:00.000Z"}`,
		msg("user", "How should I design the Database schema for orders?"), msg("assistant", "Start with an orders table."))
	writeSession(t, srv, id, "other", msg("user", "What is the weather like?"), msg("assistant", "Sunny."))
	var res []searchResult
	if st := srv.JSON("GET", "/api/workspaces/"+id+"/sessions/search?q=database", nil, &res); st != 200 {
		t.Fatalf("search: %d", st)
	}
	if len(res) != 1 || res[0].SessionID != "db" || res[0].Title != "Database Design" || res[0].MatchCount < 1 || !strings.Contains(strings.ToLower(res[0].Snippets[0].Text), "database") {
		t.Fatalf("search results: %+v", res)
	}
	expect(t, srv, "GET", "/api/workspaces/"+id+"/sessions/search?q=a", nil, 400, `{"error":"Query must be at least 2 characters"}`)
	expect(t, srv, "GET", "/api/workspaces/"+id+"/sessions/search?q=quantum", nil, 200, `[]`)
}

func TestListOrderAndHideEmpty(t *testing.T) {
	srv := waggletest.Start(t)
	ws := createWorkspace(t, srv, "Order")
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	writeSession(t, srv, ws, "old", msg("user", "old one"))
	writeSession(t, srv, ws, "new", `{"type":"meta","title":null,"created":"2026-02-01T00:00:00.000Z"}`,
		msg("user", "This is a fairly long first message that exceeds the fifty character limit"))
	writeSession(t, srv, ws, "empty", `{"type":"meta","title":"Nothing yet","created":"2026-02-01T00:00:00.000Z"}`)
	touch(t, sessionPath(srv, ws, "old"), base)
	touch(t, sessionPath(srv, ws, "new"), base.Add(2*time.Hour))
	touch(t, sessionPath(srv, ws, "empty"), base.Add(time.Hour))

	got := list(t, srv, ws, "")
	var ids []string
	for _, s := range got {
		ids = append(ids, s.ID)
	}
	if strings.Join(ids, ",") != "new,empty,old" {
		t.Fatalf("order %v", ids)
	}
	n := got[0]
	if n.Title != "This is a fairly long first message that exceeds..." || n.Created != "2026-02-01T00:00:00.000Z" || n.LastActive != "2026-03-01T14:00:00.000Z" {
		t.Fatalf("derived fields: %+v", n)
	}
	if got[2].Title != "old one" {
		t.Fatalf("no-meta title: %v", got[2].Title)
	}
	for q, want := range map[string]int{"?hideEmpty=true": 2, "?hideEmpty=1": 3, "?hideEmpty=false": 3} {
		if got := list(t, srv, ws, q); len(got) != want {
			t.Errorf("%s: %d sessions, want %d", q, len(got), want)
		}
	}
	// An edit behind the store's back is seen on the next listing.
	appendLines(t, sessionPath(srv, ws, "empty"), msg("user", "now it has one"))
	if s := find(list(t, srv, ws, "?hideEmpty=true"), "empty"); s == nil || s.MessageCount != 1 {
		t.Fatalf("external append not seen: %+v", s)
	}
}

func TestSearch(t *testing.T) {
	srv := waggletest.Start(t)
	ws := createWorkspace(t, srv, "Search")
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// 25 sessions with one hit each, named to sort first, and one session
	// named to sort last with the most hits: a limit applied before sorting
	// (the original's bug) would miss it.
	for i := range 25 {
		id := fmt.Sprintf("a-%02d", i)
		writeSession(t, srv, ws, id, msg("user", "a note about Kubernetes"), msg("assistant", "ok"))
		touch(t, sessionPath(srv, ws, id), base.Add(time.Duration(i)*time.Minute))
	}
	writeSession(t, srv, ws, "zz-best",
		`{"type":"meta","title":"K8s","summary":"All about kubernetes","created":"2026-03-01T00:00:00.000Z"}`,
		msg("user", "kubernetes one"), msg("assistant", "KUBERNETES two\nline"), msg("user", "kubernetes three"), msg("assistant", "kubernetes four"))
	touch(t, sessionPath(srv, ws, "zz-best"), base)

	var res []searchResult
	srv.JSON("GET", "/api/workspaces/"+ws+"/sessions/search?q=KuBeRnEtEs&limit=1", nil, &res)
	if len(res) != 1 || res[0].SessionID != "zz-best" || res[0].MatchCount != 5 || len(res[0].Snippets) != 3 {
		t.Fatalf("limit after sort: %+v", res)
	}
	if s := res[0].Snippets; s[0].Role != "summary" || s[0].Text != "All about kubernetes" || s[2].Text != "KUBERNETES two line" || s[2].Role != "assistant" {
		t.Fatalf("snippets: %+v", s)
	}
	cases := map[string]int{"": 20, "&limit=0": 20, "&limit=abc": 20, "&limit=5": 5, "&limit=10abc": 10, "&limit=100": 26, "&limit=-3": 20}
	for q, want := range cases {
		res = nil
		srv.JSON("GET", "/api/workspaces/"+ws+"/sessions/search?q=kubernetes"+q, nil, &res)
		if len(res) != want {
			t.Errorf("limit %q: %d results, want %d", q, len(res), want)
		}
	}
	// Equal match counts: most recent first.
	srv.JSON("GET", "/api/workspaces/"+ws+"/sessions/search?q=note+about", nil, &res)
	if len(res) != 20 || res[0].SessionID != "a-24" || res[1].SessionID != "a-23" {
		t.Fatalf("recency order: %v %v", res[0].SessionID, res[1].SessionID)
	}
	// Cap at 50.
	for i := range 30 {
		writeSession(t, srv, ws, fmt.Sprintf("b-%02d", i), msg("user", "kubernetes again"))
	}
	srv.JSON("GET", "/api/workspaces/"+ws+"/sessions/search?q=kubernetes&limit=500", nil, &res)
	if len(res) != 50 {
		t.Fatalf("cap: %d", len(res))
	}
	// A session's own title is searched (the original ignored titles), and
	// so is escaped text.
	writeSession(t, srv, ws, "esc", `{"type":"meta","title":"Zebra talk","created":"2026-03-01T00:00:00.000Z"}`,
		`{"role":"user","content":"she said \"caf\u00e9 au lait\" / then left"}`)
	for q, want := range map[string]int{"zebra": 1, `"café`: 1, "café au": 1, "/ then": 1} {
		res = nil
		srv.JSON("GET", "/api/workspaces/"+ws+"/sessions/search?q="+urlQuery(q), nil, &res)
		if len(res) != want {
			t.Errorf("q=%q: %d results, want %d", q, len(res), want)
		}
	}

	// Order of checks: unsafe id, then unknown workspace, then query length.
	expect(t, srv, "GET", "/api/workspaces/nope/sessions/search?q=a", nil, 404, `{"error":"Workspace not found"}`)
	expect(t, srv, "GET", "/api/workspaces/"+ws+"/sessions/search", nil, 400, `{"error":"Query must be at least 2 characters"}`)
	expect(t, srv, "GET", "/api/workspaces/"+ws+"/sessions/search?q=%F0%9F%90%9D", nil, 200, `[]`) // one emoji = 2 UTF-16 units
}

func urlQuery(s string) string {
	r := strings.NewReplacer(" ", "+", `"`, "%22", "/", "%2F", "é", "%C3%A9")
	return r.Replace(s)
}

func TestExport(t *testing.T) {
	srv := waggletest.Start(t)
	writeSession(t, srv, "default", "chat", `{"type":"meta","title":"My Chat","summary":"Sum"}`,
		`{"role":"user","content":"Hello"}`, `{"role":"assistant","content":"Hi!\nThere"}`, `{"type":"tool","turnId":"t","callId":"c","name":"bash","input":{},"result":"x","isError":false,"status":"success","timestamp":"2026-03-19T10:00:00.000Z"}`)
	st, ct, body := raw(t, srv, "GET", "/api/workspaces/default/sessions/chat/export", nil)
	if st != 200 || ct != "text/markdown; charset=utf-8" || body != "# My Chat\n\n> Sum\n\n### **You**\n\nHello\n\n### **Assistant**\n\nHi!\nThere\n" {
		t.Fatalf("export: %d %q %q", st, ct, body)
	}
	writeSession(t, srv, "default", "blank", "  ")
	if _, _, body := raw(t, srv, "GET", "/api/workspaces/default/sessions/blank/export", nil); body != "# Session\n\n*Empty session*\n" {
		t.Fatalf("blank export %q", body)
	}
	expect(t, srv, "GET", "/api/workspaces/nope/sessions/chat/export", nil, 404, `{"error":"Workspace not found"}`)
	expect(t, srv, "GET", "/api/workspaces/default/sessions/missing/export", nil, 404, `{"error":"Session not found"}`)
}

func TestTimeline(t *testing.T) {
	srv := waggletest.Start(t)
	writeSession(t, srv, "default", "tools", msg("user", "go"),
		`{"type":"tool","turnId":"t1","callId":"c1","name":"spawn_agent","input":{"name":"researcher"},"result":"done","isError":false,"status":"success","durationMs":40,"timestamp":"2026-03-19T10:00:00.000Z"}`,
		`{"type":"tool","turnId":"t1","callId":"c2","name":"web_search","input":{"query":"bees"},"result":"Error: offline","isError":true,"status":"error","durationMs":5,"parent":"c1","timestamp":"2026-03-19T10:00:01.000Z"}`,
		msg("assistant", "Using bash... Searching the web for \"ignored\""))
	var evs []map[string]any
	if st := srv.JSON("GET", "/api/workspaces/default/sessions/tools/timeline", nil, &evs); st != 200 {
		t.Fatalf("timeline: %d", st)
	}
	if len(evs) != 1 || evs[0]["toolName"] != "spawn_agent" || evs[0]["status"] != "success" {
		t.Fatalf("recorded timeline: %v", evs)
	}
	kids, _ := evs[0]["children"].([]any)
	if len(kids) != 1 || kids[0].(map[string]any)["toolName"] != "web_search" || kids[0].(map[string]any)["status"] != "error" {
		t.Fatalf("children: %v", evs[0]["children"])
	}

	// An old file without tool events falls back to the text heuristics.
	writeSession(t, srv, "default", "old", msg("user", "find"), msg("assistant", `Searching the web for "go generics"`))
	srv.JSON("GET", "/api/workspaces/default/sessions/old/timeline", nil, &evs)
	if len(evs) != 1 || evs[0]["toolName"] != "web_search" || evs[0]["inputPreview"] != "go generics" {
		t.Fatalf("heuristic timeline: %v", evs)
	}
	writeSession(t, srv, "default", "plain", msg("user", "hi"))
	expect(t, srv, "GET", "/api/workspaces/default/sessions/plain/timeline", nil, 200, `[]`)
	expect(t, srv, "GET", "/api/workspaces/nope/sessions/plain/timeline", nil, 404, `{"error":"Workspace not found"}`)
	expect(t, srv, "GET", "/api/workspaces/default/sessions/missing/timeline", nil, 404, `{"error":"Session not found"}`)
}

func TestCreateErrorsAndTitles(t *testing.T) {
	srv := waggletest.Start(t)
	expect(t, srv, "POST", "/api/workspaces/nope/sessions", map[string]any{"title": "x"}, 404, `{"error":"Workspace not found"}`)
	empty := createSession(t, srv, "default", map[string]any{"title": ""})
	if empty.Title != "" {
		t.Fatalf("empty title %q", empty.Title)
	}
	meta := fileLines(t, sessionPath(srv, "default", empty.ID))[0]
	if meta["type"] != "meta" || meta["title"] != "" || meta["created"] != empty.Created {
		t.Fatalf("meta line %v", meta)
	}
	if s := find(list(t, srv, "default", ""), empty.ID); s == nil || s.Title != empty.ID {
		t.Fatalf("empty title lists as the id: %+v", s)
	}
	null := createSession(t, srv, "default", map[string]any{"title": nil})
	if null.Title != null.ID || fileLines(t, sessionPath(srv, "default", null.ID))[0]["title"] != nil {
		t.Fatalf("null title: %+v", null)
	}
}

func TestRenameDeleteSummary(t *testing.T) {
	srv := waggletest.Start(t)
	ws := createWorkspace(t, srv, "Other")
	writeSession(t, srv, ws, "s1", append([]string{`{"type":"meta","title":"Old","created":"2026-03-09T09:00:00.000Z","distilled":true}`}, q2...)...)
	writeSession(t, srv, ws, "nometa", msg("user", "first"))

	expect(t, srv, "PATCH", "/api/sessions/s1?workspace="+ws, map[string]any{"title": "New"}, 200, `{"id":"s1","title":"New"}`)
	expect(t, srv, "PATCH", "/api/sessions/nometa", map[string]any{"title": "Found anywhere"}, 200, `{"id":"nometa","title":"Found anywhere"}`)
	lines := fileLines(t, sessionPath(srv, ws, "s1"))
	if len(lines) != 7 || lines[0]["title"] != "New" || lines[0]["distilled"] != true || lines[0]["created"] != "2026-03-09T09:00:00.000Z" {
		t.Fatalf("renamed file: %v", lines[0])
	}
	if l := fileLines(t, sessionPath(srv, ws, "nometa")); len(l) != 2 || l[0]["type"] != "meta" || l[0]["title"] != "Found anywhere" || l[1]["content"] != "first" {
		t.Fatalf("meta prepended: %v", l)
	}
	if s := find(list(t, srv, ws, ""), "s1"); s.Title != "New" {
		t.Fatalf("listed title %v", s.Title)
	}

	for _, tt := range []struct {
		method, path string
		body         any
		status       int
		want         string
	}{
		{"PATCH", "/api/sessions/s1", map[string]any{}, 400, `{"error":"title is required"}`},
		{"PATCH", "/api/sessions/s1", map[string]any{"title": ""}, 400, `{"error":"title is required"}`},
		{"PATCH", "/api/sessions/s1", nil, 400, `{"error":"title is required"}`},
		{"PATCH", "/api/sessions/s1", map[string]any{"title": 7}, 400, `{"error":"title must be a string"}`},
		{"PATCH", "/api/sessions/missing", map[string]any{"title": "x"}, 404, `{"error":"Session not found"}`},
		{"PATCH", "/api/sessions/s1?workspace=default", map[string]any{"title": "x"}, 404, `{"error":"Session not found"}`},
		{"GET", "/api/sessions/missing/summary", nil, 404, `{"error":"Session not found"}`},
		{"GET", "/api/sessions/s1/summary?workspace=default", nil, 404, `{"error":"Session not found"}`},
		{"DELETE", "/api/sessions/s1?workspace=default", nil, 404, `{"error":"Session not found"}`},
	} {
		expect(t, srv, tt.method, tt.path, tt.body, tt.status, tt.want)
	}

	var sum map[string]any
	if st := srv.JSON("GET", "/api/sessions/s1/summary", nil, &sum); st != 200 {
		t.Fatalf("summary: %d", st)
	}
	want := map[string]any{"sessionId": "s1", "title": "New", "messageCount": 6.0, "userMessages": 3.0, "assistantMessages": 3.0,
		"toolsUsed": 0.0, "memoriesSaved": 0.0, "documentsCreated": 0.0, "summary": "Help me plan the Q2 marketing campaign — 6 messages · decisions",
		"created": "2026-03-09T09:00:00.000Z"}
	for k, v := range want {
		if sum[k] != v {
			t.Errorf("summary[%s] = %v, want %v", k, sum[k], v)
		}
	}
	srv.JSON("GET", "/api/sessions/nometa/summary?workspace="+ws, nil, &sum)
	if sum["summary"] != "No summary available" || sum["messageCount"] != 1.0 || sum["title"] != "Found anywhere" {
		t.Fatalf("short summary: %v", sum)
	}

	expect(t, srv, "DELETE", "/api/sessions/s1", nil, 200, `{"deleted":true}`)
	expect(t, srv, "DELETE", "/api/sessions/s1", nil, 404, `{"error":"Session not found"}`)
}

// TestDefaultWorkspaceHoldsUnscopedChats: a chat naming no workspace lands
// in "default" and is listed there.
func TestDefaultWorkspaceHoldsUnscopedChats(t *testing.T) {
	srv := waggletest.Start(t)
	srv.Chat(map[string]any{"message": "hello from nowhere", "session": "loose-chat"}).All(t)
	s := find(list(t, srv, "default", ""), "loose-chat")
	if s == nil || s.MessageCount != 2 || s.Title != "hello from nowhere" {
		t.Fatalf("unscoped chat in default: %+v", s)
	}
	var md string
	_, _, md = raw(t, srv, http.MethodGet, "/api/workspaces/default/sessions/loose-chat/export", nil)
	if !strings.Contains(md, "### **You**") || !strings.Contains(md, "hello from nowhere") {
		t.Fatalf("export of chat: %q", md)
	}
}
