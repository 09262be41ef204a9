// Package pgstore holds black-box tests of the session store on
// PostgreSQL: the HTTP API in front of a session-store service whose team
// workspaces (or, in all-PostgreSQL mode, every workspace) live in a real
// PostgreSQL (libs/pgtest).
//
// Until the composition root passes WAGGLE_POSTGRES_URL/WAGGLE_STORE to
// the store, the tests run the app without its session-store target and
// start the store themselves on the app's NATS server.
package pgstore

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/sessionstore"
	"github.com/waggle-os/core/services/sessionstore/frames"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// env is the app plus a session store the test controls.
type env struct {
	srv     *waggletest.Server
	natsURL string
	pgURL   string
	store   *sessionstore.Service
	dataDir string
}

// start runs the app without its session store, then a store on
// PostgreSQL (mode: "" or "postgres") with a fresh data dir.
func start(t *testing.T, mode string) *env {
	t.Helper()
	pgURL := pgtest.URL(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := waggletest.Start(t, waggletest.WithConfig(func(c *app.Config) {
		c.NATSListen = addr
		c.Targets = []string{"gateway", "turn-runner", "approval", "command"}
	}))
	e := &env{srv: srv, natsURL: srv.App.NATSURL(), pgURL: pgURL}
	e.startStore(t, mode, t.TempDir())
	return e
}

func (e *env) startStore(t *testing.T, mode, dataDir string) {
	t.Helper()
	e.dataDir = dataDir
	e.store = sessionstore.New(sessionstore.Config{DataDir: dataDir, PostgresURL: e.pgURL, Store: mode},
		bus.URLDialer(e.natsURL, e.srv.NATSAuth()), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.store.Start(ctx); err != nil {
		t.Fatal(err)
	}
	s := e.store
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
}

func (e *env) stopStore(t *testing.T) {
	t.Helper()
	if err := e.store.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (e *env) createWorkspace(t *testing.T, body map[string]any) string {
	t.Helper()
	var out map[string]any
	if st := e.srv.JSON(http.MethodPost, "/api/workspaces", body, &out); st != http.StatusCreated {
		t.Fatalf("create workspace %v: %d %v", body, st, out)
	}
	return out["id"].(string)
}

func (e *env) chat(t *testing.T, ws, session, msg string) {
	t.Helper()
	body := map[string]any{"message": msg, "session": session}
	if ws != "" {
		body["workspace"] = ws
	}
	evs := e.srv.Chat(body).All(t)
	if len(evs) == 0 || evs[len(evs)-1].Name != "done" {
		t.Fatalf("chat in %s/%s did not finish: %v", ws, session, evs)
	}
}

type info struct {
	ID           string  `json:"id"`
	Title        any     `json:"title"`
	Summary      *string `json:"summary"`
	MessageCount int     `json:"messageCount"`
}

func (e *env) list(t *testing.T, ws string) []info {
	t.Helper()
	var out []info
	if st := e.srv.JSON(http.MethodGet, "/api/workspaces/"+ws+"/sessions", nil, &out); st != 200 {
		t.Fatalf("list %s: %d", ws, st)
	}
	return out
}

func (e *env) workspaceIDs(t *testing.T) []string {
	t.Helper()
	var out []map[string]any
	if st := e.srv.JSON(http.MethodGet, "/api/workspaces", nil, &out); st != 200 {
		t.Fatalf("list workspaces: %d", st)
	}
	var ids []string
	for _, w := range out {
		ids = append(ids, w["id"].(string))
	}
	return ids
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestTeamWorkspacesLiveInPostgres: a workspace created with a teamId is
// kept in PostgreSQL (no files; it survives losing the data dir), a
// personal one in JSONL; listings merge both; the whole sessions API works
// on the team workspace.
func TestTeamWorkspacesLiveInPostgres(t *testing.T) {
	e := start(t, "")
	team := e.createWorkspace(t, map[string]any{"name": "Alpha", "teamId": "team-1"})
	personal := e.createWorkspace(t, map[string]any{"name": "Alpha"}) // same name: ids must not clash
	if team != "alpha" || personal != "alpha-2" {
		t.Fatalf("ids = %s, %s; want alpha, alpha-2", team, personal)
	}
	e.chat(t, team, "plan", "Draft the launch plan for the walrus product")
	e.chat(t, personal, "mine", "A personal walrus note")

	if exists(filepath.Join(e.dataDir, "workspaces", team)) {
		t.Error("team workspace has files in the data dir")
	}
	if !exists(filepath.Join(e.dataDir, "workspaces", personal, "sessions", "mine.jsonl")) {
		t.Error("personal session is not a JSONL file")
	}
	if got := e.list(t, team); len(got) != 1 || got[0].ID != "plan" || got[0].MessageCount != 2 || got[0].Title != "Draft the launch plan for the walrus product" {
		t.Fatalf("team listing = %+v", got)
	}
	var res []struct {
		SessionID  string `json:"sessionId"`
		MatchCount int    `json:"matchCount"`
	}
	if st := e.srv.JSON(http.MethodGet, "/api/workspaces/"+team+"/sessions/search?q=WALRUS", nil, &res); st != 200 || len(res) != 1 || res[0].SessionID != "plan" || res[0].MatchCount != 2 {
		t.Fatalf("team search = %d %+v", st, res)
	}
	// Rename without ?workspace= finds the session in PostgreSQL.
	var renamed map[string]any
	if st := e.srv.JSON(http.MethodPatch, "/api/sessions/plan", map[string]any{"title": "Launch"}, &renamed); st != 200 || renamed["title"] != "Launch" {
		t.Fatalf("rename = %d %v", st, renamed)
	}
	var sum map[string]any
	if st := e.srv.JSON(http.MethodGet, "/api/sessions/plan/summary", nil, &sum); st != 200 || sum["title"] != "Launch" || sum["userMessages"] != float64(1) {
		t.Fatalf("summary = %d %v", st, sum)
	}

	// The store restarts with an empty data dir: the team workspace and
	// its session are still there, the personal one is gone.
	e.stopStore(t)
	e.startStore(t, "", t.TempDir())
	ids := e.workspaceIDs(t)
	if !contains(ids, team) || contains(ids, personal) || !contains(ids, "default") {
		t.Fatalf("workspaces after losing the data dir = %v", ids)
	}
	if got := e.list(t, team); len(got) != 1 || got[0].Title != "Launch" {
		t.Fatalf("team listing after restart = %+v", got)
	}
	var hist struct {
		Messages []struct{ Role, Content string } `json:"messages"`
	}
	if st := e.srv.JSON(http.MethodGet, "/api/history?workspace="+team+"&session=plan", nil, &hist); st != 200 || len(hist.Messages) != 2 {
		t.Errorf("history after restart = %d %+v", st, hist)
	}
	if st := e.srv.JSON(http.MethodDelete, "/api/workspaces/"+team, nil, nil); st != 200 {
		t.Fatalf("delete team workspace: %d", st)
	}
	if st := e.srv.JSON(http.MethodGet, "/api/workspaces/"+team, nil, nil); st != 404 {
		t.Errorf("deleted team workspace: %d, want 404", st)
	}
}

// TestTeamMindsLiveInPostgres: with team workspaces in PostgreSQL and
// personal ones in JSONL, a team workspace's memories and knowledge graph
// are never written to the data dir, and a personal workspace's never to
// PostgreSQL: losing the data dir keeps the first and loses the second (a
// personal workspace of the same id made anew finds nothing).
func TestTeamMindsLiveInPostgres(t *testing.T) {
	e := start(t, "")
	team := e.createWorkspace(t, map[string]any{"name": "Alpha", "teamId": "team-1"})
	personal := e.createWorkspace(t, map[string]any{"name": "Alpha"})
	const teamFact = "Ada Lovelace leads Project Falcon at Acme Corp"
	const personalFact = "Grace Hopper leads Project Heron at Initech Corp"
	e.save(t, team, teamFact)
	e.save(t, personal, personalFact)
	e.waitEntity(t, team, "Ada Lovelace")
	e.waitEntity(t, personal, "Grace Hopper")
	// A turn in the team workspace feeds its graph too.
	e.chat(t, team, "plan", "Linus Torvalds leads Project Kestrel at Globex Corp")
	e.waitEntity(t, team, "Linus Torvalds")

	if exists(filepath.Join(e.dataDir, "workspaces", team)) {
		entries, _ := os.ReadDir(filepath.Join(e.dataDir, "workspaces", team))
		t.Errorf("team workspace has files in the data dir: %v", entries)
	}
	for _, f := range []string{"memories.jsonl", "knowledge.jsonl"} {
		if !exists(filepath.Join(e.dataDir, "workspaces", personal, f)) {
			t.Errorf("personal workspace has no %s", f)
		}
	}
	if got := e.search(t, team, "Falcon"); len(got) != 1 || got[0] != teamFact {
		t.Fatalf("team search = %v", got)
	}

	// The data dir is lost: the team workspace's mind is all there, the
	// personal one is gone with its files and was never in PostgreSQL.
	e.stopStore(t)
	e.startStore(t, "", t.TempDir())
	if got := e.search(t, team, "Falcon"); len(got) != 1 || got[0] != teamFact {
		t.Fatalf("team search after losing the data dir = %v", got)
	}
	e.waitEntity(t, team, "Linus Torvalds")
	if again := e.createWorkspace(t, map[string]any{"name": "Alpha"}); again != personal {
		t.Fatalf("recreated personal workspace id = %s, want %s", again, personal)
	}
	if got := e.search(t, personal, "Heron"); len(got) != 0 {
		t.Errorf("a personal workspace's memory was in PostgreSQL: %v", got)
	}
	if g := e.graph(t, personal); len(g) != 0 {
		t.Errorf("a personal workspace's graph was in PostgreSQL: %v", g)
	}
}

func (e *env) save(t *testing.T, ws, content string) {
	t.Helper()
	var out map[string]any
	if st := e.srv.JSON(http.MethodPost, "/api/memory/frames", map[string]any{"content": content, "workspace": ws}, &out); st != 200 || out["saved"] != true {
		t.Fatalf("save in %s: %d %v", ws, st, out)
	}
}

// search lists the contents of a workspace mind's hits for q.
func (e *env) search(t *testing.T, ws, q string) []string {
	t.Helper()
	var out struct {
		Results []struct {
			Content string `json:"content"`
		} `json:"results"`
	}
	if st := e.srv.JSON(http.MethodGet, "/api/memory/search?scope=workspace&workspace="+ws+"&q="+q, nil, &out); st != 200 {
		t.Fatalf("search %s: %d", ws, st)
	}
	var got []string
	for _, r := range out.Results {
		got = append(got, r.Content)
	}
	return got
}

// graph lists the names of a workspace mind's entities.
func (e *env) graph(t *testing.T, ws string) []string {
	t.Helper()
	var out struct {
		Entities []struct {
			Name string `json:"name"`
		} `json:"entities"`
	}
	if st := e.srv.JSON(http.MethodGet, "/api/memory/graph?scope=workspace&workspace="+ws, nil, &out); st != 200 {
		t.Fatalf("graph %s: %d", ws, st)
	}
	var names []string
	for _, x := range out.Entities {
		names = append(names, x.Name)
	}
	return names
}

func (e *env) waitEntity(t *testing.T, ws, name string) {
	t.Helper()
	waitfor.True(t, name+" in the graph of "+ws, func() bool { return contains(e.graph(t, ws), name) })
}

// TestTeamMindMovesOutOfTheDataDir: a team workspace's memories that an
// older version kept in the data dir are moved into PostgreSQL at start
// (the file goes), so they are found where the workspace lives.
func TestTeamMindMovesOutOfTheDataDir(t *testing.T) {
	e := start(t, "")
	team := e.createWorkspace(t, map[string]any{"name": "Beta", "teamId": "team-1"})
	e.stopStore(t)
	const old = "Margaret Hamilton wrote the Apollo guidance software"
	legacy := frames.NewJSONL(e.dataDir)
	ts := "2026-01-02T03:04:05.000Z"
	if _, _, err := legacy.Add(context.Background(), frames.Mind{Kind: frames.KindWorkspace, ID: team},
		frames.Frame{ID: "mem-legacy-1", Content: old, Importance: "important", Source: "user_stated", Created: ts, Updated: ts, AccessCount: 3}); err != nil {
		t.Fatal(err)
	}
	e.startStore(t, "", e.dataDir)
	if got := e.search(t, team, "Apollo"); len(got) != 1 || got[0] != old {
		t.Fatalf("team search after the move = %v", got)
	}
	if exists(filepath.Join(e.dataDir, "workspaces", team, "memories.jsonl")) {
		t.Error("the team workspace's memories file is still in the data dir")
	}
	var f map[string]any
	if st := e.srv.JSON(http.MethodPatch, "/api/memory/frames/mem-legacy-1/access?workspace="+team, nil, &f); st != 200 || f["accessCount"] != float64(4) {
		t.Errorf("moved frame's access = %d %v, want its id and count kept (4)", st, f)
	}
}

// TestEverythingInPostgres: with Store "postgres" the default workspace
// and chats that name none live in PostgreSQL too.
func TestEverythingInPostgres(t *testing.T) {
	e := start(t, sessionstore.StorePostgres)
	e.chat(t, "", "s1", "hello from nowhere in particular")
	if exists(filepath.Join(e.dataDir, "workspaces", "default")) {
		t.Error("default workspace has files in the data dir")
	}
	if got := e.list(t, "default"); len(got) != 1 || got[0].ID != "s1" || got[0].MessageCount != 2 {
		t.Fatalf("default listing = %+v", got)
	}
	e.stopStore(t)
	e.startStore(t, sessionstore.StorePostgres, t.TempDir())
	if got := e.list(t, "default"); len(got) != 1 || got[0].ID != "s1" {
		t.Fatalf("default listing after losing the data dir = %+v", got)
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
