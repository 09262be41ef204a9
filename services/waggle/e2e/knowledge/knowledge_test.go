// Package knowledge holds black-box tests of the minds' knowledge graph:
// extraction after a turn and a memory save, GET /api/memory/graph, the
// counts of /api/memory/stats, the query_knowledge and correct_knowledge
// tools, on JSONL files and on PostgreSQL.
package knowledge

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

type obj = map[string]any

type graphReply struct {
	Entities  []obj `json:"entities"`
	Relations []obj `json:"relations"`
}

func getGraph(t *testing.T, srv *waggletest.Server, query string) graphReply {
	t.Helper()
	var g graphReply
	if st := srv.JSON("GET", "/api/memory/graph?"+query, nil, &g); st != 200 {
		t.Fatalf("graph %s: %d", query, st)
	}
	return g
}

// entity finds an entity by name.
func entity(g graphReply, name string) obj {
	for _, e := range g.Entities {
		if e["name"] == name {
			return e
		}
	}
	return nil
}

// relation finds a relation by type between two named entities.
func relation(g graphReply, from, typ, to string) obj {
	f, d := entity(g, from), entity(g, to)
	if f == nil || d == nil {
		return nil
	}
	for _, r := range g.Relations {
		if r["relation_type"] == typ && r["source_id"] == f["id"] && r["target_id"] == d["id"] {
			return r
		}
	}
	return nil
}

// waitRelation polls the graph until from -typ-> to is there.
func waitRelation(t *testing.T, srv *waggletest.Server, query, from, typ, to string) graphReply {
	t.Helper()
	var g graphReply
	waitfor.NoError(t, fmt.Sprintf("%s %s %s in the graph", from, typ, to), func() error {
		g = getGraph(t, srv, query)
		if relation(g, from, typ, to) == nil {
			return fmt.Errorf("graph has %d entities, %d relations", len(g.Entities), len(g.Relations))
		}
		return nil
	})
	return g
}

func chatDone(t *testing.T, srv *waggletest.Server, ws, message string) {
	t.Helper()
	evs := srv.Chat(obj{"message": message, "workspace": ws, "session": "s1"}).All(t)
	if names := waggletest.Names(evs); names[len(names)-1] != "done" {
		t.Fatalf("turn events %v", names)
	}
}

func TestKnowledgeGraph(t *testing.T) {
	t.Run("jsonl", func(t *testing.T) { testKnowledgeGraph(t) })
	t.Run("postgres", func(t *testing.T) {
		pg := pgtest.URL(t)
		testKnowledgeGraph(t, waggletest.WithConfig(func(c *app.Config) {
			c.SessionStore.PostgresURL, c.SessionStore.Store = pg, "postgres"
		}))
	})
}

func testKnowledgeGraph(t *testing.T, opts ...waggletest.Option) {
	llm := llmtest.New(llmtest.WithResponses(llmtest.Reply("Noted: Ada runs Falcon.")))
	llm.Start()
	t.Cleanup(llm.Close)
	srv := waggletest.Start(t, append(opts, waggletest.WithLLM(llm.URL()))...)

	// A turn names three entities; the rules (no extraction model) find
	// them and their relations within seconds of done.
	chatDone(t, srv, "w1", "Ada Lovelace leads Project Falcon at Acme Corp.")
	g := waitRelation(t, srv, "workspace=w1", "Ada Lovelace", "leads", "Project Falcon")
	for name, typ := range map[string]string{"Ada Lovelace": "person", "Project Falcon": "project", "Acme Corp": "organisation"} {
		e := entity(g, name)
		if e == nil || e["entity_type"] != typ || e["type"] != typ || e["label"] != name || e["valid_to"] != nil || e["mind"] != "workspace" {
			t.Errorf("entity %s = %v", name, e)
		}
	}
	leads := relation(g, "Ada Lovelace", "leads", "Project Falcon")
	if leads["relationship"] != "leads" || leads["source"] != leads["source_id"] || leads["confidence"].(float64) <= 0 {
		t.Errorf("leads = %v", leads)
	}
	if relation(g, "Ada Lovelace", "works_at", "Acme Corp") == nil {
		t.Errorf("no works_at in %v", g.Relations)
	}
	// Another workspace's graph and the personal one are empty.
	if o := getGraph(t, srv, "workspace=w2"); len(o.Entities) != 0 {
		t.Errorf("w2 sees %v", o.Entities)
	}
	if p := getGraph(t, srv, "scope=personal&workspace=w1"); len(p.Entities) != 0 {
		t.Errorf("personal mind sees %v", p.Entities)
	}

	// A memory save feeds the same graph; "ACME Corporation" is Acme Corp.
	var saved obj
	if st := srv.JSON("POST", "/api/memory/frames", obj{"workspace": "w1", "content": "Grace Hopper works at ACME Corporation."}, &saved); st != 200 {
		t.Fatalf("save: %d %v", st, saved)
	}
	g = waitRelation(t, srv, "workspace=w1", "Grace Hopper", "works_at", "Acme Corp")
	if len(g.Entities) != 4 {
		t.Errorf("entities after the save: %v", g.Entities)
	}
	var stats struct {
		Workspace struct{ EntityCount, RelationCount int } `json:"workspace"`
		Total     struct{ EntityCount, RelationCount int } `json:"total"`
	}
	srv.JSON("GET", "/api/memory/stats?workspace=w1", nil, &stats)
	if stats.Workspace.EntityCount != 4 || stats.Workspace.RelationCount != len(g.Relations) || stats.Total.EntityCount != 4 {
		t.Errorf("stats = %+v, want 4 entities and %d relations", stats, len(g.Relations))
	}

	// query_knowledge finds them for the model.
	llm.Enqueue(
		llmtest.Response{Steps: llmtest.Steps(llmtest.ToolCall(0, "call_q", "query_knowledge", `{"query":"falcon"}`, 2))},
		llmtest.Reply("Ada leads it."),
	)
	before := len(llm.ChatRequests())
	chatDone(t, srv, "w1", "Who leads Falcon?")
	reqs := llm.ChatRequests()
	if len(reqs) != before+2 {
		t.Fatalf("%d model calls for the query turn, want 2", len(reqs)-before)
	}
	if body := string(reqs[len(reqs)-1].RawBody); !strings.Contains(body, "Ada Lovelace leads Project Falcon") {
		t.Fatalf("the tool result lacks the relation: %s", body)
	}
	// The graph's key knowledge is in every turn's system prompt.
	if sys := reqs[before].Chat.Messages[0]; sys.Role != "system" ||
		!strings.Contains(sys.Content, "## Key knowledge of this workspace\n") || !strings.Contains(sys.Content, "- Ada Lovelace leads Project Falcon") {
		t.Fatalf("the system prompt lacks the key knowledge: %s", sys.Content)
	}

	// correct_knowledge retires the wrong fact: gone from the graph, kept
	// on record with its reason.
	id := fmt.Sprint(leads["id"])
	llm.Enqueue(
		llmtest.Response{Steps: llmtest.Steps(llmtest.ToolCall(0, "call_c", "correct_knowledge", `{"id":"`+id+`","reason":"Grace leads Falcon now"}`, 2))},
		llmtest.Reply("Corrected."),
	)
	chatDone(t, srv, "w1", "That is wrong: Ada no longer leads Falcon.")
	if body := string(llm.ChatRequests()[len(llm.ChatRequests())-1].RawBody); !strings.Contains(body, "Retired 0 entities and 1 relations.") {
		t.Fatalf("the tool result: %s", body)
	}
	if relation(getGraph(t, srv, "workspace=w1"), "Ada Lovelace", "leads", "Project Falcon") != nil {
		t.Error("a retired relation is still in the graph")
	}
	old := relation(getGraph(t, srv, "workspace=w1&retired=true"), "Ada Lovelace", "leads", "Project Falcon")
	if old == nil || old["valid_to"] == nil || old["properties"].(obj)["retiredBecause"] != "Grace leads Falcon now" {
		t.Errorf("retired relation record = %v", old)
	}

	// The correction is undone over HTTP: the relation is valid again,
	// its reason gone; undoing it twice is a conflict.
	var back graphReply
	if st := srv.JSON("POST", "/api/memory/graph/"+id+"/restore?workspace=w1", nil, &back); st != 200 || len(back.Relations) != 1 || back.Relations[0]["valid_to"] != nil {
		t.Fatalf("restore %s: %d %+v", id, st, back)
	}
	if relation(getGraph(t, srv, "workspace=w1"), "Ada Lovelace", "leads", "Project Falcon") == nil {
		t.Error("the restored relation is not in the graph")
	}
	var errBody obj
	if st := srv.JSON("POST", "/api/memory/graph/"+id+"/restore?workspace=w1", nil, &errBody); st != 409 {
		t.Errorf("restoring a valid relation: %d %v, want 409", st, errBody)
	}
	// An entity retired over HTTP takes its relations along; restoring it
	// brings back the shape it had.
	ada := fmt.Sprint(entity(getGraph(t, srv, "workspace=w1"), "Ada Lovelace")["id"])
	var gone graphReply
	if st := srv.JSON("POST", "/api/memory/graph/"+ada+"/retire?workspace=w1", obj{"reason": "a test"}, &gone); st != 200 || len(gone.Entities) != 1 || len(gone.Relations) < 2 {
		t.Fatalf("retire Ada: %d %+v", st, gone)
	}
	if entity(getGraph(t, srv, "workspace=w1"), "Ada Lovelace") != nil {
		t.Error("a retired entity is still in the graph")
	}
	if st := srv.JSON("POST", "/api/memory/graph/"+ada+"/restore?workspace=w2", nil, &errBody); st != 404 {
		t.Errorf("restoring through another workspace: %d, want 404", st)
	}
	if st := srv.JSON("POST", "/api/memory/graph/"+ada+"/restore?workspace=w1", nil, &back); st != 200 || len(back.Entities) != 1 || len(back.Relations) != len(gone.Relations) {
		t.Fatalf("restore Ada: %d %+v, want her and her %d relations", st, back, len(gone.Relations))
	}
	g = getGraph(t, srv, "workspace=w1")
	if relation(g, "Ada Lovelace", "leads", "Project Falcon") == nil || relation(g, "Ada Lovelace", "works_at", "Acme Corp") == nil {
		t.Errorf("Ada's relations after the restore: %v", g.Relations)
	}
	if st := srv.JSON("POST", "/api/memory/graph/..%2Fx/restore?workspace=w1", nil, &errBody); st != 400 {
		t.Errorf("a bad id: %d, want 400", st)
	}

	// The graph is read a page at a time.
	var page struct {
		graphReply
		NextOffset int `json:"nextOffset"`
	}
	seen := map[any]bool{}
	for off := 0; ; off = page.NextOffset {
		page.NextOffset = 0
		if st := srv.JSON("GET", fmt.Sprintf("/api/memory/graph?workspace=w1&limit=3&offset=%d", off), nil, &page); st != 200 || len(page.Entities) > 3 {
			t.Fatalf("page at %d: %d %d entities", off, st, len(page.Entities))
		}
		for _, e := range page.Entities {
			seen[e["id"]] = true
		}
		if page.NextOffset == 0 {
			break
		}
	}
	if whole := len(getGraph(t, srv, "workspace=w1").Entities); len(seen) != whole || whole < 4 {
		t.Errorf("pages held %d entities, the whole graph %d", len(seen), whole)
	}

	// scope=all marks each fact with its mind.
	all := getGraph(t, srv, "scope=all&workspace=w1")
	if len(all.Entities) == 0 || all.Entities[0]["_source"] != "workspace" {
		t.Errorf("scope=all = %v", all.Entities)
	}
}

// TestModelExtraction: with knowledgeExtraction "model", the budget model
// (the scripted server) reads each turn for typed relations the rules
// cannot see; the turn still ends without waiting for it.
func TestModelExtraction(t *testing.T) {
	const budget = "cheap-extractor"
	release := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	llm := llmtest.New(llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		if r.Chat.Model != budget || !strings.Contains(string(r.RawBody), "You extract a knowledge graph") {
			return llmtest.Reply("Understood.") // the turn (or another budget-model task)
		}
		<-release // the extractor is held until the turn is done
		return llmtest.Reply(`{"entities":[{"name":"Ada Lovelace","type":"person"},{"name":"Project Falcon","type":"project"},{"name":"Acme Corp","type":"organisation"}],` +
			`"relations":[{"from":"Ada Lovelace","to":"Project Falcon","type":"leads","confidence":0.95},` +
			`{"from":"Project Falcon","to":"Acme Corp","type":"depends_on","confidence":0.9}]}`)
	}))
	llm.Start()
	t.Cleanup(llm.Close)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"budgetModel":"`+budget+`","knowledgeExtraction":"model","gepa":false}`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()), waggletest.WithDataDir(dir))

	// Nothing in this sentence is a pattern the rules know.
	chatDone(t, srv, "w1", "Ada Lovelace has been steering Project Falcon, which cannot ship without Acme Corp.")
	close(release)
	g := waitRelation(t, srv, "workspace=w1", "Project Falcon", "depends_on", "Acme Corp")
	if r := relation(g, "Ada Lovelace", "leads", "Project Falcon"); r == nil || r["confidence"] != 0.95 {
		t.Errorf("leads = %v", r)
	}
}

// TestExtractionModelFollowsTheSettings: the budget model that extracts
// the graph is the settings' — the one the app saves through PUT
// /api/settings is the next extraction's, and a broken hand edit of
// config.json keeps the last good settings in force for extraction as
// for everything else (the settings have one reader), instead of turning
// extraction off.
func TestExtractionModelFollowsTheSettings(t *testing.T) {
	const marker = "You extract a knowledge graph"
	llm := llmtest.New(llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		if !strings.Contains(string(r.RawBody), marker) {
			return llmtest.Reply("Understood.")
		}
		return llmtest.Reply(`{"entities":[],"relations":[]}`)
	}))
	llm.Start()
	t.Cleanup(llm.Close)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"budgetModel":"first-extractor","knowledgeExtraction":"model","gepa":false}`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()), waggletest.WithDataDir(dir))
	// extractedBy waits for the extraction of the text holding word and
	// returns the model it asked.
	extractedBy := func(word string) string {
		t.Helper()
		var model string
		waitfor.True(t, "the extraction of "+word, func() bool {
			for _, r := range llm.ChatRequests() {
				if body := string(r.RawBody); strings.Contains(body, marker) && strings.Contains(body, word) {
					model = r.Chat.Model
					return true
				}
			}
			return false
		})
		return model
	}

	chatDone(t, srv, "w1", "Ada Lovelace has been steering Project Falcon.")
	if m := extractedBy("Falcon"); m != "first-extractor" {
		t.Fatalf("first extraction by %q", m)
	}
	if code := srv.JSON("PUT", "/api/settings", obj{"budgetModel": "second-extractor"}, nil); code != http.StatusOK {
		t.Fatalf("put settings: %d", code)
	}
	chatDone(t, srv, "w1", "Grace Hopper has been steering Project Heron.")
	if m := extractedBy("Heron"); m != "second-extractor" {
		t.Fatalf("after PUT /api/settings the extraction used %q", m)
	}
	// A half-saved hand edit: the settings keep their last good version.
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte("{\"budgetModel\":\"third\",\"knowledgeExtraction\":\"model\",\n  oops\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	chatDone(t, srv, "w1", "Linus Torvalds has been steering Project Kestrel.")
	if m := extractedBy("Kestrel"); m != "second-extractor" {
		t.Fatalf("after a broken edit the extraction used %q, want the last good settings' model", m)
	}
}
