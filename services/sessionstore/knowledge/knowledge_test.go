package knowledge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/sessionstore/frames"
	"github.com/waggle-os/core/services/sessionstore/graph"
	"github.com/waggle-os/core/services/sessionstore/knowledge"
	"github.com/waggle-os/core/services/sessionstore/settings"
)

// The extraction worker is a goroutine Knowledge owns: Stop must end it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var ctx = context.Background()

var ws = graph.Mind{Kind: frames.KindWorkspace, ID: "w1"}

func start(t *testing.T, model knowledge.Extractor) *knowledge.Knowledge {
	k := knowledge.New(knowledge.Config{Backend: graph.NewJSONL(t.TempDir()), Model: model})
	k.Start(ctx)
	t.Cleanup(func() { k.Stop(ctx) })
	return k
}

func names(g protocol.KnowledgeGraph) map[string]protocol.KnowledgeEntity {
	out := map[string]protocol.KnowledgeEntity{}
	for _, e := range g.Entities {
		out[e.Name] = e
	}
	return out
}

func rel(g protocol.KnowledgeGraph, from, typ, to string) *protocol.KnowledgeRelation {
	n := names(g)
	for _, r := range g.Relations {
		if r.Type == typ && r.Source == n[from].ID && r.Target == n[to].ID {
			return &r
		}
	}
	return nil
}

func TestATurnIsOneText(t *testing.T) {
	k := start(t, nil)
	// The user's message waits for its reply: one text, one extraction.
	k.ObserveMessage("w1", protocol.Message{Role: "user", TurnID: "t1", Content: "Ada Lovelace leads Project Falcon."})
	k.Flush()
	if n, _, _ := k.Count(ctx, ws); n != 0 {
		t.Fatalf("extracted before the reply: %d", n)
	}
	k.ObserveMessage("w1", protocol.Message{Role: "assistant", TurnID: "t1", Content: "Noted. Falcon ships with Kafka."})
	k.Flush()
	g, err := k.Graph(ctx, protocol.KnowledgeGraphRequest{MemoryOwner: protocol.MemoryOwner{Workspace: "w1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Ada Lovelace", "Project Falcon", "Kafka"} {
		if _, ok := names(g)[want]; !ok {
			t.Errorf("missing %s in %v", want, g.Entities)
		}
	}
	if rel(g, "Ada Lovelace", "leads", "Project Falcon") == nil {
		t.Errorf("no leads relation in %v", g.Relations)
	}
	// Personal scope sees none of it; all marks each mind.
	p, _ := k.Graph(ctx, protocol.KnowledgeGraphRequest{MemoryOwner: protocol.MemoryOwner{Workspace: "w1"}, Scope: protocol.MindPersonal})
	if len(p.Entities) != 0 {
		t.Errorf("personal = %v", p.Entities)
	}
	direct, neighbours, err := k.Related(ctx, ws, "what does Project Falcon need?")
	if err != nil || !slices.Equal(direct, []string{"project falcon"}) || !slices.Contains(neighbours, "ada lovelace") {
		t.Errorf("related = %v %v %v", direct, neighbours, err)
	}
}

func TestCorrectRetires(t *testing.T) {
	k := start(t, nil)
	k.Observe(ws, "Ada Lovelace works at Globex Inc.")
	k.Observe(graph.Mind{Kind: frames.KindPersonal}, "Grace Hopper leads Project Cobol.")
	k.Flush()
	owner := protocol.MemoryOwner{Workspace: "w1"}
	g, _ := k.Graph(ctx, protocol.KnowledgeGraphRequest{MemoryOwner: owner, Scope: protocol.KnowledgeScopeAll})
	wrong := rel(g, "Ada Lovelace", "works_at", "Globex Inc")
	grace := names(g)["Grace Hopper"]
	if wrong == nil || grace.ID == "" || grace.Mind != protocol.MindPersonal {
		t.Fatalf("graph = %+v", g)
	}
	out, err := k.Correct(ctx, protocol.KnowledgeCorrectRequest{MemoryOwner: owner, ID: wrong.ID, Reason: "she left"})
	if err != nil || len(out.Relations) != 1 || out.Relations[0].ValidTo == "" || out.Relations[0].Properties["retiredBecause"] != "she left" {
		t.Fatalf("correct = %+v %v", out, err)
	}
	// The personal mind is reached too, after the workspace's.
	if out, err := k.Correct(ctx, protocol.KnowledgeCorrectRequest{MemoryOwner: owner, ID: grace.ID}); err != nil || len(out.Entities) != 1 {
		t.Fatalf("correct personal = %+v %v", out, err)
	}
	if _, err := k.Correct(ctx, protocol.KnowledgeCorrectRequest{MemoryOwner: owner, ID: wrong.ID}); !errors.Is(err, graph.ErrNotFound) {
		t.Errorf("twice: %v", err)
	}
	if _, err := k.Correct(ctx, protocol.KnowledgeCorrectRequest{MemoryOwner: owner, ID: "../etc"}); protocol.KindOf(err) != protocol.Invalid {
		t.Errorf("bad id: %v", err)
	}
}

func TestParseModelReply(t *testing.T) {
	b, err := knowledge.ParseModelReply("Here you go:\n```json\n" + `{"entities":[{"name":"Ada Lovelace","type":"person"},{"name":"Acme Corp","type":"organization"},{"name":"Falcon","type":"project"}],
		"relations":[{"from":"Ada Lovelace","to":"Acme Corp","type":"works_at","confidence":0.9},
		{"from":"Ada Lovelace","to":"Falcon","type":"is_secretly","confidence":1},
		{"from":"Ada Lovelace","to":"Nobody","type":"knows"},
		{"from":"Falcon","to":"Acme Corp","type":"part_of","confidence":7}]}` + "\n```")
	if err != nil {
		t.Fatal(err)
	}
	if err := graph.Check(&b); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range b.Relations {
		got = append(got, r.From+" "+r.Type+" "+r.To)
	}
	if !slices.Equal(got, []string{"Ada Lovelace works_at Acme Corp", "Falcon part_of Acme Corp"}) || b.Relations[1].Confidence != 0.7 {
		t.Errorf("relations = %v %+v", got, b.Relations)
	}
	if b.Entities[1].Type != graph.TypeOrganisation {
		t.Errorf("types = %+v", b.Entities)
	}
	for _, bad := range []string{"no json here", `{"entities": "x"}`} {
		if _, err := knowledge.ParseModelReply(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The scripted model as extractor: typed relations the rules cannot read.
func TestModelExtractor(t *testing.T) {
	llm := llmtest.New(llmtest.WithDefault(llmtest.Reply(`{"entities":[{"name":"Ada Lovelace","type":"person"},{"name":"Project Falcon","type":"project"}],` +
		`"relations":[{"from":"Ada Lovelace","to":"Project Falcon","type":"leads","confidence":0.95}]}`)))
	llm.Start()
	t.Cleanup(llm.Close)
	dir := t.TempDir()
	x := knowledge.NewModelExtractor(llm.URL(), "", settingsIn(t, dir))

	// Off unless config.json asks for it: no call at all.
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"budgetModel":"cheap-1"}`)
	if b, err := x.Extract(ctx, "Ada is steering Falcon"); err != nil || len(b.Entities) != 0 || len(llm.ChatRequests()) != 0 {
		t.Fatalf("extraction without the switch: %+v %v, %d calls", b, err, len(llm.ChatRequests()))
	}
	write(`{"budgetModel":"cheap-1","knowledgeExtraction":"model"}`)
	k := start(t, x)
	k.Observe(ws, "Ada is the one steering the Falcon effort these days.")
	k.Flush()
	reqs := llm.ChatRequests()
	if len(reqs) != 1 || reqs[0].Chat.Model != "cheap-1" || !strings.Contains(string(reqs[0].RawBody), "steering the Falcon effort") {
		t.Fatalf("model calls = %d", len(reqs))
	}
	g, _ := k.Graph(ctx, protocol.KnowledgeGraphRequest{MemoryOwner: protocol.MemoryOwner{Workspace: "w1"}})
	r := rel(g, "Ada Lovelace", "leads", "Project Falcon")
	if r == nil || r.Confidence != 0.95 {
		t.Fatalf("graph = %+v", g)
	}
}

// A store stopped while the model extracts a text loses nothing: that
// text (the rules' findings already stored), the texts queued behind it
// and a user message still waiting for its reply go to the JetStream
// backlog, and the next store extracts them — the first only by the
// model, so no mention is counted twice.
func TestStopMidExtractionKeepsTheWork(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Conn("knowledge")
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	const falcon = `{"entities":[{"name":"Ada Lovelace","type":"person"},{"name":"Project Falcon","type":"project"}],` +
		`"relations":[{"from":"Ada Lovelace","to":"Project Falcon","type":"leads","confidence":0.95}]}`
	hold := llmtest.NewPause()
	t.Cleanup(hold.Release)
	var held atomic.Bool
	llm := llmtest.New(llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		if !strings.Contains(string(r.RawBody), "Project Falcon") {
			return llmtest.Reply(`{"entities":[],"relations":[]}`)
		}
		if held.CompareAndSwap(false, true) {
			return llmtest.Response{Steps: []llmtest.Step{llmtest.Wait(hold), llmtest.Content(falcon)}}
		}
		return llmtest.Reply(falcon)
	}))
	llm.Start()
	t.Cleanup(llm.Close)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"budgetModel":"cheap-1","knowledgeExtraction":"model"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	x := knowledge.NewModelExtractor(llm.URL(), "", settingsIn(t, dir))
	graphDir := t.TempDir()
	run := func() *knowledge.Knowledge {
		k := knowledge.New(knowledge.Config{Backend: graph.NewJSONL(graphDir), Model: x})
		k.Start(ctx)
		b, err := knowledge.OpenBacklog(ctx, js, 1)
		if err != nil {
			t.Fatal(err)
		}
		k.UseBacklog(b)
		t.Cleanup(func() { k.Stop(ctx) })
		return k
	}

	first := run()
	first.Observe(ws, "Ada Lovelace is steering Project Falcon these days.")
	first.Observe(ws, "Grace Hopper joined Initech Corp last spring.")
	first.ObserveMessage("w1", protocol.Message{Role: "user", TurnID: "t9", Content: "Linus Torvalds maintains Kernel Works."})
	select {
	case <-hold.Reached():
	case <-time.After(30 * time.Second):
		t.Fatal("the model was never asked")
	}
	first.Stop(ctx)
	waitfor.True(t, "the held model call cancelled", func() bool { return llm.Cancellations() == 1 })
	g, err := first.Graph(ctx, protocol.KnowledgeGraphRequest{MemoryOwner: protocol.MemoryOwner{Workspace: "w1"}})
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := names(g)["Ada Lovelace"]; !ok || e.Mentions != 1 || rel(g, "Ada Lovelace", "leads", "Project Falcon") != nil {
		t.Fatalf("after the stop: the rules' findings only, want Ada once and no leads: %+v", g)
	}
	if _, ok := names(g)["Grace Hopper"]; ok {
		t.Fatalf("the queued text was extracted after the stop: %+v", g.Entities)
	}
	st, err := js.Stream(ctx, protocol.StreamKnowledgeBacklog)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != 3 {
		t.Fatalf("backlog after the stop = %+v %v, want 3 texts", info, err)
	}

	second := run()
	waitfor.NoError(t, "the backlog extracted", func() error {
		second.Flush()
		g, err = second.Graph(ctx, protocol.KnowledgeGraphRequest{MemoryOwner: protocol.MemoryOwner{Workspace: "w1"}})
		if err != nil {
			return err
		}
		for _, want := range []string{"Grace Hopper", "Linus Torvalds"} {
			if _, ok := names(g)[want]; !ok {
				return fmt.Errorf("no %s in %d entities", want, len(g.Entities))
			}
		}
		if rel(g, "Ada Lovelace", "leads", "Project Falcon") == nil {
			return fmt.Errorf("no leads relation in %d relations", len(g.Relations))
		}
		return nil
	})
	// Rules once (by the first store), the model once (by the second).
	if n := names(g)["Ada Lovelace"].Mentions; n != 2 {
		t.Errorf("Ada Lovelace mentioned %d times, want 2", n)
	}
	waitfor.True(t, "the backlog emptied", func() bool {
		info, err := st.Info(ctx)
		return err == nil && info.State.Msgs == 0
	})
}

// settingsIn is the settings of the data dir dir (its config.json), as
// the session store hands them to the extractor.
func settingsIn(t *testing.T, dir string) func(string) json.RawMessage {
	t.Helper()
	st, err := settings.New(settings.Config{DataDir: dir, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return st.Value
}

// TestQueuedTurnsDoNotHoldTheirReplies: a turn waiting in the extraction
// queue keeps the part of its text that is read (MaxText), not its whole
// reply: under load the worker falls behind, and 24 turns of 5 MB replies
// held 120 MB in the queue (e2e/load TestStalledReadersKeepMemoryBounded's
// heap bound failed on a busy machine).
func TestQueuedTurnsDoNotHoldTheirReplies(t *testing.T) {
	k := knowledge.New(knowledge.Config{Backend: graph.NewJSONL(t.TempDir()), Queue: 64}) // not started: every job waits
	const turns, reply = 16, 2 << 20
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	for i := range turns {
		id := fmt.Sprintf("t%d", i)
		k.ObserveMessage("w1", protocol.Message{Role: "user", TurnID: id, Content: strings.Repeat("q", reply)})
		k.ObserveMessage("w1", protocol.Message{Role: "assistant", TurnID: id, Content: strings.Repeat("a", reply)})
	}
	grown := int64(heap()) - int64(before)
	if limit := int64(turns * 4 * knowledge.MaxText); grown > limit {
		t.Fatalf("%d queued turns of %d MiB replies hold %d KiB, want ≤ %d KiB", turns, reply>>20, grown>>10, limit>>10)
	}
	runtime.KeepAlive(k)
}
