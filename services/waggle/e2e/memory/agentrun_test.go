package memory

import (
	"net/http"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestRetrievalAgentFindsByMeaning: the retrieval agent of /api/agent/run
// searches the minds with the hybrid search, so a query that shares no
// word with a frame still retrieves it.
func TestRetrievalAgentFindsByMeaning(t *testing.T) {
	llm := llmtest.New(llmtest.WithEmbeddings(concepts), llmtest.WithResponses(
		llmtest.Response{Steps: llmtest.Steps(llmtest.ToolCall(0, "call_1", "retrieve", `{"query":"which breed is my dog"}`, 2))},
		llmtest.Reply("A golden retriever."),
	))
	llm.Start()
	t.Cleanup(llm.Close)
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()))
	if st, body := post(t, srv, obj{"content": "Rex is a golden retriever puppy"}); st != 200 || body["saved"] != true {
		t.Fatalf("save: %d %v", st, body)
	}
	waitEmbedded(t, srv, "", 1)

	resp := srv.Do(http.MethodPost, "/api/agent/run", obj{"question": "What breed is my pet?"})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	names := waggletest.Names(waggletest.NewStream(resp).All(t))
	if names[len(names)-1] != "done" {
		t.Fatalf("events %v", names)
	}
	reqs := llm.ChatRequests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].RawBody), "Rex is a golden retriever puppy") {
		t.Fatalf("the retrieval result lacks the frame: %d requests", len(reqs))
	}
}
