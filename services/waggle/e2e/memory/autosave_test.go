package memory

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

func chatBody(ws, message string) obj {
	return obj{"message": message, "workspace": ws, "session": "s1"}
}

func steps(evs []waggletest.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Name == "step" {
			out = append(out, e.Content())
		}
	}
	return out
}

func names(evs []waggletest.Event) []string { return waggletest.Names(evs) }

// blockingEmbeddings embeds like concepts but holds every request that
// carries a text starting with prefix until release is closed.
func blockingEmbeddings(prefix string, release <-chan struct{}) llmtest.EmbedFunc {
	return func(model, input string) []float32 {
		if strings.HasPrefix(input, prefix) {
			<-release
		}
		return concepts(model, input)
	}
}

func TestAutoSaveKeepsAPreferenceOffTheTurnsPath(t *testing.T) {
	release := make(chan struct{})
	llm := llmtest.New(llmtest.WithEmbeddings(blockingEmbeddings("User preference:", release)),
		llmtest.WithDefault(llmtest.Reply("Noted, ", "tea it is.")))
	llm.Start()
	t.Cleanup(llm.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()))

	// The frame's embedding is held, yet the turn completes: embedding is
	// not on the turn's path.
	evs := srv.Chat(chatBody("w1", "I prefer green tea over coffee in the mornings")).All(t)
	got := names(evs)
	if got[len(got)-1] != "done" {
		t.Fatalf("events %v", got)
	}
	st := steps(evs)
	if !slices.Contains(st, "Auto-saved 1 memory from this exchange.") {
		t.Fatalf("steps %q", st)
	}
	// The step comes before done.
	if i := slices.Index(got, "done"); i < 1 || !slices.Contains(got[:i], "step") {
		t.Errorf("events %v", got)
	}
	var frames struct {
		Results []obj `json:"results"`
	}
	srv.JSON("GET", "/api/memory/frames?workspace=w1", nil, &frames)
	if len(frames.Results) != 1 || frames.Results[0]["content"] != "User preference: I prefer green tea over coffee in the mornings" ||
		frames.Results[0]["mind"] != "personal" || frames.Results[0]["source"] != "agent_inferred" {
		t.Fatalf("frames %v", frames.Results)
	}
	close(release)
	waitEmbedded(t, srv, "w1", 1)

	// The same exchange again saves nothing new and says nothing.
	evs = srv.Chat(chatBody("w1", "I prefer green tea over coffee in the mornings")).All(t)
	if st := steps(evs); slices.ContainsFunc(st, func(s string) bool { return strings.HasPrefix(s, "Auto-saved") }) {
		t.Errorf("second turn steps %q", st)
	}
	// The next turn recalls it by meaning: the query shares no word.
	evs = srv.Chat(chatBody("w2", "What should I drink at breakfast?")).All(t)
	if st := steps(evs); !slices.Contains(st, "Recalled 1 relevant memory.") {
		t.Errorf("recall steps %q", st)
	}
	reqs := llm.ChatRequests()
	if sys := reqs[len(reqs)-1].Chat.Messages[0].Content; !strings.Contains(sys, "User preference: I prefer green tea") {
		t.Errorf("system prompt lacks the recalled preference: %q", sys)
	}
}

func TestAutoSaveSwitchedOffPerWorkspace(t *testing.T) {
	llm := llmtest.New(llmtest.WithDefault(llmtest.Reply("Understood.")))
	llm.Start()
	t.Cleanup(llm.Close)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"autoSaveWorkspaces":{"quiet":false}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()), waggletest.WithDataDir(dir))
	evs := srv.Chat(chatBody("quiet", "We decided to ship the beta on Friday")).All(t)
	if st := steps(evs); slices.ContainsFunc(st, func(s string) bool { return strings.HasPrefix(s, "Auto-saved") }) {
		t.Errorf("switched off, yet steps %q", st)
	}
	var frames struct {
		Count int `json:"count"`
	}
	if srv.JSON("GET", "/api/memory/frames?workspace=quiet", nil, &frames); frames.Count != 0 {
		t.Errorf("switched off, yet %d frames", frames.Count)
	}
	// Other workspaces keep it.
	evs = srv.Chat(chatBody("loud", "We decided to ship the beta on Friday")).All(t)
	if st := steps(evs); !slices.Contains(st, "Auto-saved 1 memory from this exchange.") {
		t.Errorf("loud steps %q", st)
	}
	if srv.JSON("GET", "/api/memory/frames?workspace=loud", nil, &frames); frames.Count != 1 {
		t.Errorf("loud frames %d", frames.Count)
	}
	// save_memory in the turn: no auto-save.
	llm.Enqueue(llmtest.Response{Steps: llmtest.ToolCall(0, "c1", "save_memory", `{"content":"Beta ships Friday"}`, 1)}, llmtest.Reply("Saved."))
	evs = srv.Chat(chatBody("loud", "We decided to ship the release candidate on Monday")).All(t)
	if st := steps(evs); slices.ContainsFunc(st, func(s string) bool { return strings.HasPrefix(s, "Auto-saved") }) {
		t.Errorf("save_memory turn steps %q", st)
	}
}
