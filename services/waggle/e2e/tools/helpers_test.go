package tools

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// callerModel is a scripted model that, for a user message containing
// "CALL <tool> <json args>", calls that tool once and then answers
// "tool said: <result>".
func callerModel(t *testing.T) *llmtest.Server {
	t.Helper()
	s := llmtest.New(llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		msgs := r.Chat.Messages
		if len(msgs) == 0 {
			return llmtest.Reply("no messages")
		}
		last := msgs[len(msgs)-1]
		if last.Role == "tool" {
			return llmtest.Reply("tool said: " + last.Content)
		}
		_, rest, ok := strings.Cut(last.Content, "CALL ")
		if !ok {
			return llmtest.Reply("nothing to do")
		}
		tool, args, _ := strings.Cut(strings.TrimSpace(rest), " ")
		return llmtest.Response{Steps: llmtest.ToolCall(0, "call_1", tool, args, 2)}
	}))
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// callChat is a chat body in workspace ws whose model calls tool with args.
func callChat(ws, tool string, args any) map[string]any {
	b, _ := json.Marshal(args)
	return map[string]any{"message": "please CALL " + tool + " " + string(b), "workspace": ws}
}

// toolResults are the tool results the model was sent, in order.
func toolResults(llm *llmtest.Server) []string {
	var out []string
	for _, r := range llm.ChatRequests() {
		msgs := r.Chat.Messages
		if n := len(msgs); n > 0 && msgs[n-1].Role == "tool" {
			out = append(out, msgs[n-1].Content)
		}
	}
	return out
}

// offeredTools are the tool names of the model's last request.
func offeredTools(llm *llmtest.Server) []string {
	reqs := llm.ChatRequests()
	if len(reqs) == 0 {
		return nil
	}
	var out []string
	for _, tl := range reqs[len(reqs)-1].Chat.Tools {
		out = append(out, tl.Function.Name)
	}
	return out
}

// until reads a chat stream until the first event named one of names
// (returned last) and fails if the stream ends first.
func until(t *testing.T, st *waggletest.Stream, names ...string) []waggletest.Event {
	t.Helper()
	var out []waggletest.Event
	for {
		ev, err := st.Next()
		if err != nil {
			t.Fatalf("stream ended before %v (%v); events: %v", names, err, waggletest.Names(out))
		}
		out = append(out, ev)
		for _, n := range names {
			if ev.Name == n {
				return out
			}
		}
	}
}

// steps is the text of a stream's step events.
func steps(evs []waggletest.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Name == protocol.EventStep {
			out = append(out, ev.Content())
		}
	}
	return out
}

// runChat sends a chat whose model calls tool with args, reads it to its
// end (which must be done, with no approval asked) and returns the events.
func runChat(t *testing.T, p *waggletest.Proc, ws, tool string, args any) []waggletest.Event {
	t.Helper()
	evs := waggletest.NewStream(p.Do(t, "POST", "/api/chat", callChat(ws, tool, args))).All(t)
	for _, ev := range evs {
		if ev.Name == protocol.EventApprovalRequired {
			t.Fatalf("%s asked for an approval: %s", tool, ev.Data)
		}
	}
	if end := evs[len(evs)-1]; end.Name != protocol.EventDone {
		t.Fatalf("%s: turn ended with %s: %s", tool, end.Name, end.Data)
	}
	return evs
}

// approval is an approval_required event's data.
type approval struct {
	RequestID string          `json:"requestId"`
	ToolName  string          `json:"toolName"`
	Input     json.RawMessage `json:"input"`
}
