// Package agentrun tests POST /api/agent/run black-box: a real app, a
// scripted model, real SSE bytes.
package agentrun

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

func TestAgentRunStreamsRetrievalRun(t *testing.T) {
	llm := llmtest.New(llmtest.WithResponses(
		llmtest.Response{Steps: llmtest.Steps(llmtest.ToolCall(0, "call_1", "retrieve", `{"query":"hive temperature"}`, 3), llmtest.WithUsage(50, 10))},
		llmtest.Response{Steps: llmtest.Steps(llmtest.Content("<think>check</think>"), llmtest.Content("Bees keep the hive at 35°C."), llmtest.WithUsage(80, 20))},
	))
	llm.Start()
	defer llm.Close()
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()))

	resp := srv.Do(http.MethodPost, "/api/agent/run", map[string]any{"question": "How warm is a hive?", "shape": "no-such-shape"})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	evs := waggletest.NewStream(resp).All(t)
	names := waggletest.Names(evs)
	if names[0] != "started" || names[len(names)-1] != "done" || names[len(names)-2] != "finalized" {
		t.Fatalf("events %v", names)
	}
	var started map[string]any
	evs[0].Decode(t, &started)
	if started["shape"] != "(model-default)" || started["shapeRequested"] != "no-such-shape" || started["shapeRecognized"] != false || started["model"] != "claude-sonnet-4-6" {
		t.Errorf("started = %v", started)
	}
	var fin map[string]any
	evs[len(evs)-2].Decode(t, &fin)
	if fin["normalizedResponse"] != "Bees keep the hive at 35°C." || fin["retrievalCalls"] != float64(1) || fin["loopExhausted"] != false {
		t.Errorf("finalized = %v", fin)
	}
	if string(evs[len(evs)-1].Data) != `{"ok":true}` {
		t.Errorf("done = %s", evs[len(evs)-1].Data)
	}
	// The model got the retrieval result back as a tool message.
	reqs := llm.ChatRequests()
	if len(reqs) != 2 {
		t.Fatalf("model requests = %d", len(reqs))
	}
	raw := reqs[1].RawBody
	if !strings.Contains(string(raw), `"role":"tool"`) {
		t.Errorf("second request has no tool message: %s", raw)
	}
}

func TestAgentRunRejections(t *testing.T) {
	srv := waggletest.Start(t) // no model reachable
	var out map[string]any
	if st := srv.JSON(http.MethodPost, "/api/agent/run", map[string]any{"question": 7}, &out); st != 400 || out["error"] != "question is required" {
		t.Errorf("non-string question: %d %v", st, out)
	}
	if st := srv.JSON(http.MethodPost, "/api/agent/run", "", &out); st != 400 || out["error"] != "question is required" {
		t.Errorf("empty body: %d %v", st, out)
	}
	if st := srv.JSON(http.MethodPost, "/api/agent/run", map[string]any{"question": "q"}, &out); st != 503 || out["error"] != "multi-mind or embedding provider not initialized" {
		t.Errorf("no model: %d %v", st, out)
	}
}
