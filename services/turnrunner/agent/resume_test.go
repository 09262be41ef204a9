package agent

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/protocol"
)

// checkpoints records what the loop makes durable, in order.
type checkpoints struct {
	mu    sync.Mutex
	log   []string
	steps []protocol.StepCheckpoint
	execs []protocol.ExecCheckpoint
	fail  error
}

func (c *checkpoints) Step(_ context.Context, cp protocol.StepCheckpoint) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.steps = append(c.steps, cp)
	c.log = append(c.log, "step")
	return c.fail
}

func (c *checkpoints) Executing(_ context.Context, cp protocol.ExecCheckpoint) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.execs = append(c.execs, cp)
	c.log = append(c.log, "exec "+cp.CallID)
	return c.fail
}

// countingTool counts its runs.
func countingTool(name string, runs *int, mu *sync.Mutex, log *[]string) funcTool {
	return funcTool{name, func(_ context.Context, in json.RawMessage) (string, error) {
		mu.Lock()
		*runs++
		*log = append(*log, "run "+name)
		mu.Unlock()
		return name + " done", nil
	}}
}

// TestCheckpointsPrecedeEffects: every step with tool calls is checkpointed
// before its first tool runs, and every call right before it runs; results
// are handed to OnToolEvent before their tool_result is emitted.
func TestCheckpointsPrecedeEffects(t *testing.T) {
	s := server(t,
		llmtest.Response{Steps: llmtest.Steps(llmtest.Content("Let me. "), llmtest.ToolCall(0, "c1", "append", `{"n":1}`, 1), llmtest.ToolCall(1, "c2", "append", `{"n":2}`, 1))},
		toolStep("c3", "append", `{"n":3}`),
		llmtest.Reply("Done."),
	)
	cp := &checkpoints{}
	var mu sync.Mutex
	var runs int
	tool := countingTool("append", &runs, &mu, &cp.log)
	rec := newRecorder()
	var recorded []string
	res, err := newAgent(t, s.URL()).Run(context.Background(), Request{
		TurnID: "t", Model: sonnet(), Message: "go", Sink: rec, Tools: []Tool{tool}, Checkpoint: cp,
		OnToolEvent: func(ev protocol.ToolEvent) {
			// The client has the results of the earlier calls, not this one.
			if n := len(rec.named(protocol.EventToolResult)); n != len(recorded) {
				t.Errorf("recording %s: %d tool_result events already out, want %d", ev.CallID, n, len(recorded))
			}
			recorded = append(recorded, ev.CallID)
		},
	})
	if err != nil || res.Content != "Let me. Done." {
		t.Fatalf("run: %q %v", res.Content, err)
	}
	equal(t, "order", cp.log, []string{"step", "exec c1", "run append", "exec c2", "run append", "step", "exec c3", "run append"})
	if len(cp.steps) != 2 || cp.steps[0].Step != 1 || cp.steps[0].Content != "Let me. " || len(cp.steps[0].Calls) != 2 ||
		cp.steps[0].Calls[1] != (protocol.CheckpointCall{ID: "c2", Name: "append", Args: `{"n":2}`}) || cp.steps[1].Step != 2 {
		t.Errorf("step checkpoints %+v", cp.steps)
	}
	if cp.execs[2] != (protocol.ExecCheckpoint{Step: 2, CallID: "c3"}) {
		t.Errorf("exec checkpoints %+v", cp.execs)
	}
	equal(t, "recorded", recorded, []string{"c1", "c2", "c3"})
}

// TestCheckpointFailureRunsNothing: a step that cannot be made durable
// runs none of its tools.
func TestCheckpointFailureRunsNothing(t *testing.T) {
	s := server(t, toolStep("c1", "append", `{}`))
	cp := &checkpoints{fail: errors.New("stream down")}
	var mu sync.Mutex
	var runs int
	_, err := newAgent(t, s.URL()).Run(context.Background(), Request{
		Model: sonnet(), Message: "go", Sink: newRecorder(), Tools: []Tool{countingTool("append", &runs, &mu, new([]string))}, Checkpoint: cp,
	})
	if err == nil || runs != 0 {
		t.Fatalf("err %v, runs %d", err, runs)
	}
}

// TestResume: a resumed turn keeps the streamed text, gives the model the
// finished calls with their results, reports a call that began without a
// result as interrupted (never running it), runs a call that never began,
// and continues the cut-off reply.
func TestResume(t *testing.T) {
	s := server(t,
		llmtest.Reply("and the rest."),
	)
	var mu sync.Mutex
	var runs int
	var log []string
	rec := newRecorder()
	var recorded []protocol.ToolEvent
	res, err := newAgent(t, s.URL()).Run(context.Background(), Request{
		TurnID: "t1", Model: sonnet(), Message: "do three things", Sink: rec,
		Tools: []Tool{countingTool("append", &runs, &mu, &log)},
		Resume: &Resume{
			Content: "Working. Half a sentence",
			Steps: []protocol.StepCheckpoint{{
				Step: 1, Model: "claude-haiku-3-5", Content: "Working. ", InputTokens: 10, OutputTokens: 5,
				Calls: []protocol.CheckpointCall{
					{ID: "done1", Name: "append", Args: `{"n": 1}`},
					{ID: "began", Name: "append", Args: `{"n":2}`},
					{ID: "never", Name: "append", Args: `{"n":3}`},
				},
			}},
			Executing: []protocol.ExecCheckpoint{{Step: 1, CallID: "done1"}, {Step: 1, CallID: "began"}},
			Results:   []protocol.ToolEvent{{TurnID: "t1", CallID: "done1", Name: "append", Result: "append done", Status: "success"}},
		},
		OnToolEvent: func(ev protocol.ToolEvent) { recorded = append(recorded, ev) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Content != "Working. Half a sentenceand the rest." {
		t.Errorf("content %q", res.Content)
	}
	if runs != 1 {
		t.Errorf("the tool ran %d times on resume, want 1 (only the call that never began)", runs)
	}
	if res.Model != "claude-haiku-3-5" || res.Usage.InputTokens < 10 || res.Usage.OutputTokens < 5 {
		t.Errorf("model %q usage %+v: the checkpoint's are carried on", res.Model, res.Usage)
	}
	equal(t, "toolsUsed", res.ToolsUsed, []string{"append", "append", "append"})
	if len(recorded) != 2 || recorded[0].CallID != "began" || recorded[0].Status != "error" || recorded[1].CallID != "never" {
		t.Fatalf("recorded %+v", recorded)
	}
	results := rec.named(protocol.EventToolResult)
	if len(results) != 2 || results[0].data.(ToolResultData).Result != InterruptedToolText("append") {
		t.Errorf("tool_result events %v", rec.summary())
	}
	// No auto-recall, no switch announcements: the client saw the turn's start.
	if slices.Contains(rec.texts(protocol.EventStep), "Recalling relevant memories...") {
		t.Errorf("recall shown again: %v", rec.summary())
	}
	msgs := s.ChatRequests()[0].Chat.Messages
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	equal(t, "transcript roles", roles, []string{"user", "assistant", "tool", "tool", "tool", "assistant", "user"})
	if msgs[1].Content != "Working. " || len(msgs[1].ToolCalls) != 3 || msgs[2].Content != "append done" ||
		msgs[3].Content != InterruptedToolText("append") || msgs[4].ToolCallID != "never" || msgs[5].Content != "Half a sentence" {
		t.Errorf("transcript %+v", msgs)
	}
}

// TestResumeLoopDetectionCountsEarlierCalls: calls made before the crash
// count towards the identical-call limit.
func TestResumeLoopDetectionCountsEarlierCalls(t *testing.T) {
	s := server(t, toolStep("c4", "append", `{"n":1}`), llmtest.Reply("ok"))
	var steps []protocol.StepCheckpoint
	var results []protocol.ToolEvent
	for i, id := range []string{"c1", "c2", "c3"} {
		steps = append(steps, protocol.StepCheckpoint{Step: i + 1, Calls: []protocol.CheckpointCall{{ID: id, Name: "append", Args: `{"n":1}`}}})
		results = append(results, protocol.ToolEvent{CallID: id, Name: "append", Result: "append done"})
	}
	var mu sync.Mutex
	var runs int
	res, err := newAgent(t, s.URL()).Run(context.Background(), Request{
		TurnID: "t", Model: sonnet(), Message: "loop", Sink: newRecorder(),
		Tools:  []Tool{countingTool("append", &runs, &mu, new([]string))},
		Resume: &Resume{Steps: steps, Results: results},
	})
	if err != nil || runs != 0 || len(res.Tools) != 4 || res.Tools[3].Result[:21] != "Error: Loop detected " {
		t.Fatalf("runs %d, tools %+v, err %v", runs, res.Tools, err)
	}
}

// TestBlockedToolGetsGovernanceText: a tool a policy removed is not
// offered, and a call to it anyway gets the governance text as its
// tool_result.
func TestBlockedToolGetsGovernanceText(t *testing.T) {
	s := server(t, toolStep("c1", "bash", `{"command":"ls"}`), llmtest.Reply("ok"))
	rec := newRecorder()
	res, err := newAgent(t, s.URL()).Run(context.Background(), Request{
		TurnID: "t", Model: sonnet(), Message: "ls", Sink: rec,
		Tools:   []Tool{echoTool("read_file")},
		Blocked: []string{"bash"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range s.ChatRequests()[0].Chat.Tools {
		if tool.Function.Name == "bash" {
			t.Errorf("blocked tool offered to the model")
		}
	}
	results := rec.named(protocol.EventToolResult)
	if len(results) != 1 || results[0].data.(ToolResultData).Result != protocol.GovernanceBlockedText("bash") {
		t.Fatalf("events %v", rec.summary())
	}
	if len(res.Tools) != 1 || res.Tools[0].Status != "denied" {
		t.Errorf("tool events %+v", res.Tools)
	}
	if got := s.ChatRequests()[1].Chat.Messages; got[len(got)-1].Content != protocol.GovernanceBlockedText("bash") {
		t.Errorf("model got %+v", got[len(got)-1])
	}
}
