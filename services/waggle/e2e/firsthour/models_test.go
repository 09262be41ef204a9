package firsthour

import (
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestOllamaWithNoModelConfigured: the README's Ollama line and nothing
// else. Ollama serves no claude-sonnet-4-6; with no model configured the
// server uses the first model Ollama lists, says so at start, and /health
// names it — the first chat gets a real reply, not "Something went wrong".
func TestOllamaWithNoModelConfigured(t *testing.T) {
	llm := llmtest.New(llmtest.WithModels("llama3.2:1b", "qwen2.5:0.5b"), llmtest.WithResponses(llmtest.Reply("Hello ", "from llama")))
	llm.Start()
	defer llm.Close()
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL()))

	if h := getHealth(t, p); h.DefaultModel != "llama3.2:1b" || h.LLM.Health != "healthy" {
		t.Fatalf("/health: %+v, want defaultModel llama3.2:1b and a healthy model server", h)
	}
	evs := chat(t, p, "hello")
	if last := evs[len(evs)-1]; last.Name != "done" {
		t.Fatalf("turn ended with %s %s, want done", last.Name, last.Data)
	}
	reqs := llm.ChatRequests()
	if len(reqs) != 1 || reqs[0].Chat.Model != "llama3.2:1b" {
		t.Fatalf("model server asked for %d chats, first model %q; want llama3.2:1b", len(reqs), reqs[0].Chat.Model)
	}
	out := p.Output()
	for _, want := range []string{"the model server answered", llm.URL(), "using its first model", "llama3.2:1b"} {
		if !strings.Contains(out, want) {
			t.Errorf("start-up log lacks %q:\n%s", want, out)
		}
	}
}

// TestConfiguredModelTheServerDoesNotServe: WAGGLE_MODEL names a model the
// server does not list. The log warns naming it, /health reports the model
// server degraded naming it, and a turn the server answers "not found"
// ends with a sentence naming the model and how to choose another.
func TestConfiguredModelTheServerDoesNotServe(t *testing.T) {
	llm := llmtest.New(llmtest.WithModels("llama3.2:1b"),
		llmtest.WithDefault(llmtest.ErrorStatus(404, `model "claude-sonnet-4-6" not found, try pulling it first`)))
	llm.Start()
	defer llm.Close()
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL(), "WAGGLE_MODEL=claude-sonnet-4-6"))

	h := getHealth(t, p)
	if h.DefaultModel != "claude-sonnet-4-6" || h.LLM.Health != "degraded" || !strings.Contains(h.LLM.Detail, `"claude-sonnet-4-6"`) {
		t.Fatalf("/health: %+v, want the model server degraded, naming claude-sonnet-4-6", h)
	}
	if out := p.Output(); !strings.Contains(out, "the configured model is not served by the model server") || !strings.Contains(out, "claude-sonnet-4-6") {
		t.Errorf("start-up log does not warn about the model:\n%s", out)
	}
	evs := chat(t, p, "hello")
	last := evs[len(evs)-1]
	want := `{"message":"The model \"claude-sonnet-4-6\" is not available on the model server. Choose one it serves with --model (WAGGLE_MODEL) or \"defaultModel\" in config.json."}`
	if last.Name != "error" || string(last.Data) != want {
		t.Fatalf("turn ended with %s %s, want error %s", last.Name, last.Data, want)
	}
}
