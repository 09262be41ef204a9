package tools

import (
	"context"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
)

// fakeKnowledge is a graph of Ada leading Falcon; Correct retires by id.
type fakeKnowledge struct {
	queries []string
	retired []string
}

func (f *fakeKnowledge) Query(_ context.Context, ws, q, typ string, limit int) (protocol.KnowledgeGraph, error) {
	f.queries = append(f.queries, ws+"|"+q+"|"+typ)
	if !strings.Contains("ada lovelace project falcon", strings.ToLower(q)) {
		return protocol.KnowledgeGraph{}, nil
	}
	return protocol.KnowledgeGraph{
		Entities: []protocol.KnowledgeEntity{
			{ID: "ent-1", Name: "Ada Lovelace", Type: "person", Mentions: 2},
			{ID: "ent-2", Name: "Project Falcon", Type: "project", Mentions: 1},
		},
		Relations: []protocol.KnowledgeRelation{{ID: "rel-1", Source: "ent-1", Target: "ent-2", Type: "leads", Confidence: 0.8}},
	}, nil
}

func (f *fakeKnowledge) Correct(_ context.Context, ws, id, reason string) (protocol.KnowledgeGraph, error) {
	if id != "rel-1" {
		return protocol.KnowledgeGraph{}, protocol.Errorf(protocol.NotFound, "No such entity or relation")
	}
	f.retired = append(f.retired, ws+"|"+id+"|"+reason)
	return protocol.KnowledgeGraph{Relations: []protocol.KnowledgeRelation{{ID: id}}}, nil
}

func TestQueryKnowledge(t *testing.T) {
	k := &fakeKnowledge{}
	env := Env{Workspace: "w1", Knowledge: k}
	out := mustCall(t, env, "query_knowledge", map[string]any{"query": " falcon ", "type": "project"})
	for _, want := range []string{"Ada Lovelace (person; mentioned 2×; id ent-1)", "Ada Lovelace leads Project Falcon (confidence 0.8; id rel-1)"} {
		if !strings.Contains(out, want) {
			t.Errorf("query_knowledge = %q, lacks %q", out, want)
		}
	}
	if len(k.queries) != 1 || k.queries[0] != "w1|falcon|project" {
		t.Errorf("queries = %v", k.queries)
	}
	if out := mustCall(t, env, "query_knowledge", map[string]any{"query": "zebra"}); out != "No matching entities in the knowledge graph." {
		t.Errorf("no match = %q", out)
	}
	if _, err := call(t, env, "query_knowledge", map[string]any{"query": "x", "extra": 1}); err == nil {
		t.Error("an unknown argument was accepted")
	}
}

func TestCorrectKnowledge(t *testing.T) {
	k := &fakeKnowledge{}
	env := Env{Workspace: "w1", Knowledge: k}
	out := mustCall(t, env, "correct_knowledge", map[string]any{"id": "rel-1", "reason": "she moved on"})
	if out != "Retired 0 entities and 1 relations." || len(k.retired) != 1 || k.retired[0] != "w1|rel-1|she moved on" {
		t.Errorf("correct = %q, retired %v", out, k.retired)
	}
	if _, err := call(t, env, "correct_knowledge", map[string]any{"id": "rel-9"}); err == nil || !strings.Contains(err.Error(), "no valid entity or relation has id rel-9") {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := call(t, env, "correct_knowledge", map[string]any{"id": "../x"}); err == nil {
		t.Error("a malformed id was accepted")
	}
}

func TestBindHidesKnowledgeToolsWithoutKnowledge(t *testing.T) {
	for _, b := range NewRegistry(DefaultConfig()).Bind(Env{FilesDir: "/x"}, nil) {
		if b.Name() == "query_knowledge" || b.Name() == "correct_knowledge" {
			t.Errorf("%s offered without a knowledge graph", b.Name())
		}
	}
}
