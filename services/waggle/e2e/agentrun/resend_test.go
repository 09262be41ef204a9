package agentrun

import (
	"net/http"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestResentAgentRunStartRunsOnce: the gateway sends a run's start again
// when no answer comes (lost with a dying cluster node). A copy that
// reaches a runner while the run is under way, or after it ended, is
// refused with TURN_EXISTS: the question is put to the model once, and
// the client's stream ends once.
func TestResentAgentRunStartRunsOnce(t *testing.T) {
	hold := llmtest.NewPause()
	defer hold.Release()
	llm := llmtest.New(llmtest.WithResponses(
		llmtest.Response{Steps: llmtest.Steps(llmtest.Wait(hold), llmtest.Content("Bees keep the hive at 35°C."))},
	))
	llm.Start()
	defer llm.Close()
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()), waggletest.WithConfig(func(c *app.Config) { c.NATSListen = waggletest.FreeAddr(t) }))
	nc := srv.DialNATS()

	resp := srv.Do(http.MethodPost, "/api/agent/run", map[string]any{"question": "How warm is a hive?"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("run: status %d", resp.StatusCode)
	}
	st := waggletest.NewStream(resp)
	turnID := resp.Header.Get("X-Waggle-Turn-Id")
	<-hold.Reached()

	req := protocol.AgentRunRequest{TurnID: turnID, Question: "How warm is a hive?"}
	refused := func(when string) {
		t.Helper()
		_, err := waggletest.Resend(t, nc, protocol.StartAgentRun, req)
		if e := protocol.AsError(err); e == nil || e.Code != protocol.ErrTurnExists.Code {
			t.Fatalf("a copy of the run's start %s answered %v, want %s", when, err, protocol.ErrTurnExists.Code)
		}
	}
	refused("while the run waits for the model")
	hold.Release()
	evs := st.All(t)
	if names := waggletest.Names(evs); len(names) == 0 || names[len(names)-1] != "done" {
		t.Fatalf("the run's events: %v", names)
	}
	refused("after the run ended")
	if n := len(llm.ChatRequests()); n != 1 {
		t.Errorf("the model was asked %d times, want once", n)
	}
}
