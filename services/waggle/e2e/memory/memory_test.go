// Package memory holds black-box tests of the workspace mind: the
// /api/memory routes with the original's shapes, hybrid search with
// scripted embeddings, restarts, team isolation and the PostgreSQL store.
package memory

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

var concepts = llmtest.Concepts(
	[]string{"dog", "puppy", "canine", "retriever"},
	[]string{"invoice", "billing", "payment"},
	[]string{"tea", "coffee", "drink", "beverage"},
)

func embeddingServer(t *testing.T) *llmtest.Server {
	llm := llmtest.New(llmtest.WithEmbeddings(concepts))
	llm.Start()
	t.Cleanup(llm.Close)
	return llm
}

type obj = map[string]any

func post(t *testing.T, srv *waggletest.Server, body any, headers ...string) (int, obj) {
	t.Helper()
	var out obj
	st := srv.JSON("POST", "/api/memory/frames", body, &out, headers...)
	return st, out
}

// waitEmbedded polls the stats until no frame of ws waits for a vector.
func waitEmbedded(t *testing.T, srv *waggletest.Server, ws string, want int, headers ...string) {
	t.Helper()
	waitfor.NoError(t, fmt.Sprintf("%d frames of %s embedded", want, ws), func() error {
		var st obj
		if code := srv.JSON("GET", "/api/memory/stats?workspace="+ws, nil, &st, headers...); code != 200 {
			t.Fatalf("stats: %d %v", code, st)
		}
		if st["embedded"] == float64(want) && st["pending"] == float64(0) {
			return nil
		}
		return fmt.Errorf("stats = %v, want %d embedded", st, want)
	})
}

func search(t *testing.T, srv *waggletest.Server, query string, headers ...string) []obj {
	t.Helper()
	var out struct {
		Results []obj `json:"results"`
		Count   int   `json:"count"`
	}
	if st := srv.JSON("GET", "/api/memory/search?"+query, nil, &out, headers...); st != 200 {
		t.Fatalf("search %s: %d", query, st)
	}
	if out.Count != len(out.Results) {
		t.Fatalf("count %d of %d results", out.Count, len(out.Results))
	}
	return out.Results
}

func wantError(t *testing.T, what string, st int, body obj, status int, msg string) {
	t.Helper()
	if st != status || body["error"] != msg {
		t.Errorf("%s: %d %v, want %d %q", what, st, body, status, msg)
	}
}

func TestMemoryAPI(t *testing.T) {
	llm := embeddingServer(t)
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()))
	testMemoryAPI(t, srv)
}

func testMemoryAPI(t *testing.T, srv *waggletest.Server) {
	st, body := post(t, srv, obj{"workspace": "w1"})
	wantError(t, "no content", st, body, 400, "content is required")
	st, body = post(t, srv, obj{"workspace": "w1", "content": "x", "source": "rumour"})
	wantError(t, "bad source", st, body, 400, `Invalid source "rumour". Valid values: user_stated, tool_verified, agent_inferred, import, system`)
	st, body = post(t, srv, obj{"workspace": "../x", "content": "x"})
	if st != 400 {
		t.Errorf("bad workspace: %d %v", st, body)
	}

	st, dog := post(t, srv, obj{"workspace": "w1", "content": "Rex is a golden retriever puppy"})
	if st != 200 || dog["saved"] != true || dog["mind"] != "workspace" || dog["importance"] != "normal" || dog["source"] != "import" || dog["frameId"] == "" {
		t.Fatalf("save: %d %v", st, dog)
	}
	dogID := fmt.Sprint(dog["frameId"])
	st, dup := post(t, srv, obj{"workspaceId": "w1", "content": "Rex is a golden retriever puppy"})
	if st != 200 || dup["saved"] != false || dup["duplicate"] != true || dup["frameId"] != dogID || dup["mind"] != "workspace" {
		t.Errorf("duplicate: %d %v", st, dup)
	}
	_, bill := post(t, srv, obj{"workspace": "w1", "content": "The invoice run is on the first Monday", "importance": "important", "source": "user_stated"})
	_, pers := post(t, srv, obj{"content": "I prefer short answers", "importance": 4})
	if pers["mind"] != "personal" || pers["importance"] != "critical" {
		t.Errorf("personal save: %v", pers)
	}
	waitEmbedded(t, srv, "w1", 3)

	var frames struct {
		Results []obj `json:"results"`
		Count   int   `json:"count"`
	}
	if st := srv.JSON("GET", "/api/memory/frames?workspace=w1&limit=10", nil, &frames); st != 200 || frames.Count != 3 {
		t.Fatalf("frames: %d %+v", st, frames)
	}
	first := frames.Results[0]
	if first["id"] != pers["frameId"] || first["mind"] != "personal" || first["source_mind"] != "personal" || first["importance"] != "critical" ||
		first["timestamp"] != first["created_at"] || first["accessCount"] != float64(0) || first["frameType"] != "I" {
		t.Errorf("newest frame = %v", first)
	}
	if last := frames.Results[2]; last["id"] != dogID || last["workspaceId"] != "w1" || last["accessCount"] != float64(1) || last["source"] != "import" {
		t.Errorf("oldest frame = %v", last)
	}
	if st := srv.JSON("GET", "/api/memory/frames?limit=10", nil, &frames); st != 200 || frames.Count != 1 {
		t.Errorf("personal only: %d %+v", st, frames)
	}

	var e obj
	wantError(t, "search without q", srv.JSON("GET", "/api/memory/search?workspace=w1", nil, &e), e, 400, "q (query) parameter is required")
	// No word in common: found by its vector, first.
	if got := search(t, srv, "workspace=w1&q="+url.QueryEscape("what breed is my dog")); len(got) == 0 || got[0]["id"] != dogID || got[0]["score"] == nil {
		t.Errorf("vector search = %v", got)
	}
	if got := search(t, srv, "workspace=w1&scope=personal&q=invoice"); len(got) != 0 {
		t.Errorf("personal scope found workspace frames: %v", got)
	}
	if got := search(t, srv, "workspace=w1&scope=global&q=payments"); len(got) != 1 || got[0]["id"] != bill["frameId"] {
		t.Errorf("global scope = %v", got)
	}

	var up obj
	if st := srv.JSON("PUT", "/api/memory/frames/"+dogID+"?workspace=w1", obj{"content": "Rex is a beagle puppy", "importance": "critical"}, &up); st != 200 ||
		up["updated"] != true || up["content"] != "Rex is a beagle puppy" || up["importance"] != "critical" || up["mind"] != "workspace" {
		t.Errorf("update: %d %v", st, up)
	}
	wantError(t, "update bad importance", srv.JSON("PUT", "/api/memory/frames/"+dogID+"?workspace=w1", obj{"content": "x", "importance": "huge"}, &e), e,
		400, `Invalid importance "huge". Valid values: critical, important, normal, temporary, deprecated`)
	wantError(t, "update missing", srv.JSON("PUT", "/api/memory/frames/mem-nope?workspace=w1", obj{"content": "x"}, &e), e, 404, "Frame not found")
	wantError(t, "update no content", srv.JSON("PUT", "/api/memory/frames/"+dogID+"?workspace=w1", obj{}, &e), e, 400, "content is required")
	wantError(t, "bad id", srv.JSON("DELETE", "/api/memory/frames/a.b?workspace=w1", nil, &e), e, 400, "Invalid frame ID")

	var acc obj
	if st := srv.JSON("PATCH", "/api/memory/frames/"+dogID+"/access?workspace=w1", nil, &acc); st != 200 || acc["accessCount"] != float64(2) {
		t.Errorf("access: %d %v", st, acc)
	}
	// Without the workspace, its frames are not reached.
	wantError(t, "delete without workspace", srv.JSON("DELETE", "/api/memory/frames/"+dogID, nil, &e), e, 404, "Frame not found")
	var del obj
	if st := srv.JSON("DELETE", "/api/memory/frames/"+dogID+"?workspace=w1", nil, &del); st != 200 || del["deleted"] != true || del["frameId"] != dogID {
		t.Errorf("delete: %d %v", st, del)
	}
	wantError(t, "delete again", srv.JSON("DELETE", "/api/memory/frames/"+dogID+"?workspace=w1", nil, &e), e, 404, "Frame not found")

	var stats struct {
		Personal  protocol.MemoryMindStats  `json:"personal"`
		Workspace *protocol.MemoryMindStats `json:"workspace"`
		Total     protocol.MemoryMindStats  `json:"total"`
	}
	if st := srv.JSON("GET", "/api/memory/stats?workspace=w1", nil, &stats); st != 200 || stats.Personal.FrameCount != 1 || stats.Workspace == nil ||
		stats.Workspace.FrameCount != 1 || stats.Total.FrameCount != 2 {
		t.Errorf("stats: %d %+v", st, stats)
	}

	// Frames and vectors survive a restart.
	srv.Restart()
	if got := search(t, srv, "workspace=w1&q="+url.QueryEscape("billing schedule")); len(got) != 1 || got[0]["id"] != bill["frameId"] {
		t.Errorf("after restart = %v", got)
	}
	// By meaning too: the stored vectors were read back.
	if got := search(t, srv, "workspace=w1&q=payments"); len(got) != 1 || got[0]["id"] != bill["frameId"] {
		t.Errorf("by meaning after restart = %v", got)
	}
}

func TestMemoryAPIWithoutEmbeddings(t *testing.T) {
	// The default test server has no model server: keyword search alone.
	srv := waggletest.Start(t)
	post(t, srv, obj{"workspace": "w1", "content": "Rex is a golden retriever puppy"})
	if got := search(t, srv, "workspace=w1&q=retriever"); len(got) != 1 {
		t.Errorf("keyword = %v", got)
	}
	if got := search(t, srv, "workspace=w1&q="+url.QueryEscape("my dog")); len(got) != 0 {
		t.Errorf("no vectors, yet found %v", got)
	}
}

func TestMemoryOnPostgres(t *testing.T) {
	llm := embeddingServer(t)
	pg := pgtest.URL(t)
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()), waggletest.WithConfig(func(c *app.Config) {
		c.SessionStore.PostgresURL, c.SessionStore.Store = pg, "postgres"
	}))
	testMemoryAPI(t, srv)
}

func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

func TestTeamMinds(t *testing.T) {
	natsAddr := waggletest.FreeAddr(t)
	srv := waggletest.Start(t, waggletest.WithConfig(func(c *app.Config) {
		c.SessionStore.PostgresURL = pgtest.URL(t)
		c.Gateway.Auth = "required"
		c.NATSListen = natsAddr
	}))
	nc := srv.DialNATS()
	waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "acme", Owner: "olga"})
	waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "globex", Owner: "greg"})
	olga := waggletest.Operate(t, nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "olga"}).Token
	greg := waggletest.Operate(t, nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "greg"}).Token
	vic := waggletest.Operate(t, nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "vic"}).Token
	if st := srv.JSON("PUT", "/api/teams/acme/members/vic", obj{"role": "viewer"}, nil, bearer(olga)...); st != 200 {
		t.Fatalf("add viewer: %d", st)
	}
	var ws obj
	if st := srv.JSON("POST", "/api/workspaces", obj{"name": "Acme Ops", "teamId": "acme"}, &ws, bearer(olga)...); st != 201 && st != 200 {
		t.Fatalf("create workspace: %d %v", st, ws)
	}
	id := fmt.Sprint(ws["id"])

	st, saved := post(t, srv, obj{"workspace": id, "content": "The acme launch is in May"}, bearer(olga)...)
	if st != 200 || saved["saved"] != true {
		t.Fatalf("olga saves: %d %v", st, saved)
	}
	frameID := fmt.Sprint(saved["frameId"])
	post(t, srv, obj{"content": "Olga prefers tea"}, bearer(olga)...)

	// Another team's mind is invisible.
	var e obj
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/memory/frames?workspace=" + id},
		{"GET", "/api/memory/search?q=launch&workspace=" + id},
		{"GET", "/api/memory/stats?workspace=" + id},
		{"GET", "/api/memory/graph?workspace=" + id},
		{"GET", "/api/memory/graph?scope=all&workspace=" + id},
		{"DELETE", "/api/memory/frames/" + frameID + "?workspace=" + id},
		{"PATCH", "/api/memory/frames/" + frameID + "/access?workspace=" + id},
	} {
		if st := srv.JSON(c.method, c.path, nil, &e, bearer(greg)...); st != 404 {
			t.Errorf("greg %s %s: %d %v", c.method, c.path, st, e)
		}
	}
	if st, body := post(t, srv, obj{"workspace": id, "content": "greg was here"}, bearer(greg)...); st != 404 {
		t.Errorf("greg writes: %d %v", st, body)
	}
	// Personal minds are per user.
	if got := search(t, srv, "q=tea", bearer(greg)...); len(got) != 0 {
		t.Errorf("greg sees olga's personal mind: %v", got)
	}
	if got := search(t, srv, "q=tea", bearer(olga)...); len(got) != 1 {
		t.Errorf("olga's personal mind = %v", got)
	}
	// Viewers read only.
	if got := search(t, srv, "q=launch&workspace="+id, bearer(vic)...); len(got) != 1 {
		t.Errorf("viewer read = %v", got)
	}
	if st, body := post(t, srv, obj{"workspace": id, "content": "vic was here"}, bearer(vic)...); st != 403 {
		t.Errorf("viewer writes: %d %v", st, body)
	}
	if st := srv.JSON("DELETE", "/api/memory/frames/"+frameID+"?workspace="+id, nil, &e, bearer(vic)...); st != 403 {
		t.Errorf("viewer deletes: %d %v", st, e)
	}
	if st := srv.JSON("DELETE", "/api/memory/frames/"+frameID+"?workspace="+id, nil, &e, bearer(olga)...); st != http.StatusOK {
		t.Errorf("olga deletes: %d %v", st, e)
	}
}
