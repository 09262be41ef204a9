package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/chatstream"
)

// Checkpointer makes a turn's progress durable before it has side effects,
// so that another runner can resume the turn after a crash without running
// any tool twice. An error stops the turn: going on would give up that
// guarantee.
type Checkpointer interface {
	// Step is called after a model step that asked for tools, before any
	// of them runs.
	Step(ctx context.Context, cp protocol.StepCheckpoint) error
	// Executing is called right before a tool call may take effect (after
	// the gate allowed it).
	Executing(ctx context.Context, cp protocol.ExecCheckpoint) error
}

// Resume is the durable progress of a turn another runner started and did
// not finish. Run continues from it: the text already streamed stays the
// start of the reply, finished tool calls are given to the model with
// their results, a call that began executing without a result is reported
// to the model as interrupted (never run again), a call that never began
// runs now, and the loop goes on.
type Resume struct {
	// Content is every token the client already received for this turn.
	Content string
	// Steps are the turn's checkpointed model steps, in order.
	Steps []protocol.StepCheckpoint
	// Executing are the turn's exec checkpoints.
	Executing []protocol.ExecCheckpoint
	// Results are the turn's finished or denied tool calls (the session
	// store's tool events), in the order they were stored.
	Results []protocol.ToolEvent
}

// Texts of a resumed turn.
const (
	// continueNote follows the part of a reply cut by the crash, so the
	// model picks up where the text stopped.
	continueNote = "[The reply above was cut off. Continue it exactly where it stopped, without repeating anything.]"
)

// InterruptedToolText is what the model (and the client's tool_result) gets
// for a call whose runner stopped while it ran: it may or may not have
// taken effect, and it is not run again.
func InterruptedToolText(name string) string {
	return "Error: " + name + " was interrupted: the server running it stopped before it reported a result. It may or may not have taken effect; check before running it again."
}

// resume seeds the run from req.Resume and returns the transcript
// messages that follow the user's message. Calls of the last step that
// never began are run now (through the gate, with their events).
func (r *run) resume(ctx context.Context) ([]openai.ChatCompletionMessage, error) {
	rs := r.req.Resume
	r.content.WriteString(rs.Content)
	results := map[string][]protocol.ToolEvent{}
	for _, ev := range rs.Results {
		if ev.Name == AutoRecallTool || ev.Parent != "" {
			// A sub-agent's calls answer its own model, and their ids
			// may repeat the turn's.
			continue
		}
		results[ev.CallID] = append(results[ev.CallID], ev)
	}
	began := map[protocol.ExecCheckpoint]bool{}
	for _, e := range rs.Executing {
		began[e] = true
	}
	var out []openai.ChatCompletionMessage
	covered := 0
	for _, st := range rs.Steps {
		r.steps = st.Step
		if st.Model != "" {
			r.model = st.Model
		}
		r.res.Usage = Usage{InputTokens: st.InputTokens, OutputTokens: st.OutputTokens}
		covered += len(st.Content)
		assistant := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: st.Content}
		for _, c := range st.Calls {
			assistant.ToolCalls = append(assistant.ToolCalls, openai.ToolCall{
				ID: c.ID, Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: c.Name, Arguments: argsOrEmpty(c.Args)},
			})
		}
		out = append(out, assistant)
		for _, c := range st.Calls {
			var result string
			switch q := results[c.ID]; {
			case len(q) > 0:
				ev := q[0]
				results[c.ID] = q[1:]
				result = ev.Result
				r.res.ToolsUsed = append(r.res.ToolsUsed, c.Name)
				r.res.Tools = append(r.res.Tools, ev)
				r.repeats[c.Name+"\x00"+compactJSON(c.Args)]++
			case began[protocol.ExecCheckpoint{Step: st.Step, CallID: c.ID}]:
				result = r.interrupted(c)
			default:
				var err error
				result, err = r.execute(ctx, &chatstream.ToolCall{ID: c.ID, Name: c.Name, Args: []byte(c.Args)})
				if err != nil {
					return nil, err
				}
			}
			out = append(out, toolMessage(c.ID, result))
		}
	}
	if covered <= len(rs.Content) && strings.HasPrefix(rs.Content, contentOfSteps(rs.Steps)) {
		if tail := rs.Content[covered:]; tail != "" {
			out = append(out,
				openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: tail},
				openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: continueNote})
		}
	}
	return out, nil
}

// interrupted records a call that began but never reported: the client's
// tool spinner gets its tool_result and the session keeps the event.
func (r *run) interrupted(c protocol.CheckpointCall) string {
	text := InterruptedToolText(c.Name)
	ev := protocol.ToolEvent{
		TurnID: r.req.TurnID, CallID: c.ID, Name: c.Name, Input: json.RawMessage(compactJSON(c.Args)),
		Result: text, IsError: true, Status: "error",
	}
	r.res.ToolsUsed = append(r.res.ToolsUsed, c.Name)
	r.record(ev)
	r.emit(protocol.EventToolResult, ToolResultData{Name: c.Name, Result: text, IsError: true})
	return text
}

func contentOfSteps(steps []protocol.StepCheckpoint) string {
	var b strings.Builder
	for _, s := range steps {
		b.WriteString(s.Content)
	}
	return b.String()
}

func argsOrEmpty(args string) string {
	if strings.TrimSpace(args) == "" {
		return "{}"
	}
	return args
}

// compactJSON is args in the compact form execute keys loop detection by
// (args itself when it is not JSON).
func compactJSON(args string) string {
	raw := bytes.TrimSpace([]byte(args))
	if len(raw) == 0 {
		return "{}"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}
