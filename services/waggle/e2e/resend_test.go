package e2e

import (
	"net/http"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestResentStartOfAFinishedTurn: a turn's start reaches a runner again
// after the turn finished — the gateway sent it again because the first
// answer was lost with a dying cluster node, while the first delivery ran
// the turn to its end and its lease went with it. The runner refuses the
// copy with TURN_EXISTS (what the gateway expects of a resend): the model
// is not asked again, the history keeps one question and one answer, and
// the turn's stream gains no event.
func TestResentStartOfAFinishedTurn(t *testing.T) {
	const question = "answer me once"
	var runs atomic.Int32
	llm := llmtest.New(llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		if r.Chat.Stream && lastUserText(r) == question {
			if runs.Add(1) > 1 {
				return llmtest.Reply("a second answer")
			}
		}
		return llmtest.Reply("the answer")
	}))
	llm.Start()
	defer llm.Close()
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()), waggletest.WithConfig(func(c *appConfig) { c.NATSListen = waggletest.FreeAddr(t) }))
	nc := srv.DialNATS()

	st := srv.Chat(map[string]any{"message": question, "session": "resent"})
	turnID := st.Resp.Header.Get("X-Waggle-Turn-Id")
	live := st.All(t)
	if n := len(live); n == 0 || live[n-1].Name != "done" || waggletest.Text(live) != "the answer" {
		t.Fatalf("the turn: %v %q", waggletest.Names(live), waggletest.Text(live))
	}

	req := protocol.TurnRequest{TurnID: turnID, Workspace: "default", Session: "resent", Message: question}
	_, err := waggletest.Resend(t, nc, protocol.StartTurn, req)
	if e := protocol.AsError(err); e == nil || e.Code != protocol.ErrTurnExists.Code || e.Kind != protocol.Conflict {
		t.Fatalf("the resent start of a finished turn answered %v, want %s", err, protocol.ErrTurnExists.Code)
	}

	if n := runs.Load(); n != 1 {
		t.Errorf("the model answered the question %d times", n)
	}
	var hist struct {
		Messages []struct{ Role, Content string }
	}
	if st := srv.JSON(http.MethodGet, "/api/history?workspace=default&session=resent", nil, &hist); st != http.StatusOK {
		t.Fatalf("history: %d", st)
	}
	if len(hist.Messages) != 2 || hist.Messages[0].Content != question || hist.Messages[1].Content != "the answer" {
		t.Errorf("history after the resend: %+v", hist.Messages)
	}
	replay := followTurn(t, srv, turnID, "").All(t)
	if !slices.EqualFunc(waggletest.Coalesced(live), waggletest.Coalesced(replay), func(a, b waggletest.Event) bool {
		return a.ID == b.ID && a.Name == b.Name && string(a.Data) == string(b.Data)
	}) {
		t.Errorf("the turn's events changed after the resend:\nbefore %v\nafter  %v", waggletest.Names(live), waggletest.Names(replay))
	}
}

// lastUserText is the last user message of a model request.
func lastUserText(r *llmtest.Request) string {
	for i := len(r.Chat.Messages) - 1; i >= 0; i-- {
		if m := r.Chat.Messages[i]; m.Role == "user" {
			return m.Content
		}
	}
	return ""
}
