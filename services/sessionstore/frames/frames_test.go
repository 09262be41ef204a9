package frames_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/sessionstore/frames"
	"github.com/waggle-os/core/services/sessionstore/settings"
)

var ctx = context.Background()

// concepts is the scripted embedding model of these tests.
var concepts = llmtest.Concepts(
	[]string{"dog", "puppy", "canine", "pet"},
	[]string{"invoice", "billing", "payment"},
	[]string{"falcon", "peregrine", "bird"},
)

// env is one backend under test: open returns a backend over the same
// storage each time it is called (a restart).
type env struct {
	name string
	open func(t *testing.T) frames.Backend
}

// each runs fn against every backend, each with fresh storage. The
// PostgreSQL run skips when no server can be had (libs/pgtest).
func each(t *testing.T, fn func(t *testing.T, e env)) {
	t.Run("jsonl", func(t *testing.T) {
		dir := t.TempDir()
		fn(t, env{name: "jsonl", open: func(*testing.T) frames.Backend { return frames.NewJSONL(dir) }})
	})
	t.Run("postgres", func(t *testing.T) {
		pool, err := pgxpool.New(ctx, pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		fn(t, env{name: "postgres", open: func(t *testing.T) frames.Backend {
			b, err := frames.OpenPostgres(ctx, pool)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}})
	})
}

// clock ticks one second per reading, so creation order is total.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

type fixture struct {
	minds *frames.Minds
	llm   *llmtest.Server
	dir   string
	clk   *clock
}

// start opens minds over b; llm nil means no embedder.
func start(t *testing.T, b frames.Backend, llm *llmtest.Server, dir string, clk *clock) *frames.Minds {
	t.Helper()
	st, err := settings.New(settings.Config{DataDir: dir, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	cfg := frames.Config{Setting: st.Value, Backend: b, Now: clk.now, RetryInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	if llm != nil {
		cfg.Embedder = frames.NewOpenAIEmbedder(llm.URL(), "")
	}
	m := frames.New(cfg)
	m.Start(ctx)
	t.Cleanup(m.Stop)
	return m
}

func newFixture(t *testing.T, e env, vectors bool) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir(), clk: &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
	if vectors {
		f.llm = llmtest.New(llmtest.WithEmbeddings(concepts))
		f.llm.Start()
		t.Cleanup(f.llm.Close)
	}
	f.minds = start(t, e.open(t), f.llm, f.dir, f.clk)
	return f
}

func (f *fixture) add(t *testing.T, ws, content string, tags ...string) protocol.MemoryFrame {
	t.Helper()
	rep, err := f.minds.Add(ctx, protocol.MemoryAddRequest{MemoryOwner: protocol.MemoryOwner{Workspace: ws}, Content: content, Tags: tags})
	if err != nil {
		t.Fatalf("add %q: %v", content, err)
	}
	if !rep.Saved {
		t.Fatalf("add %q: not saved: %+v", content, rep)
	}
	return rep.Frame
}

func query(t *testing.T, m *frames.Minds, ws, q string, limit int) []string {
	t.Helper()
	fs, err := m.Query(ctx, protocol.MemoryQueryRequest{MemoryOwner: protocol.MemoryOwner{Workspace: ws}, Query: q, Limit: limit}, frames.DefaultRecall)
	if err != nil {
		t.Fatalf("query %q: %v", q, err)
	}
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.ID
	}
	return out
}

// waitEmbedded polls until every frame of the owner's minds has a vector.
func waitEmbedded(t *testing.T, m *frames.Minds, ws string, want int) {
	t.Helper()
	waitfor.NoError(t, fmt.Sprintf("%d frames of %s embedded", want, ws), func() error {
		st, err := m.Stats(ctx, protocol.MemoryStatsRequest{MemoryOwner: protocol.MemoryOwner{Workspace: ws}})
		if err != nil {
			t.Fatal(err)
		}
		if st.Embedded == want && st.Pending == 0 {
			return nil
		}
		return fmt.Errorf("embedded %d pending %d, want %d embedded", st.Embedded, st.Pending, want)
	})
}

func wantKind(t *testing.T, what string, err error, kind protocol.Kind, text string) {
	t.Helper()
	if protocol.KindOf(err) != kind || !strings.Contains(err.Error(), text) {
		t.Errorf("%s: err = %v, want %s %q", what, err, kind, text)
	}
}

func TestKeywordSearch(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		f := newFixture(t, e, false)
		ws := "mem-ws"
		deploy := f.add(t, ws, "The deploy window is Friday 4pm").ID
		alice := f.add(t, ws, "Alice owns the billing service").ID
		both := f.add(t, ws, "Billing deploys need Alice's approval").ID
		tagged := f.add(t, ws, "Rotate keys quarterly", "Security", "ops").ID
		if got := query(t, f.minds, ws, "alice DEPLOY", 0); !slices.Equal(got, []string{both, alice, deploy}) {
			t.Errorf("alice deploy = %v, want [both alice deploy] %v", got, []string{both, alice, deploy})
		}
		if got := query(t, f.minds, ws, "security", 0); !slices.Equal(got, []string{tagged}) {
			t.Errorf("tag search = %v", got)
		}
		if got := query(t, f.minds, ws, "zebra", 0); len(got) != 0 {
			t.Errorf("zebra = %v", got)
		}
		for i := range 7 {
			f.add(t, ws, fmt.Sprintf("note %d", i))
		}
		if got := query(t, f.minds, ws, "note", 0); len(got) != frames.DefaultRecall {
			t.Errorf("default limit gave %d", len(got))
		}
		if got := query(t, f.minds, "other-ws", "alice", 0); len(got) != 0 {
			t.Errorf("other workspace = %v, want empty", got)
		}
		fs, err := f.minds.Frames(ctx, protocol.MemoryFramesRequest{MemoryOwner: protocol.MemoryOwner{Workspace: ws}, Limit: 2})
		if err != nil || len(fs) != 2 || fs[0].Content != "note 6" || fs[1].Content != "note 5" {
			t.Errorf("recent = %+v, %v", fs, err)
		}
	})
}

func TestAddValidatesAndDeduplicates(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		f := newFixture(t, e, false)
		owner := protocol.MemoryOwner{Workspace: "w1"}
		_, err := f.minds.Add(ctx, protocol.MemoryAddRequest{MemoryOwner: owner, Content: "  "})
		wantKind(t, "empty", err, protocol.Invalid, "content is required")
		_, err = f.minds.Add(ctx, protocol.MemoryAddRequest{MemoryOwner: owner, Content: "<script>alert(1)</script>"})
		wantKind(t, "only a script", err, protocol.Invalid, "content is required")
		_, err = f.minds.Add(ctx, protocol.MemoryAddRequest{MemoryOwner: owner, Content: "x", Source: "rumour"})
		wantKind(t, "source", err, protocol.Invalid, `Invalid source "rumour". Valid values: user_stated, tool_verified, agent_inferred, import, system`)
		_, err = f.minds.Add(ctx, protocol.MemoryAddRequest{MemoryOwner: owner, Content: "x", Importance: "huge"})
		wantKind(t, "importance", err, protocol.Invalid, `Invalid importance "huge"`)
		_, err = f.minds.Add(ctx, protocol.MemoryAddRequest{MemoryOwner: protocol.MemoryOwner{Workspace: "../x"}, Content: "x"})
		wantKind(t, "workspace id", err, protocol.Invalid, "invalid workspace id")

		first, err := f.minds.Add(ctx, protocol.MemoryAddRequest{MemoryOwner: owner, Content: `See <a href="javascript:evil()" onclick="x()">this</a>`, Importance: "critical", Source: "import"})
		if err != nil || !first.Saved || first.Frame.Content != `See <a href="evil()">this</a>` ||
			first.Frame.Importance != "critical" || first.Frame.Source != "import" || first.Frame.Mind != "workspace" || first.Frame.Workspace != "w1" {
			t.Fatalf("first = %+v, %v", first, err)
		}
		again, err := f.minds.Add(ctx, protocol.MemoryAddRequest{MemoryOwner: owner, Content: first.Frame.Content})
		if err != nil || again.Saved || !again.Duplicate || again.Frame.ID != first.Frame.ID || again.Frame.AccessCount != 1 {
			t.Errorf("duplicate = %+v, %v", again, err)
		}
		// The same content in another mind is not a duplicate.
		other, err := f.minds.Add(ctx, protocol.MemoryAddRequest{MemoryOwner: protocol.MemoryOwner{}, Content: first.Frame.Content})
		if err != nil || !other.Saved || other.Frame.Mind != "personal" {
			t.Errorf("personal copy = %+v, %v", other, err)
		}
	})
}

func TestUpdateDeleteAccess(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		f := newFixture(t, e, false)
		owner := protocol.MemoryOwner{Workspace: "w1"}
		wsFrame := f.add(t, "w1", "workspace fact about pelicans")
		personal, err := f.minds.Add(ctx, protocol.MemoryAddRequest{Content: "personal fact about herons"})
		if err != nil {
			t.Fatal(err)
		}
		up, err := f.minds.Update(ctx, protocol.MemoryUpdateRequest{MemoryFrameRequest: protocol.MemoryFrameRequest{MemoryOwner: owner, ID: wsFrame.ID},
			Content: "workspace fact about cormorants", Importance: "important"})
		if err != nil || up.Content != "workspace fact about cormorants" || up.Importance != "important" || up.Updated == wsFrame.Updated || up.Created != wsFrame.Created {
			t.Errorf("update = %+v, %v", up, err)
		}
		if got := query(t, f.minds, "w1", "pelicans", 0); len(got) != 0 {
			t.Errorf("old content still found: %v", got)
		}
		if got := query(t, f.minds, "w1", "cormorants", 0); !slices.Equal(got, []string{wsFrame.ID}) {
			t.Errorf("new content = %v", got)
		}
		_, err = f.minds.Update(ctx, protocol.MemoryUpdateRequest{MemoryFrameRequest: protocol.MemoryFrameRequest{MemoryOwner: owner, ID: wsFrame.ID}, Content: ""})
		wantKind(t, "update empty", err, protocol.Invalid, "content is required")
		_, err = f.minds.Update(ctx, protocol.MemoryUpdateRequest{MemoryFrameRequest: protocol.MemoryFrameRequest{MemoryOwner: owner, ID: "mem-nope"}, Content: "x"})
		wantKind(t, "update missing", err, protocol.NotFound, "Frame not found")

		// A personal frame is found from a workspace request too.
		for want := 1; want <= 2; want++ {
			acc, err := f.minds.Access(ctx, protocol.MemoryFrameRequest{MemoryOwner: owner, ID: personal.Frame.ID})
			if err != nil || acc.AccessCount != want || acc.Mind != "personal" {
				t.Errorf("access %d = %+v, %v", want, acc, err)
			}
		}
		_, err = f.minds.Access(ctx, protocol.MemoryFrameRequest{MemoryOwner: owner, ID: "bad id"})
		wantKind(t, "bad id", err, protocol.Invalid, "Invalid frame ID")

		del, err := f.minds.Delete(ctx, protocol.MemoryFrameRequest{MemoryOwner: owner, ID: wsFrame.ID})
		if err != nil || del.ID != wsFrame.ID {
			t.Errorf("delete = %+v, %v", del, err)
		}
		_, err = f.minds.Delete(ctx, protocol.MemoryFrameRequest{MemoryOwner: owner, ID: wsFrame.ID})
		wantKind(t, "delete again", err, protocol.NotFound, "Frame not found")
		// Without the workspace, its frames are out of reach.
		w2 := f.add(t, "w2", "other workspace")
		_, err = f.minds.Delete(ctx, protocol.MemoryFrameRequest{MemoryOwner: owner, ID: w2.ID})
		wantKind(t, "other workspace", err, protocol.NotFound, "Frame not found")

		if err := f.minds.DropWorkspace(ctx, "w2"); err != nil {
			t.Fatal(err)
		}
		if fs, err := f.minds.Frames(ctx, protocol.MemoryFramesRequest{MemoryOwner: protocol.MemoryOwner{Workspace: "w2"}}); err != nil || len(fs) != 1 || fs[0].Mind != "personal" {
			t.Errorf("after drop = %+v, %v", fs, err)
		}
	})
}

func TestFramesListing(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		f := newFixture(t, e, false)
		p1, _ := f.minds.Add(ctx, protocol.MemoryAddRequest{Content: "p1"}) // 00:00:01
		w1 := f.add(t, "w1", "w1")                                          // 00:00:02
		f.add(t, "w2", "w2 elsewhere")                                      // 00:00:03
		w3 := f.add(t, "w1", "w3")                                          // 00:00:04
		fs, err := f.minds.Frames(ctx, protocol.MemoryFramesRequest{MemoryOwner: protocol.MemoryOwner{Workspace: "w1"}})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, fr := range fs {
			got = append(got, fr.ID+"/"+fr.Mind)
		}
		want := []string{w3.ID + "/workspace", w1.ID + "/workspace", p1.Frame.ID + "/personal"}
		if !slices.Equal(got, want) {
			t.Errorf("frames = %v, want %v", got, want)
		}
		fs, err = f.minds.Frames(ctx, protocol.MemoryFramesRequest{MemoryOwner: protocol.MemoryOwner{Workspace: "w1"},
			Since: "2026-01-01T00:00:02Z", Until: "2026-01-01T00:00:03.500Z"})
		if err != nil || len(fs) != 1 || fs[0].ID != w1.ID {
			t.Errorf("since/until = %+v, %v", fs, err)
		}
		_, err = f.minds.Frames(ctx, protocol.MemoryFramesRequest{Since: "yesterday"})
		wantKind(t, "bad since", err, protocol.Invalid, "Invalid since")
	})
}

func TestVectorsFindWhatKeywordsMiss(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		f := newFixture(t, e, true)
		ws := "w1"
		dog := f.add(t, ws, "Rex is a golden retriever puppy")
		f.add(t, ws, "The invoice run happens on the first Monday")
		f.add(t, ws, "Lunch is at noon")
		codename := f.add(t, ws, "Project falcon ships the billing module in March")
		// Closer to the query by vector, but without its keywords.
		bird := f.add(t, ws, "Peregrines are the fastest birds")
		waitEmbedded(t, f.minds, ws, 5)

		// No word in common with the frame: only the vector finds it.
		if got := query(t, f.minds, ws, "what kind of dog do I have", 3); len(got) == 0 || got[0] != dog.ID {
			t.Errorf("dog query = %v, want %s first", got, dog.ID)
		}
		// The bird frame is the closest by vector, the codename frame
		// second; its exact keywords put it first.
		if got := query(t, f.minds, ws, "when does project falcon ship", 3); !slices.Equal(got, []string{codename.ID, bird.ID}) {
			t.Errorf("codename query = %v, want [%s %s]", got, codename.ID, bird.ID)
		}
		// Unrelated queries find nothing through vectors.
		if got := query(t, f.minds, ws, "weather tomorrow", 3); len(got) != 0 {
			t.Errorf("unrelated = %v", got)
		}
		// A new importance keeps the vector; new content is embedded again.
		owner := protocol.MemoryFrameRequest{MemoryOwner: protocol.MemoryOwner{Workspace: ws}, ID: dog.ID}
		if _, err := f.minds.Update(ctx, protocol.MemoryUpdateRequest{MemoryFrameRequest: owner, Content: dog.Content, Importance: "critical"}); err != nil {
			t.Fatal(err)
		}
		waitEmbedded(t, f.minds, ws, 5)
		if got := query(t, f.minds, ws, "what kind of dog do I have", 1); !slices.Equal(got, []string{dog.ID}) {
			t.Errorf("after importance change = %v", got)
		}
		if _, err := f.minds.Update(ctx, protocol.MemoryUpdateRequest{MemoryFrameRequest: owner, Content: "Rex sends the monthly invoice"}); err != nil {
			t.Fatal(err)
		}
		waitEmbedded(t, f.minds, ws, 5)
		if got := query(t, f.minds, ws, "payment", 5); !slices.Contains(got, dog.ID) {
			t.Errorf("re-embedded content not found: %v", got)
		}
		if got := query(t, f.minds, ws, "what kind of dog do I have", 5); slices.Contains(got, dog.ID) {
			t.Errorf("old vector still found: %v", got)
		}
	})
}

func TestVectorsSurviveRestartAndAreNotReembedded(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		f := newFixture(t, e, true)
		dog := f.add(t, "w1", "Rex is a golden retriever puppy")
		f.add(t, "w1", "The invoice run happens on the first Monday")
		waitEmbedded(t, f.minds, "w1", 2)
		f.minds.Stop()
		before := len(f.llm.EmbeddingRequests())

		m := start(t, e.open(t), f.llm, f.dir, f.clk)
		waitEmbedded(t, m, "w1", 2)
		if got := query(t, m, "w1", "my canine", 1); !slices.Equal(got, []string{dog.ID}) {
			t.Errorf("after restart = %v", got)
		}
		// Only the query was embedded.
		reqs := f.llm.EmbeddingRequests()[before:]
		if len(reqs) != 1 || !slices.Equal(reqs[0].EmbeddingInputs(), []string{"my canine"}) {
			var ins [][]string
			for _, r := range reqs {
				ins = append(ins, r.EmbeddingInputs())
			}
			t.Errorf("embedding requests after restart = %v", ins)
		}
	})
}

func TestEmbeddingProviderDownThenBack(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		f := newFixture(t, e, true)
		f.llm.SetUnreachable(true)
		dog := f.add(t, "w1", "Rex is a golden retriever puppy")
		f.add(t, "w1", "Billing runs monthly")
		// Keyword search works alone while the provider is down.
		if got := query(t, f.minds, "w1", "retriever", 3); !slices.Equal(got, []string{dog.ID}) {
			t.Errorf("keyword while down = %v", got)
		}
		if got := query(t, f.minds, "w1", "my canine", 3); len(got) != 0 {
			t.Errorf("vector while down = %v", got)
		}
		f.llm.SetUnreachable(false)
		waitEmbedded(t, f.minds, "w1", 2)
		// One batch carried both frames.
		var batched bool
		for _, r := range f.llm.EmbeddingRequests() {
			batched = batched || len(r.EmbeddingInputs()) == 2
		}
		if !batched {
			t.Error("the pending frames were not embedded in one batch")
		}
		waitfor.Within(5*time.Second).NoError(t, "vector search after recovery", func() error {
			if got := query(t, f.minds, "w1", "my canine", 3); !slices.Equal(got, []string{dog.ID}) {
				return fmt.Errorf("vector after recovery = %v", got)
			}
			return nil
		})
	})
}

func TestModelChangeReembedsAndEmptyModelTurnsVectorsOff(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		f := newFixture(t, e, true)
		dog := f.add(t, "w1", "Rex is a golden retriever puppy")
		waitEmbedded(t, f.minds, "w1", 1)
		if st, _ := f.minds.Stats(ctx, protocol.MemoryStatsRequest{}); st.Model != frames.DefaultEmbeddingModel {
			t.Errorf("default model = %q", st.Model)
		}
		writeConfig(t, f.dir, `{"embeddingModel":"other-embedder"}`)
		waitModel(t, f.minds, "other-embedder")
		f.minds.Stop()
		m := start(t, e.open(t), f.llm, f.dir, f.clk)
		waitEmbedded(t, m, "w1", 1)
		var models []string
		for _, r := range f.llm.EmbeddingRequests() {
			models = append(models, fmt.Sprint(r.Body["model"]))
		}
		if !slices.Contains(models, "other-embedder") {
			t.Errorf("models asked = %v", models)
		}
		if got := query(t, m, "w1", "my canine", 1); !slices.Equal(got, []string{dog.ID}) {
			t.Errorf("after re-embedding = %v", got)
		}
		writeConfig(t, f.dir, `{"embeddingModel":""}`)
		waitModel(t, m, "")
		n := len(f.llm.EmbeddingRequests())
		if got := query(t, m, "w1", "my canine", 1); len(got) != 0 {
			t.Errorf("vectors off = %v", got)
		}
		if got := query(t, m, "w1", "puppy", 1); !slices.Equal(got, []string{dog.ID}) {
			t.Errorf("keywords with vectors off = %v", got)
		}
		if len(f.llm.EmbeddingRequests()) != n {
			t.Error("embeddings requested with vectors off")
		}
	})
}

func writeConfig(t *testing.T, dir, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func waitModel(t *testing.T, m *frames.Minds, want string) {
	t.Helper()
	waitfor.Within(5*time.Second).NoError(t, "embedding model "+want, func() error {
		if got := m.Model(); got != want {
			return fmt.Errorf("model = %q, want %q", got, want)
		}
		return nil
	})
}

func TestJSONLReadsEarlierMemories(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "workspaces", "w1", frames.File)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	old := `{"id":"mem-1","content":"The deploy window is Friday","tags":["ops"],"timestamp":"2025-05-01T10:00:00.000Z"}` + "\n" +
		`{"id":"mem-2","content":"torn`
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	m := start(t, frames.NewJSONL(dir), nil, dir, &clock{t: time.Now()})
	fs, err := m.Frames(ctx, protocol.MemoryFramesRequest{MemoryOwner: protocol.MemoryOwner{Workspace: "w1"}})
	if err != nil || len(fs) != 1 {
		t.Fatalf("frames = %+v, %v", fs, err)
	}
	got := fs[0]
	if got.ID != "mem-1" || got.Importance != "normal" || got.Source != "user_stated" || got.Created != "2025-05-01T10:00:00.000Z" || !slices.Equal(got.Tags, []string{"ops"}) {
		t.Errorf("old memory = %+v", got)
	}
	// A write after the torn line starts on a line of its own.
	if _, err := m.Add(ctx, protocol.MemoryAddRequest{MemoryOwner: protocol.MemoryOwner{Workspace: "w1"}, Content: "new"}); err != nil {
		t.Fatal(err)
	}
	m2 := start(t, frames.NewJSONL(dir), nil, dir, &clock{t: time.Now()})
	if fs, _ := m2.Frames(ctx, protocol.MemoryFramesRequest{MemoryOwner: protocol.MemoryOwner{Workspace: "w1"}}); len(fs) != 2 {
		t.Errorf("after torn line = %+v", fs)
	}
}

func TestSanitise(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain **markdown** text", "plain **markdown** text"},
		{"a<script>alert(1)</script>b", "ab"},
		{"a<SCRIPT src=x>x</ScRiPt>b<script>y</script>c", "abc"},
		{"unclosed <script>x", "unclosed <script>x"},
		{`<img src=x onerror="alert(1)">`, `<img src=x>`},
		{`<a href='javascript:alert(1)'>x</a>`, `<a href="alert(1)'>x</a>`},
		{`<a href="https://ok.example">ok</a>`, `<a href="https://ok.example">ok</a>`},
		{`<iframe src="https://x"></iframe>text<button>`, `text`},
		{`<img src="data:image/png;base64,xx">`, `<img src="image/png;base64,xx">`},
	} {
		if got := frames.Sanitise(c.in); got != c.want {
			t.Errorf("Sanitise(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestJSONLCompactsAMostlySupersededLog(t *testing.T) {
	dir := t.TempDir()
	llm := llmtest.New(llmtest.WithEmbeddings(concepts))
	llm.Start()
	t.Cleanup(llm.Close)
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := start(t, frames.NewJSONL(dir), llm, dir, clk)
	rep, err := m.Add(ctx, protocol.MemoryAddRequest{MemoryOwner: protocol.MemoryOwner{Workspace: "w1"}, Content: "Rex is a golden retriever puppy"})
	if err != nil {
		t.Fatal(err)
	}
	waitEmbedded(t, m, "w1", 1)
	for range 100 {
		if _, err := m.Access(ctx, protocol.MemoryFrameRequest{MemoryOwner: protocol.MemoryOwner{Workspace: "w1"}, ID: rep.Frame.ID}); err != nil {
			t.Fatal(err)
		}
	}
	m.Stop()
	path := filepath.Join(dir, "workspaces", "w1", frames.File)
	lines := func() int {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), "\n")
	}
	if n := lines(); n != 102 {
		t.Fatalf("log has %d lines, want 102", n)
	}
	before := len(llm.EmbeddingRequests())
	m2 := start(t, frames.NewJSONL(dir), llm, dir, clk)
	fs, err := m2.Frames(ctx, protocol.MemoryFramesRequest{MemoryOwner: protocol.MemoryOwner{Workspace: "w1"}})
	if err != nil || len(fs) != 1 || fs[0].AccessCount != 100 {
		t.Fatalf("after compaction %+v, %v", fs, err)
	}
	if n := lines(); n != 1 {
		t.Errorf("compacted log has %d lines", n)
	}
	// The vector was kept: found by meaning, nothing embedded but the query.
	if got := query(t, m2, "w1", "my canine", 1); !slices.Equal(got, []string{rep.Frame.ID}) {
		t.Errorf("after compaction = %v", got)
	}
	if n := len(llm.EmbeddingRequests()) - before; n != 1 {
		t.Errorf("%d embedding requests after compaction, want 1 (the query)", n)
	}
}

// A save whose caller's deadline has passed (the bus gives the handler
// the caller's deadline) is not stored: the caller was told it failed.
func TestAddAfterTheCallersDeadlineStoresNothing(t *testing.T) {
	dir := t.TempDir()
	m := start(t, frames.NewJSONL(dir), nil, dir, &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	late, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	owner := protocol.MemoryOwner{Workspace: "w1"}
	if _, err := m.Add(late, protocol.MemoryAddRequest{MemoryOwner: owner, Content: "too late"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Add after the deadline: %v", err)
	}
	got, err := m.Frames(ctx, protocol.MemoryFramesRequest{MemoryOwner: owner})
	if err != nil || len(got) != 0 {
		t.Fatalf("frames after a late save: %v, %v", got, err)
	}
}
