// Package storetest is the one conformance suite every session-store
// backend passes (DESIGN §6): the same test functions run against the
// JSONL files and PostgreSQL. Run it from a backend's tests with a
// constructor giving a fresh, empty, started store per call.
//
// Behaviour only some stores have is tested through capability
// interfaces (RawSessions), and skipped for stores without them.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore"
	"github.com/waggle-os/core/services/sessionstore/workspaces"
)

// RawSessions is implemented by stores whose sessions are files a test can
// write byte for byte (torn and malformed lines exist only there).
type RawSessions interface {
	WriteRawSession(ws, session string, data []byte) error
}

// Run runs every conformance test against stores made by newStore (a
// fresh empty store per call, closed by newStore's own cleanup).
func Run(t *testing.T, newStore func(t *testing.T) sessionstore.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s sessionstore.Store)
	}{
		{"DefaultWorkspace", testDefaultWorkspace},
		{"WorkspaceCreate", testWorkspaceCreate},
		{"WorkspaceUpdate", testWorkspaceUpdate},
		{"WorkspaceNotFound", testWorkspaceNotFound},
		{"WorkspaceDelete", testWorkspaceDelete},
		{"SessionCreate", testSessionCreate},
		{"AppendAndHistory", testAppendAndHistory},
		{"KeyedAppendsAreStoredOnce", testKeyedAppends},
		{"ListOrderAndTitles", testListOrderAndTitles},
		{"LazySummary", testLazySummary},
		{"SessionDigestsReadOnly", testSessionDigests},
		{"RenameAndLocate", testRenameAndLocate},
		{"DeleteSession", testDeleteSession},
		{"ExportAndTimeline", testExportAndTimeline},
		{"SessionSummary", testSessionSummary},
		{"SearchValidation", testSearchValidation},
		{"SearchRanking", testSearchRanking},
		{"SearchSnippetsAndScope", testSearchSnippetsAndScope},
		{"ConcurrentWritersLoseNothing", testConcurrentWriters},
		{"TornAndMalformedLines", testTornLines},
		{"WritesAfterTheDeadlineDoNothing", testWritesAfterTheDeadline},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

var ctx = context.Background()

// must(f())(t) is f's value, failing t on f's error.
func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func raw(t *testing.T, v map[string]any) workspaces.Doc {
	t.Helper()
	doc := workspaces.Doc{}
	for k, x := range v {
		b, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		doc[k] = b
	}
	return doc
}

func str(d workspaces.Doc, k string) string {
	var s string
	_ = json.Unmarshal(d[k], &s)
	return s
}

// wantKind checks err is a protocol error of kind (and message when not
// empty).
func wantKind(t *testing.T, what string, err error, kind protocol.Kind, msg string) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Kind != kind || msg != "" && pe.Message != msg {
		t.Fatalf("%s: got %v, want %s %q", what, err, kind, msg)
	}
}

func ref(ws, id string) protocol.SessionRef { return protocol.SessionRef{Workspace: ws, Session: id} }

func appendMsg(t *testing.T, s sessionstore.Store, ws, id, role, content string) {
	t.Helper()
	m := protocol.Message{Role: role, Content: content, Timestamp: protocol.Timestamp(time.Now())}
	if _, err := s.Append(ctx, protocol.AppendRequest{SessionRef: ref(ws, id), Message: &m}); err != nil {
		t.Fatalf("append to %s/%s: %v", ws, id, err)
	}
}

func appendTool(t *testing.T, s sessionstore.Store, ws, id string, ev protocol.ToolEvent) {
	t.Helper()
	if ev.Timestamp == "" {
		ev.Timestamp = protocol.Timestamp(time.Now())
	}
	if _, err := s.Append(ctx, protocol.AppendRequest{SessionRef: ref(ws, id), Tool: &ev}); err != nil {
		t.Fatalf("append tool to %s/%s: %v", ws, id, err)
	}
}

func newWorkspace(t *testing.T, s sessionstore.Store, name string) string {
	t.Helper()
	d, err := s.CreateWorkspace(ctx, raw(t, map[string]any{"name": name}), nil)
	if err != nil {
		t.Fatal(err)
	}
	return d.ID()
}

func list(t *testing.T, s sessionstore.Store, ws string) []protocol.SessionInfo {
	t.Helper()
	return must(s.ListSessions(ctx, protocol.SessionListRequest{Workspace: ws}))(t)
}

func find(infos []protocol.SessionInfo, id string) (protocol.SessionInfo, bool) {
	for _, i := range infos {
		if i.ID == id {
			return i, true
		}
	}
	return protocol.SessionInfo{}, false
}

// tick lets the clock move on, so orderings by time are well defined:
// past the millisecond lastActive is kept in and past the filesystem's
// timestamp granularity (file mtimes come from the kernel's coarse clock,
// one scheduler tick, 4 ms and more).
func tick() { time.Sleep(15 * time.Millisecond) }

func testDefaultWorkspace(t *testing.T, s sessionstore.Store) {
	for range 2 {
		if err := s.EnsureDefault(ctx); err != nil {
			t.Fatal(err)
		}
	}
	docs := must(s.ListWorkspaces(ctx))(t)
	var n int
	for _, d := range docs {
		if d.ID() == workspaces.DefaultID {
			n++
			if str(d, "name") != workspaces.DefaultName || str(d, "created") == "" {
				t.Errorf("default doc = %s", d)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d default workspaces after two EnsureDefault, want 1", n)
	}
	if ok := must(s.WorkspaceExists(ctx, workspaces.DefaultID))(t); !ok {
		t.Fatal("default does not exist")
	}
}

func testWorkspaceCreate(t *testing.T, s sessionstore.Store) {
	d := must(s.CreateWorkspace(ctx, raw(t, map[string]any{
		"name": "Research Team!", "teamId": "t1", "custom": map[string]any{"k": []int{1, 2}}, "model": nil,
	}), nil))(t)
	if d.ID() != "research-team" || str(d, "created") == "" || str(d, "teamId") != "t1" {
		t.Fatalf("created %s", d)
	}
	if _, ok := d["model"]; ok {
		t.Errorf("null field kept on create: %s", d)
	}
	got := must(s.GetWorkspace(ctx, "research-team"))(t)
	if string(got["custom"]) != `{"k":[1,2]}` || str(got, "name") != "Research Team!" {
		t.Errorf("get = %s", got)
	}
	if w := got.Workspace(); w.TeamID != "t1" || w.ID != "research-team" {
		t.Errorf("typed = %+v", w)
	}
	tick()
	d2 := must(s.CreateWorkspace(ctx, raw(t, map[string]any{"name": "research team"}), nil))(t)
	if d2.ID() != "research-team-2" {
		t.Errorf("second id = %s, want research-team-2", d2.ID())
	}
	// Ids another store holds are skipped.
	taken := func(id string) (bool, error) { return id == "elsewhere" || id == "elsewhere-2", nil }
	if d3 := must(s.CreateWorkspace(ctx, raw(t, map[string]any{"name": "Elsewhere"}), taken))(t); d3.ID() != "elsewhere-3" {
		t.Errorf("id with taken = %s, want elsewhere-3", d3.ID())
	}
	if _, err := s.CreateWorkspace(ctx, raw(t, map[string]any{"name": "x"}), func(string) (bool, error) { return false, errors.New("boom") }); err == nil {
		t.Error("create ignored taken's error")
	}
	if d4 := must(s.CreateWorkspace(ctx, raw(t, map[string]any{"name": "%%%"}), nil))(t); d4.ID() != "workspace" {
		t.Errorf("unusable name gives %s, want workspace", d4.ID())
	}
	for _, body := range []map[string]any{{}, {"name": ""}, {"name": "   "}, {"name": 3}} {
		_, err := s.CreateWorkspace(ctx, raw(t, body), nil)
		wantKind(t, fmt.Sprintf("create %v", body), err, protocol.Invalid, "name is required")
	}
	_, err := s.CreateWorkspace(ctx, raw(t, map[string]any{"name": "a", "model": 5}), nil)
	wantKind(t, "model 5", err, protocol.Invalid, "model must be a string")
	_, err = s.CreateWorkspace(ctx, raw(t, map[string]any{"name": "a", "budget": -1}), nil)
	wantKind(t, "budget -1", err, protocol.Invalid, "budget must be a non-negative number")

	docs := must(s.ListWorkspaces(ctx))(t)
	var ids []string
	for _, d := range docs {
		ids = append(ids, d.ID())
	}
	if i, j := slices.Index(ids, "research-team"), slices.Index(ids, "research-team-2"); i < 0 || j < 0 || i > j {
		t.Errorf("list order %v: research-team (older) must come first", ids)
	}
}

func testWorkspaceUpdate(t *testing.T, s sessionstore.Store) {
	d := must(s.CreateWorkspace(ctx, raw(t, map[string]any{"name": "Ops", "model": "m1", "extra": true}), nil))(t)
	up := must(s.UpdateWorkspace(ctx, d.ID(), raw(t, map[string]any{
		"model": nil, "persona": "p", "id": "hijack", "created": "1999", "other": 1,
	})))(t)
	if _, ok := up["model"]; ok || str(up, "persona") != "p" || up.ID() != "ops" || str(up, "created") != str(d, "created") ||
		string(up["extra"]) != "true" || string(up["other"]) != "1" {
		t.Fatalf("update = %s", up)
	}
	if got := must(s.GetWorkspace(ctx, "ops"))(t); len(got) != len(up) || str(got, "persona") != "p" {
		t.Errorf("stored = %s, want %s", got, up)
	}
	_, err := s.UpdateWorkspace(ctx, "ops", raw(t, map[string]any{"name": ""}))
	wantKind(t, "empty name", err, protocol.Invalid, "name is required")
	_, err = s.UpdateWorkspace(ctx, "ops", raw(t, map[string]any{"budget": "x"}))
	wantKind(t, "string budget", err, protocol.Invalid, "")
}

func testWorkspaceNotFound(t *testing.T, s sessionstore.Store) {
	_, err := s.GetWorkspace(ctx, "nope")
	wantKind(t, "get", err, protocol.NotFound, "Workspace not found")
	_, err = s.UpdateWorkspace(ctx, "nope", raw(t, map[string]any{"model": "x"}))
	wantKind(t, "update", err, protocol.NotFound, "Workspace not found")
	_, err = s.DeleteWorkspace(ctx, "nope")
	wantKind(t, "delete", err, protocol.NotFound, "Workspace not found")
	if ok := must(s.WorkspaceExists(ctx, "nope"))(t); ok {
		t.Error("nope exists")
	}
	if got := list(t, s, "nope"); got == nil || len(got) != 0 {
		t.Errorf("list of unknown workspace = %#v, want empty", got)
	}
}

func testWorkspaceDelete(t *testing.T, s sessionstore.Store) {
	ws := newWorkspace(t, s, "Doomed")
	appendMsg(t, s, ws, "s-b", "user", "hello")
	appendMsg(t, s, ws, "s-a", "user", "hi")
	ids := must(s.DeleteWorkspace(ctx, ws))(t)
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"s-a", "s-b"}) {
		t.Errorf("deleted sessions = %v", ids)
	}
	if ok := must(s.WorkspaceExists(ctx, ws))(t); ok {
		t.Error("still exists")
	}
	if h := must(s.History(ctx, protocol.HistoryRequest{SessionRef: ref(ws, "s-a")}))(t); len(h.Messages) != 0 {
		t.Errorf("history after delete = %v", h.Messages)
	}
	// Same name again starts empty, with the same id.
	if again := newWorkspace(t, s, "Doomed"); again != ws || len(list(t, s, ws)) != 0 {
		t.Errorf("recreated %s with %v", again, list(t, s, ws))
	}
}

func testSessionCreate(t *testing.T, s sessionstore.Store) {
	_, err := s.CreateSession(ctx, protocol.SessionCreateRequest{Workspace: "nope"})
	wantKind(t, "create in unknown", err, protocol.NotFound, "Workspace not found")
	ws := newWorkspace(t, s, "Fresh")
	a := must(s.CreateSession(ctx, protocol.SessionCreateRequest{Workspace: ws, Title: json.RawMessage(`"Plan"`)}))(t)
	b := must(s.CreateSession(ctx, protocol.SessionCreateRequest{Workspace: ws}))(t)
	if !strings.HasPrefix(a.ID, "session-") || a.ID == b.ID || a.Title != "Plan" || b.Title != b.ID || a.Created == "" || a.LastActive == "" {
		t.Fatalf("created %+v %+v", a, b)
	}
	infos := list(t, s, ws)
	if len(infos) != 2 {
		t.Fatalf("list = %+v", infos)
	}
	if i, _ := find(infos, a.ID); i.Title != "Plan" || i.MessageCount != 0 || i.Summary != nil || i.Created != a.Created {
		t.Errorf("listed %+v, created %+v", i, a)
	}
	if i, _ := find(infos, b.ID); i.Title != b.ID {
		t.Errorf("untitled lists as %v", i.Title)
	}
	hidden := must(s.ListSessions(ctx, protocol.SessionListRequest{Workspace: ws, HideEmpty: true}))(t)
	if len(hidden) != 0 {
		t.Errorf("hideEmpty kept %+v", hidden)
	}
	if h := must(s.History(ctx, protocol.HistoryRequest{SessionRef: ref(ws, a.ID)}))(t); h.Messages == nil || len(h.Messages) != 0 {
		t.Errorf("history of empty session = %#v", h.Messages)
	}
	// An empty session is exported and summarised, not 404.
	if md := must(s.ExportSession(ctx, ref(ws, a.ID)))(t); !strings.HasPrefix(md, "# Plan\n") {
		t.Errorf("export of empty session = %q", md)
	}
	if sum := must(s.SessionSummary(ctx, ref(ws, a.ID)))(t); sum.MessageCount != 0 || sum.Summary != "No summary available" {
		t.Errorf("summary of empty session = %+v", sum)
	}
}

func testAppendAndHistory(t *testing.T, s sessionstore.Store) {
	ws := newWorkspace(t, s, "Hist")
	if h := must(s.History(ctx, protocol.HistoryRequest{SessionRef: ref(ws, "missing")}))(t); h.Messages == nil || len(h.Messages) != 0 {
		t.Fatalf("history of missing session = %#v", h)
	}
	// Appending creates the session, also in a workspace that does not exist.
	appendMsg(t, s, "adhoc", "s1", "user", "first")
	if h := must(s.History(ctx, protocol.HistoryRequest{SessionRef: ref("adhoc", "s1")}))(t); len(h.Messages) != 1 {
		t.Fatalf("ad-hoc history = %+v", h)
	}
	appendMsg(t, s, ws, "s1", "user", "What is <b> & \"quoted\"?\nline two")
	d := int64(12)
	appendTool(t, s, ws, "s1", protocol.ToolEvent{TurnID: "t1", CallID: "c1", Name: "web_search", Input: json.RawMessage(`{"q":"x"}`), Result: "found", Status: "success", DurationMs: &d})
	m := protocol.Message{Role: "assistant", Content: "partial", TurnID: "t1", Error: "cancelled", Timestamp: "2026-01-01T00:00:00.000Z"}
	if _, err := s.Append(ctx, protocol.AppendRequest{SessionRef: ref(ws, "s1"), Message: &m}); err != nil {
		t.Fatal(err)
	}
	h := must(s.History(ctx, protocol.HistoryRequest{SessionRef: ref(ws, "s1")}))(t)
	if len(h.Messages) != 2 || h.Messages[0].Content != "What is <b> & \"quoted\"?\nline two" || h.Messages[1] != m || h.Tools != nil {
		t.Fatalf("history = %+v", h)
	}
	h = must(s.History(ctx, protocol.HistoryRequest{SessionRef: ref(ws, "s1"), Tools: true}))(t)
	if len(h.Tools) != 1 || h.Tools[0].Name != "web_search" || string(h.Tools[0].Input) != `{"q":"x"}` || *h.Tools[0].DurationMs != 12 {
		t.Fatalf("tools = %+v", h.Tools)
	}
	// Tool events are not messages.
	if i, _ := find(list(t, s, ws), "s1"); i.MessageCount != 2 {
		t.Errorf("messageCount = %d, want 2", i.MessageCount)
	}
}

// testKeyedAppends: an append resent with the same key (its first answer
// lost) stores nothing more and answers the first one's timestamp, also
// when the sends race and after the session was rewritten; another key
// appends again, even with the same content.
func testKeyedAppends(t *testing.T, s sessionstore.Store) {
	ws := newWorkspace(t, s, "Keys")
	send := func(key string, m protocol.Message) protocol.AppendReply {
		t.Helper()
		return must(s.Append(ctx, protocol.AppendRequest{SessionRef: ref(ws, "s1"), Message: &m, Key: key}))(t)
	}
	first := protocol.Message{Role: "user", Content: "hello", TurnID: "t1", Timestamp: "2026-01-01T00:00:01.000Z"}
	if rep := send("t1/user", first); rep.Duplicate || rep.Timestamp != first.Timestamp {
		t.Fatalf("first append = %+v", rep)
	}
	again := first
	again.Timestamp = "2026-01-01T00:00:02.000Z"
	if rep := send("t1/user", again); !rep.Duplicate || rep.Timestamp != first.Timestamp {
		t.Fatalf("the same key again = %+v, want a duplicate of %s", rep, first.Timestamp)
	}
	// Another turn saying the same words is another message.
	other := protocol.Message{Role: "user", Content: "hello", TurnID: "t2", Timestamp: "2026-01-01T00:00:03.000Z"}
	if rep := send("t2/user", other); rep.Duplicate {
		t.Fatalf("another key = %+v", rep)
	}
	ev := protocol.ToolEvent{TurnID: "t2", CallID: "c1", Name: "read_file", Input: json.RawMessage(`{}`), Result: "x", Status: "success", Timestamp: "2026-01-01T00:00:04.000Z"}
	for range 2 {
		if _, err := s.Append(ctx, protocol.AppendRequest{SessionRef: ref(ws, "s1"), Tool: &ev, Key: "t2/tool/1/c1"}); err != nil {
			t.Fatal(err)
		}
	}
	// Sends racing one another store one line.
	var wg sync.WaitGroup
	dups := make(chan bool, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := protocol.Message{Role: "assistant", Content: "reply", TurnID: "t2", Timestamp: fmt.Sprintf("2026-01-01T00:00:%02d.000Z", 10+i)}
			rep, err := s.Append(ctx, protocol.AppendRequest{SessionRef: ref(ws, "s1"), Message: &m, Key: "t2/assistant"})
			if err != nil {
				t.Error(err)
				return
			}
			dups <- rep.Duplicate
		}()
	}
	wg.Wait()
	close(dups)
	fresh := 0
	for d := range dups {
		if !d {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d of 8 racing sends of one key appended, want 1", fresh)
	}
	// A rewrite of the session (a rename) keeps the keys.
	if err := s.RenameSession(ctx, ref(ws, "s1"), "Renamed"); err != nil {
		t.Fatal(err)
	}
	if rep := send("t1/user", again); !rep.Duplicate || rep.Timestamp != first.Timestamp {
		t.Fatalf("the same key after a rename = %+v", rep)
	}
	h := must(s.History(ctx, protocol.HistoryRequest{SessionRef: ref(ws, "s1"), Tools: true}))(t)
	var got []string
	for _, m := range h.Messages {
		got = append(got, m.TurnID+":"+m.Role+":"+m.Content)
	}
	if want := []string{"t1:user:hello", "t2:user:hello", "t2:assistant:reply"}; !slices.Equal(got, want) {
		t.Errorf("history = %q, want %q", got, want)
	}
	if len(h.Tools) != 1 {
		t.Errorf("%d tool events, want 1", len(h.Tools))
	}
	if h.Messages[0] != first {
		t.Errorf("stored message = %+v, want %+v (the key is not part of it)", h.Messages[0], first)
	}
	if i, _ := find(list(t, s, ws), "s1"); i.MessageCount != 3 {
		t.Errorf("messageCount = %d, want 3", i.MessageCount)
	}
}

func testListOrderAndTitles(t *testing.T, s sessionstore.Store) {
	ws := newWorkspace(t, s, "Order")
	long := "Please help me write a very long introduction for the quarterly planning document today"
	for _, id := range []string{"a", "b", "c"} {
		appendMsg(t, s, ws, id, "user", "message in "+id)
		tick()
	}
	appendMsg(t, s, ws, "a", "user", "a again")
	tick()
	appendMsg(t, s, ws, "long", "user", "   "+long+"  ")
	infos := list(t, s, ws)
	var ids []string
	for _, i := range infos {
		ids = append(ids, i.ID)
	}
	if !slices.Equal(ids, []string{"long", "a", "c", "b"}) {
		t.Fatalf("order = %v, want most recently active first", ids)
	}
	if i, _ := find(infos, "a"); i.Title != "message in a" || i.MessageCount != 2 {
		t.Errorf("a = %+v", i)
	}
	if i, _ := find(infos, "long"); i.Title != "Please help me write a very long introduction for..." {
		t.Errorf("long title = %q", i.Title)
	}
	for k := 1; k < len(infos); k++ {
		if infos[k-1].LastActive < infos[k].LastActive {
			t.Errorf("lastActive not descending: %v", infos)
		}
	}
}

// chat is a session that earns a lazy summary.
var chat = []struct{ role, content string }{
	{"user", "Help me plan the Q2 marketing campaign for the product launch"},
	{"assistant", "Sure. Let's go with a **content calendar** and weekly reviews."},
	{"user", "Great, we will use the calendar then"},
	{"assistant", "Decided: the calendar it is."},
}

func appendChat(t *testing.T, s sessionstore.Store, ws, id string) {
	t.Helper()
	for _, m := range chat {
		appendMsg(t, s, ws, id, m.role, m.content)
	}
}

func testLazySummary(t *testing.T, s sessionstore.Store) {
	ws := newWorkspace(t, s, "Lazy")
	appendChat(t, s, ws, "four")
	appendMsg(t, s, ws, "three", "user", "one")
	appendMsg(t, s, ws, "three", "assistant", "two")
	appendMsg(t, s, ws, "three", "user", "three")
	before, _ := find(list(t, s, ws), "three")
	if before.Summary != nil {
		t.Errorf("3-message session got a summary: %q", *before.Summary)
	}
	// The first listing (above) wrote the summary back; a summary is not
	// activity.
	tick()
	infos := list(t, s, ws)
	four, _ := find(infos, "four")
	if four.Summary == nil || !strings.Contains(*four.Summary, "4 messages") || !strings.HasPrefix(*four.Summary, "Help me plan the Q2 marketing campaign") {
		t.Fatalf("summary = %v", four.Summary)
	}
	sum := must(s.SessionSummary(ctx, ref(ws, "four")))(t)
	if sum.Summary != *four.Summary || sum.LastActive != four.LastActive {
		t.Errorf("summary endpoint = %+v, listing = %+v", sum, four)
	}
	// The summary is stored: searching it finds it.
	res := must(s.SearchSessions(ctx, protocol.SessionSearchRequest{Workspace: ws, Query: "messages ·"}))(t)
	if len(res) != 1 || res[0].SessionID != "four" || res[0].Snippets[0].Role != "summary" {
		t.Errorf("search of stored summary = %+v", res)
	}
}

// SessionDigests shows the summary a listing would, but writes nothing:
// the memory lifecycle reads sessions without touching them. Sessions
// active before since are left out.
func testSessionDigests(t *testing.T, s sessionstore.Store) {
	ws := newWorkspace(t, s, "Digest")
	appendChat(t, s, ws, "four")
	since := time.Now()
	if ds := must(s.SessionDigests(ctx, ws, since.Add(time.Hour)))(t); len(ds) != 0 {
		t.Fatalf("digests since an hour ahead = %+v, want none", ds)
	}
	ds := must(s.SessionDigests(ctx, ws, since.Add(-time.Hour)))(t)
	if len(ds) != 1 || ds[0].ID != "four" || ds[0].MessageCount != 4 || ds[0].Summary == nil ||
		!strings.HasPrefix(*ds[0].Summary, "Help me plan the Q2 marketing campaign") {
		t.Fatalf("digests = %+v", ds)
	}
	// Nothing was written back: no stored summary to search.
	res := must(s.SearchSessions(ctx, protocol.SessionSearchRequest{Workspace: ws, Query: "messages ·"}))(t)
	if len(res) != 0 {
		t.Errorf("a digest wrote the summary back: %+v", res)
	}
	if ds := must(s.SessionDigests(ctx, "ghost", since.Add(-time.Hour)))(t); len(ds) != 0 {
		t.Errorf("digests of an unknown workspace = %+v", ds)
	}
}

func testRenameAndLocate(t *testing.T, s sessionstore.Store) {
	wsB := newWorkspace(t, s, "B")
	wsA := newWorkspace(t, s, "A")
	appendMsg(t, s, wsB, "shared", "user", "in b")
	appendMsg(t, s, wsA, "shared", "user", "in a")
	appendMsg(t, s, wsB, "only-b", "user", "x")
	if r := must(s.LocateSession(ctx, protocol.SessionLocator{Session: "shared"}))(t); r.Workspace != "a" {
		t.Errorf("locate without workspace = %+v, want the first by name (a)", r)
	}
	if r := must(s.LocateSession(ctx, protocol.SessionLocator{Session: "shared", Workspace: "b"}))(t); r.Workspace != "b" {
		t.Errorf("locate in b = %+v", r)
	}
	_, err := s.LocateSession(ctx, protocol.SessionLocator{Session: "only-b", Workspace: "a"})
	wantKind(t, "locate in wrong workspace", err, protocol.NotFound, "Session not found")
	_, err = s.LocateSession(ctx, protocol.SessionLocator{Session: "ghost"})
	wantKind(t, "locate ghost", err, protocol.NotFound, "Session not found")

	before, _ := find(list(t, s, wsB), "shared")
	tick()
	if err := s.RenameSession(ctx, ref(wsB, "shared"), "Renamed ✓"); err != nil {
		t.Fatal(err)
	}
	after, _ := find(list(t, s, wsB), "shared")
	if after.Title != "Renamed ✓" || after.LastActive <= before.LastActive || after.Created != before.Created || after.MessageCount != 1 {
		t.Errorf("after rename %+v, before %+v", after, before)
	}
	if h := must(s.History(ctx, protocol.HistoryRequest{SessionRef: ref(wsB, "shared")}))(t); len(h.Messages) != 1 || h.Messages[0].Content != "in b" {
		t.Errorf("rename lost history: %+v", h)
	}
	if a, _ := find(list(t, s, wsA), "shared"); a.Title != "in a" {
		t.Errorf("rename touched the other workspace: %+v", a)
	}
	wantKind(t, "rename ghost", s.RenameSession(ctx, ref(wsB, "ghost"), "x"), protocol.NotFound, "Session not found")
}

func testDeleteSession(t *testing.T, s sessionstore.Store) {
	ws := newWorkspace(t, s, "Del")
	appendMsg(t, s, ws, "gone", "user", "bye")
	appendMsg(t, s, ws, "kept", "user", "stay")
	if err := s.DeleteSession(ctx, ref(ws, "gone")); err != nil {
		t.Fatal(err)
	}
	wantKind(t, "delete again", s.DeleteSession(ctx, ref(ws, "gone")), protocol.NotFound, "Session not found")
	_, err := s.ExportSession(ctx, ref(ws, "gone"))
	wantKind(t, "export deleted", err, protocol.NotFound, "Session not found")
	if infos := list(t, s, ws); len(infos) != 1 || infos[0].ID != "kept" {
		t.Errorf("list after delete = %+v", infos)
	}
	// A later append with the same id starts from an empty history.
	appendMsg(t, s, ws, "gone", "user", "again")
	if h := must(s.History(ctx, protocol.HistoryRequest{SessionRef: ref(ws, "gone")}))(t); len(h.Messages) != 1 || h.Messages[0].Content != "again" {
		t.Errorf("history after recreate = %+v", h)
	}
}

func testExportAndTimeline(t *testing.T, s sessionstore.Store) {
	ws := newWorkspace(t, s, "Exp")
	_, err := s.ExportSession(ctx, ref("nope", "x"))
	wantKind(t, "export in unknown workspace", err, protocol.NotFound, "Workspace not found")
	_, err = s.SessionTimeline(ctx, ref(ws, "x"))
	wantKind(t, "timeline of unknown session", err, protocol.NotFound, "Session not found")
	appendMsg(t, s, ws, "e", "user", "Draft the memo\nsecond line")
	appendMsg(t, s, ws, "e", "assistant", "Here it is.")
	md := must(s.ExportSession(ctx, ref(ws, "e")))(t)
	for _, want := range []string{"# Draft the memo\n", "### **You**", "### **Assistant**", "Here it is."} {
		if !strings.Contains(md, want) {
			t.Errorf("export lacks %q:\n%s", want, md)
		}
	}
	if tl := must(s.SessionTimeline(ctx, ref(ws, "e")))(t); string(tl) != "[]" {
		t.Errorf("timeline without tools = %s", tl)
	}
	d := int64(40)
	appendTool(t, s, ws, "e", protocol.ToolEvent{TurnID: "t", CallID: "p", Name: "spawn_agent", Input: json.RawMessage(`{}`), Result: "ok", Status: "success"})
	appendTool(t, s, ws, "e", protocol.ToolEvent{TurnID: "t", CallID: "c", Name: "read_file", Input: json.RawMessage(`{"path":"a"}`), Result: "Error: nope", IsError: true, Status: "error", DurationMs: &d, Parent: "p"})
	var evs []struct {
		ID, ToolName, Status string
		DurationMs           *int64
		Children             []struct{ ID, ToolName, Status string }
	}
	if err := json.Unmarshal(must(s.SessionTimeline(ctx, ref(ws, "e")))(t), &evs); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].ToolName != "spawn_agent" || len(evs[0].Children) != 1 || evs[0].Children[0].ToolName != "read_file" || evs[0].Children[0].Status != "error" {
		t.Fatalf("timeline = %+v", evs)
	}
}

func testSessionSummary(t *testing.T, s sessionstore.Store) {
	ws := newWorkspace(t, s, "Sum")
	appendMsg(t, s, ws, "s", "user", "save this please")
	appendMsg(t, s, ws, "s", "assistant", "done")
	appendTool(t, s, ws, "s", protocol.ToolEvent{CallID: "1", Name: "save_memory", Input: json.RawMessage(`{}`), Result: "saved", Status: "success"})
	appendTool(t, s, ws, "s", protocol.ToolEvent{CallID: "2", Name: "generate_docx", Input: json.RawMessage(`{}`), Result: "Error: disk", IsError: true, Status: "error"})
	appendTool(t, s, ws, "s", protocol.ToolEvent{CallID: "3", Name: "bash", Input: json.RawMessage(`{}`), Status: "denied"})
	sum := must(s.SessionSummary(ctx, ref(ws, "s")))(t)
	if sum.SessionID != "s" || sum.MessageCount != 2 || sum.UserMessages != 1 || sum.AssistantMessages != 1 ||
		sum.ToolsUsed != 2 || sum.MemoriesSaved != 1 || sum.DocumentsCreated != 0 || sum.Title != "save this please" {
		t.Errorf("summary = %+v", sum)
	}
	_, err := s.SessionSummary(ctx, ref(ws, "ghost"))
	wantKind(t, "summary of ghost", err, protocol.NotFound, "Session not found")
}

func search(t *testing.T, s sessionstore.Store, ws, q string, limit int) []protocol.SessionSearchResult {
	t.Helper()
	return must(s.SearchSessions(ctx, protocol.SessionSearchRequest{Workspace: ws, Query: q, Limit: limit}))(t)
}

func testSearchValidation(t *testing.T, s sessionstore.Store) {
	_, err := s.SearchSessions(ctx, protocol.SessionSearchRequest{Workspace: "nope", Query: "x"})
	wantKind(t, "unknown workspace first", err, protocol.NotFound, "Workspace not found")
	ws := newWorkspace(t, s, "Val")
	for _, q := range []string{"", "a", "é"} {
		_, err := s.SearchSessions(ctx, protocol.SessionSearchRequest{Workspace: ws, Query: q})
		wantKind(t, fmt.Sprintf("query %q", q), err, protocol.Invalid, "Query must be at least 2 characters")
	}
	appendMsg(t, s, ws, "e", "user", "emoji 🐝 here")
	if res := search(t, s, ws, "🐝", 0); len(res) != 1 {
		t.Errorf("a 2-unit emoji query = %+v", res)
	}
	if res := search(t, s, ws, "zz", 0); res == nil || len(res) != 0 {
		t.Errorf("no match = %#v, want empty", res)
	}
}

func testSearchRanking(t *testing.T, s sessionstore.Store) {
	ws := newWorkspace(t, s, "Rank")
	// matchCount: one=1, two=2, three=3; old-two is older than two.
	appendMsg(t, s, ws, "old-two", "user", "Apple pie")
	appendMsg(t, s, ws, "old-two", "user", "apple tart")
	tick()
	appendMsg(t, s, ws, "one", "user", "an APPLE")
	tick()
	appendMsg(t, s, ws, "three", "user", "apple")
	appendMsg(t, s, ws, "three", "assistant", "apple")
	appendMsg(t, s, ws, "three", "user", "pineapple")
	tick()
	appendMsg(t, s, ws, "two", "user", "apple")
	appendMsg(t, s, ws, "two", "assistant", "no fruit here")
	appendMsg(t, s, ws, "two", "user", "crab apple")
	appendMsg(t, s, ws, "none", "user", "banana")
	res := search(t, s, ws, "aPPle", 0)
	var got []string
	for _, r := range res {
		got = append(got, fmt.Sprintf("%s:%d", r.SessionID, r.MatchCount))
	}
	if want := []string{"three:3", "two:2", "old-two:2", "one:1"}; !slices.Equal(got, want) {
		t.Fatalf("ranking = %v, want %v", got, want)
	}
	// The limit applies after sorting: the best matches survive.
	res = search(t, s, ws, "apple", 2)
	if len(res) != 2 || res[0].SessionID != "three" || res[1].SessionID != "two" {
		t.Errorf("limit 2 = %+v", res)
	}
	if r := res[0]; r.Title != "apple" || r.LastActive == "" || len(r.Snippets) != 3 || r.Snippets[2] != (protocol.SearchSnippet{Text: "pineapple", Role: "user"}) {
		t.Errorf("result = %+v", r)
	}
	// A title a user gave is searched (the original ignored titles): it
	// counts as one match, with its own snippet first.
	if err := s.RenameSession(ctx, ref(ws, "none"), "Apple budget"); err != nil {
		t.Fatal(err)
	}
	res = search(t, s, ws, "apple", 50)
	i := slices.IndexFunc(res, func(r protocol.SessionSearchResult) bool { return r.SessionID == "none" })
	if len(res) != 5 || i < 0 || res[i].MatchCount != 1 ||
		len(res[i].Snippets) != 1 || res[i].Snippets[0] != (protocol.SearchSnippet{Text: "Apple budget", Role: "title"}) {
		t.Errorf("title search = %+v", res)
	}
	// More than 50 sessions: the cap is 50.
	for i := range 55 {
		appendMsg(t, s, ws, fmt.Sprintf("k%02d", i), "user", "kiwi")
	}
	if res := search(t, s, ws, "kiwi", 100); len(res) != 50 {
		t.Errorf("limit 100 gave %d results, want the cap 50", len(res))
	}
	if res := search(t, s, ws, "kiwi", 0); len(res) != 20 {
		t.Errorf("default limit gave %d results, want 20", len(res))
	}
}

func testSearchSnippetsAndScope(t *testing.T, s sessionstore.Store) {
	ws := newWorkspace(t, s, "Snip")
	long := strings.Repeat("x", 60) + " the needle sits here " + strings.Repeat("y", 100)
	appendMsg(t, s, ws, "long", "assistant", long)
	res := search(t, s, ws, "NEEDLE", 0)
	want := "..." + strings.Repeat("x", 35) + " the needle sits here " + strings.Repeat("y", 69) + "..."
	if len(res) != 1 || len(res[0].Snippets) != 1 || res[0].Snippets[0].Text != want || res[0].Snippets[0].Role != "assistant" {
		t.Fatalf("snippet = %+v\nwant %q", res, want)
	}
	// Newlines are flattened; at most 3 snippets while matchCount counts on.
	for i := range 5 {
		appendMsg(t, s, ws, "many", "user", fmt.Sprintf("line %d\nhas needle", i))
	}
	res = search(t, s, ws, "needle", 0)
	if len(res) != 2 || res[0].SessionID != "many" || res[0].MatchCount != 5 || len(res[0].Snippets) != 3 || res[0].Snippets[0].Text != "line 0 has needle" {
		t.Fatalf("many = %+v", res)
	}
	// Only the first 50 message lines are searched; tool events do not
	// count towards them.
	for i := range 49 {
		appendMsg(t, s, ws, "deep", "user", fmt.Sprintf("filler %d", i))
		if i%10 == 0 {
			appendTool(t, s, ws, "deep", protocol.ToolEvent{CallID: fmt.Sprint(i), Name: "web_search", Input: json.RawMessage(`{"q":"walrus"}`), Result: "walrus", Status: "success"})
		}
	}
	appendMsg(t, s, ws, "deep", "user", "walrus fiftieth")
	appendMsg(t, s, ws, "deep", "user", "walrus fifty-first")
	res = search(t, s, ws, "walrus", 0)
	if len(res) != 1 || res[0].MatchCount != 1 || res[0].Snippets[0].Text != "walrus fiftieth" {
		t.Fatalf("deep = %+v", res)
	}
	// LIKE and regexp metacharacters are literal.
	appendMsg(t, s, ws, "meta", "user", `100% sure_thing (a.b) \path`)
	for _, q := range []string{"0% s", "e_t", "(a.b)", `\pa`} {
		if res := search(t, s, ws, q, 0); len(res) != 1 || res[0].SessionID != "meta" {
			t.Errorf("query %q = %+v", q, res)
		}
	}
	for _, q := range []string{"%%", "__", "a%b"} {
		if res := search(t, s, ws, q, 0); len(res) != 0 {
			t.Errorf("query %q matched %+v", q, res)
		}
	}
	// Other workspaces are not searched.
	other := newWorkspace(t, s, "Other Snip")
	if res := search(t, s, other, "needle", 0); len(res) != 0 {
		t.Errorf("other workspace found %+v", res)
	}
}

// testConcurrentWriters races appends against renames, listings and
// summary requests (both write a lazy summary back) on one session, then
// counts every line.
func testConcurrentWriters(t *testing.T, s sessionstore.Store) {
	ws := newWorkspace(t, s, "Race")
	const (
		appenders   = 6
		appendsEach = 15
		rewriters   = 3
		rewrites    = 8
	)
	for round := range 3 {
		id := fmt.Sprintf("race-%d", round)
		appendChat(t, s, ws, id) // 4 messages, no summary yet
		var wg sync.WaitGroup
		for a := range appenders {
			wg.Go(func() {
				for i := range appendsEach {
					m := protocol.Message{Role: "user", Content: fmt.Sprintf("append %d-%d", a, i)}
					if _, err := s.Append(ctx, protocol.AppendRequest{SessionRef: ref(ws, id), Message: &m}); err != nil {
						t.Errorf("append: %v", err)
					}
				}
			})
		}
		for r := range rewriters {
			wg.Go(func() {
				for i := range rewrites {
					var err error
					switch (r + i) % 3 {
					case 0:
						err = s.RenameSession(ctx, ref(ws, id), fmt.Sprintf("title %d-%d", r, i))
					case 1:
						_, err = s.ListSessions(ctx, protocol.SessionListRequest{Workspace: ws})
					default:
						_, err = s.SessionSummary(ctx, ref(ws, id))
					}
					if err != nil {
						t.Errorf("rewrite: %v", err)
					}
				}
			})
		}
		wg.Wait()
		h := must(s.History(ctx, protocol.HistoryRequest{SessionRef: ref(ws, id)}))(t)
		if want := len(chat) + appenders*appendsEach; len(h.Messages) != want {
			t.Fatalf("round %d: %d messages, want %d", round, len(h.Messages), want)
		}
		seen := map[string]int{}
		for _, m := range h.Messages {
			seen[m.Content]++
		}
		for a := range appenders {
			last := -1
			for i := range appendsEach {
				c := fmt.Sprintf("append %d-%d", a, i)
				if seen[c] != 1 {
					t.Errorf("round %d: %q stored %d times", round, c, seen[c])
				}
				// One writer's appends keep their order.
				at := slices.IndexFunc(h.Messages, func(m protocol.Message) bool { return m.Content == c })
				if at < last {
					t.Errorf("round %d: %q out of order", round, c)
				}
				last = at
			}
		}
		info, _ := find(list(t, s, ws), id)
		if info.MessageCount != len(h.Messages) || info.Summary == nil || !strings.HasPrefix(fmt.Sprint(info.Title), "title ") {
			t.Errorf("round %d: listing after the race = %+v", round, info)
		}
	}
}

func testTornLines(t *testing.T, s sessionstore.Store) {
	rs, ok := s.(RawSessions)
	if !ok {
		t.Skip("store has no raw session files: torn and malformed lines cannot exist")
	}
	ws := newWorkspace(t, s, "Torn")
	data := `{"type":"meta","title":null,"created":"2026-03-09T09:00:00.000Z"}
{"role":"user","content":"intact","timestamp":"2026-03-09T09:00:01.000Z"}
not json at all
{"role":"assistant","content":"torn mid-wr`
	if err := rs.WriteRawSession(ws, "torn", []byte(data)); err != nil {
		t.Fatal(err)
	}
	h := must(s.History(ctx, protocol.HistoryRequest{SessionRef: ref(ws, "torn")}))(t)
	if len(h.Messages) != 1 || h.Messages[0].Content != "intact" {
		t.Fatalf("history with torn tail = %+v", h)
	}
	if i, _ := find(list(t, s, ws), "torn"); i.MessageCount != 3 {
		t.Errorf("messageCount = %d, want 3 (malformed lines count)", i.MessageCount)
	}
	appendMsg(t, s, ws, "torn", "assistant", "after repair")
	h = must(s.History(ctx, protocol.HistoryRequest{SessionRef: ref(ws, "torn")}))(t)
	if len(h.Messages) != 2 || h.Messages[1].Content != "after repair" {
		t.Fatalf("history after append = %+v", h)
	}
}

// testWritesAfterTheDeadline: a write whose caller's deadline has passed
// (the bus gives handlers their caller's deadline) fails and leaves
// nothing behind: the caller was told it timed out.
func testWritesAfterTheDeadline(t *testing.T, s sessionstore.Store) {
	late, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	before := must(s.ListWorkspaces(ctx))(t)
	if _, err := s.CreateWorkspace(late, raw(t, map[string]any{"name": "Late"}), nil); err == nil {
		t.Error("a workspace was created after the deadline")
	}
	if after := must(s.ListWorkspaces(ctx))(t); len(after) != len(before) {
		t.Errorf("workspaces %d before a late create, %d after", len(before), len(after))
	}
	ws := newWorkspace(t, s, "Deadline")
	m := protocol.Message{Role: "user", Content: "late", Timestamp: protocol.Timestamp(time.Now())}
	if _, err := s.Append(late, protocol.AppendRequest{SessionRef: ref(ws, "s1"), Message: &m}); err == nil {
		t.Error("a message was appended after the deadline")
	}
	if h := must(s.History(ctx, protocol.HistoryRequest{SessionRef: ref(ws, "s1")}))(t); len(h.Messages) != 0 {
		t.Errorf("history after a late append: %+v", h.Messages)
	}
}
