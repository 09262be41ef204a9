package retrieval_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/chatstream"
	"github.com/waggle-os/core/services/turnrunner/retrieval"
)

// event is one emitted event with its data as the client would decode it.
type event struct {
	name string
	data map[string]any
}

// recorder is an Emitter that keeps every event; after failAfter events
// (when > 0) it fails, like a stream whose client went away.
type recorder struct {
	mu        sync.Mutex
	events    []event
	failAfter int
	calls     int
}

func (r *recorder) Emit(name string, data any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.failAfter > 0 && r.calls > r.failAfter {
		return errors.New("stream closed")
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	r.events = append(r.events, event{name, m})
	return nil
}

func (r *recorder) all() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// sequence renders events as "name" or "progress:<type>".
func sequence(evs []event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.name
		if e.name == protocol.AgentRunEventProgress {
			out[i] += ":" + e.data["type"].(string)
		}
	}
	return out
}

func keys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

func find(t *testing.T, evs []event, name string) map[string]any {
	t.Helper()
	for _, e := range evs {
		if e.name == name {
			return e.data
		}
	}
	t.Fatalf("no %s event in %v", name, sequence(evs))
	return nil
}

// searchCall is one Search the fake searcher received.
type searchCall struct {
	workspace, query string
	limit            int
}

// fakeSearch answers queries from a table; a query not in it finds nothing.
type fakeSearch struct {
	mu      sync.Mutex
	results map[string][]retrieval.Passage
	err     error
	calls   []searchCall
}

func (f *fakeSearch) Search(_ context.Context, ws, q string, limit int) ([]retrieval.Passage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, searchCall{ws, q, limit})
	if f.err != nil {
		return nil, f.err
	}
	return f.results[q], nil
}

func startLLM(t *testing.T, rs ...llmtest.Response) *llmtest.Server {
	t.Helper()
	s := llmtest.New(llmtest.WithResponses(rs...))
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func newRunner(t *testing.T, llm *llmtest.Server) *retrieval.Runner {
	t.Helper()
	r, err := retrieval.New(retrieval.Config{Model: chatstream.Model{BaseURL: llm.URL(), APIKey: "sk-test"}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// retrieveCall is a response whose only content is text and whose tool
// calls retrieve each query, with the given usage.
func retrieveCall(text string, in, out int, queries ...string) llmtest.Response {
	parts := []any{llmtest.WithUsage(in, out)}
	if text != "" {
		parts = append(parts, llmtest.Content(text))
	}
	for i, q := range queries {
		args, _ := json.Marshal(map[string]string{"query": q})
		parts = append(parts, llmtest.ToolCall(i, "call_"+q, retrieval.ToolName, string(args), 2))
	}
	return llmtest.Response{Steps: llmtest.Steps(parts...)}
}

func answer(text string, in, out int) llmtest.Response {
	return llmtest.Response{Steps: []llmtest.Step{llmtest.WithUsage(in, out), llmtest.Content(text)}}
}

func TestRunWithTwoRetrievals(t *testing.T) {
	llm := startLLM(t,
		retrieveCall("", 100, 10, "alpha"),
		retrieveCall("Checking beta too.", 200, 20, "beta"),
		answer("<think>alpha says yes</think>\n  Yes, it ships in May [result 1].  \n", 300, 30),
	)
	search := &fakeSearch{results: map[string][]retrieval.Passage{
		"alpha": {{Source: "memory:m1", Content: "Release is in May.", Score: 0.9}, {Source: "session:s1", Content: "We talked about dates.", Score: 0.125}},
	}}
	rec := &recorder{}
	req := protocol.AgentRunRequest{TurnID: "t1", Question: "When does it ship?", Workspace: "proj"}
	if err := newRunner(t, llm).Run(context.Background(), req, search, rec); err != nil {
		t.Fatalf("Run: %v", err)
	}

	evs := rec.all()
	want := []string{
		"started",
		"progress:step_started", "progress:retrieval_invoked", "progress:step_completed",
		"progress:step_started", "progress:retrieval_invoked", "progress:step_completed",
		"progress:step_started", "progress:step_completed", "progress:finalized",
		"finalized", "done",
	}
	if got := sequence(evs); !slices.Equal(got, want) {
		t.Fatalf("events:\n got %v\nwant %v", got, want)
	}

	// Exact keys of every payload.
	wantKeys := map[string][]string{
		"started":                    {"model", "shape", "shapeRecognized", "shapeRequested"},
		"progress:step_started":      {"step_index", "type"},
		"progress:retrieval_invoked": {"retrieval_query", "retrieval_results_count", "step_index", "type"},
		"progress:step_completed":    {"cost_usd", "step_index", "tokens_in", "tokens_out", "type"},
		"progress:finalized":         {"cost_usd", "step_index", "tokens_in", "tokens_out", "type"},
		"finalized": {"loopExhausted", "normalizedResponse", "promptShapeName", "rawResponse", "retrievalCalls",
			"stepsTaken", "totalCostUsd", "totalLatencyMs", "totalTokensIn", "totalTokensOut"},
		"done": {"ok"},
	}
	for i, name := range sequence(evs) {
		if got := keys(evs[i].data); !slices.Equal(got, wantKeys[name]) {
			t.Errorf("event %d %s keys = %v, want %v", i, name, got, wantKeys[name])
		}
	}

	started := evs[0].data
	if started["shape"] != "(model-default)" || started["shapeRequested"] != nil ||
		started["shapeRecognized"] != true || started["model"] != "claude-sonnet-4-6" {
		t.Errorf("started = %v", started)
	}
	if q := evs[2].data; q["retrieval_query"] != "alpha" || q["retrieval_results_count"] != 2.0 || q["step_index"] != 0.0 {
		t.Errorf("first retrieval_invoked = %v", q)
	}
	if q := evs[5].data; q["retrieval_query"] != "beta" || q["retrieval_results_count"] != 0.0 || q["step_index"] != 1.0 {
		t.Errorf("second retrieval_invoked = %v", q)
	}
	if sc := evs[3].data; sc["tokens_in"] != 100.0 || sc["tokens_out"] != 10.0 || sc["cost_usd"] != 0.00045 {
		t.Errorf("first step_completed = %v", sc)
	}

	fin := find(t, evs, "finalized")
	wantFin := map[string]any{
		"rawResponse":        "<think>alpha says yes</think>\n  Yes, it ships in May [result 1].  \n",
		"normalizedResponse": "Yes, it ships in May [result 1].",
		"promptShapeName":    "claude",
		"stepsTaken":         3.0,
		"retrievalCalls":     2.0,
		"loopExhausted":      false,
		"totalTokensIn":      600.0,
		"totalTokensOut":     60.0,
		"totalCostUsd":       0.0027, // 600/1K × 0.003 + 60/1K × 0.015
	}
	for k, v := range wantFin {
		if fin[k] != v {
			t.Errorf("finalized.%s = %#v, want %#v", k, fin[k], v)
		}
	}
	if ms, _ := fin["totalLatencyMs"].(float64); ms < 0 {
		t.Errorf("totalLatencyMs = %v", fin["totalLatencyMs"])
	}
	if pf := evs[9].data; pf["tokens_in"] != 600.0 || pf["cost_usd"] != 0.0027 || pf["step_index"] != 2.0 {
		t.Errorf("progress finalized = %v", pf)
	}

	// The searcher saw each query once, in the request's workspace.
	wantCalls := []searchCall{{"proj", "alpha", retrieval.DefaultSearchLimit}, {"proj", "beta", retrieval.DefaultSearchLimit}}
	if !slices.Equal(search.calls, wantCalls) {
		t.Errorf("searches = %v, want %v", search.calls, wantCalls)
	}

	// What the model saw: the retrieve tool, the question, and the results
	// in the reference's format as the tool message of its call.
	reqs := llm.ChatRequests()
	if len(reqs) != 3 {
		t.Fatalf("%d model calls, want 3", len(reqs))
	}
	first := reqs[0]
	if len(first.Chat.Tools) != 1 || first.Chat.Tools[0].Function.Name != "retrieve" {
		t.Errorf("tools = %+v", first.Chat.Tools)
	}
	if first.Body["max_tokens"] != 4096.0 || first.Body["temperature"] != 0.3 || first.Chat.Model != "claude-sonnet-4-6" {
		t.Errorf("request params: max_tokens %v temperature %v model %v", first.Body["max_tokens"], first.Body["temperature"], first.Chat.Model)
	}
	msgs := first.Chat.Messages
	if len(msgs) != 2 || msgs[0].Role != "system" || msgs[1].Role != "user" || msgs[1].Content != "When does it ship?" {
		t.Fatalf("first messages = %+v", msgs)
	}
	if !strings.Contains(msgs[0].Content, `"general-purpose" persona`) || !strings.Contains(msgs[0].Content, "at most 5 steps") {
		t.Errorf("system prompt lacks persona or budget: %q", msgs[0].Content)
	}
	second := reqs[1].Chat.Messages
	tool := second[len(second)-1]
	wantText := "[result 1, score 0.900]\nRelease is in May.\n\n---\n\n[result 2, score 0.125]\nWe talked about dates."
	if tool.Role != "tool" || tool.ToolCallID != "call_alpha" || tool.Content != wantText {
		t.Errorf("tool message = %+v, want content %q", tool, wantText)
	}
	if asst := second[len(second)-2]; asst.Role != "assistant" || len(asst.ToolCalls) != 1 || asst.ToolCalls[0].Function.Arguments != `{"query":"alpha"}` {
		t.Errorf("assistant message = %+v", asst)
	}
	third := reqs[2].Chat.Messages
	if last := third[len(third)-1]; last.Content != retrieval.NoResults {
		t.Errorf("empty search told the model %q", last.Content)
	}
}

func TestRunShapes(t *testing.T) {
	tests := []struct {
		name, shape, model string
		wantStarted        map[string]any
		wantShape          string
		wantMaxTokens      float64
	}{
		{"unknown shape falls back without error", "nonsense", "qwen3-32b",
			map[string]any{"shape": "(model-default)", "shapeRequested": "nonsense", "shapeRecognized": false, "model": "qwen3-32b"},
			"qwen-thinking", 16384},
		{"known shape overrides the model's", "gpt", "claude-opus-4-6",
			map[string]any{"shape": "gpt", "shapeRequested": "gpt", "shapeRecognized": true, "model": "claude-opus-4-6"},
			"gpt", 4096},
		{"registered gen1 shape", "qwen-thinking-gen1-v1", "",
			map[string]any{"shape": "qwen-thinking-gen1-v1", "shapeRequested": "qwen-thinking-gen1-v1", "shapeRecognized": true, "model": "claude-sonnet-4-6"},
			"qwen-thinking-gen1-v1", 4096},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			llm := startLLM(t, answer("Done.", 5, 5))
			rec := &recorder{}
			req := protocol.AgentRunRequest{Question: "q", Shape: tt.shape, Model: tt.model}
			if err := newRunner(t, llm).Run(context.Background(), req, &fakeSearch{}, rec); err != nil {
				t.Fatalf("Run: %v", err)
			}
			evs := rec.all()
			if got := sequence(evs); !slices.Equal(got, []string{"started", "progress:step_started", "progress:step_completed", "progress:finalized", "finalized", "done"}) {
				t.Fatalf("events = %v", got)
			}
			if !maps.Equal(evs[0].data, tt.wantStarted) {
				t.Errorf("started = %v, want %v", evs[0].data, tt.wantStarted)
			}
			if got := find(t, evs, "finalized")["promptShapeName"]; got != tt.wantShape {
				t.Errorf("promptShapeName = %v, want %v", got, tt.wantShape)
			}
			if got := llm.ChatRequests()[0].Body["max_tokens"]; got != tt.wantMaxTokens {
				t.Errorf("max_tokens = %v, want %v", got, tt.wantMaxTokens)
			}
		})
	}
}

func TestRunLoopExhausted(t *testing.T) {
	llm := startLLM(t,
		retrieveCall("Partial: maybe May.", 10, 1, "a"),
		retrieveCall("", 10, 1, "b"),
		answer("never asked for", 1, 1),
	)
	rec := &recorder{}
	req := protocol.AgentRunRequest{Question: "q", MaxSteps: 2}
	if err := newRunner(t, llm).Run(context.Background(), req, &fakeSearch{}, rec); err != nil {
		t.Fatalf("Run: %v", err)
	}
	evs := rec.all()
	want := []string{
		"started",
		"progress:step_started", "progress:retrieval_invoked", "progress:step_completed",
		"progress:step_started", "progress:retrieval_invoked", "progress:step_completed",
		"progress:loop_exhausted", "finalized", "done",
	}
	if got := sequence(evs); !slices.Equal(got, want) {
		t.Fatalf("events:\n got %v\nwant %v", got, want)
	}
	ex := evs[7].data
	if !slices.Equal(keys(ex), []string{"message", "step_index", "type"}) || ex["step_index"] != 1.0 ||
		ex["message"] != "step limit (2) reached before a final answer" {
		t.Errorf("loop_exhausted = %v", ex)
	}
	fin := find(t, evs, "finalized")
	if fin["loopExhausted"] != true || fin["stepsTaken"] != 2.0 || fin["retrievalCalls"] != 2.0 ||
		fin["rawResponse"] != "Partial: maybe May." || fin["normalizedResponse"] != "Partial: maybe May." {
		t.Errorf("finalized = %v", fin)
	}
	if n := len(llm.ChatRequests()); n != 2 {
		t.Errorf("%d model calls, want 2 (maxSteps)", n)
	}
}

func TestRunRetrievalLimitPerStep(t *testing.T) {
	llm := startLLM(t,
		retrieveCall("", 1, 1, "one", "two", "three"),
		answer("ok", 1, 1),
	)
	search := &fakeSearch{}
	rec := &recorder{}
	req := protocol.AgentRunRequest{Question: "q", MaxRetrievalsPerStep: 2}
	if err := newRunner(t, llm).Run(context.Background(), req, search, rec); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(search.calls) != 2 || search.calls[1].query != "two" {
		t.Fatalf("searches = %v, want one and two only", search.calls)
	}
	if got := find(t, rec.all(), "finalized")["retrievalCalls"]; got != 2.0 {
		t.Errorf("retrievalCalls = %v", got)
	}
	msgs := llm.ChatRequests()[1].Chat.Messages
	last := msgs[len(msgs)-1]
	if last.ToolCallID != "call_three" || !strings.HasPrefix(last.Content, "Not run: the limit of 2 retrievals per step") {
		t.Errorf("over-limit call answered %+v", last)
	}
}

func TestRunSearchFailureIsToldToTheModel(t *testing.T) {
	llm := startLLM(t, retrieveCall("", 1, 1, "x"), answer("Nothing found.", 1, 1))
	rec := &recorder{}
	search := &fakeSearch{err: errors.New("nats: timeout talking to store at 10.0.0.7")}
	if err := newRunner(t, llm).Run(context.Background(), protocol.AgentRunRequest{Question: "q"}, search, rec); err != nil {
		t.Fatalf("Run: %v", err)
	}
	evs := rec.all()
	inv := evs[2].data
	if inv["type"] != "retrieval_invoked" || inv["retrieval_results_count"] != 0.0 || inv["message"] != "retrieval failed" {
		t.Errorf("retrieval_invoked = %v", inv)
	}
	msgs := llm.ChatRequests()[1].Chat.Messages
	if c := msgs[len(msgs)-1].Content; strings.Contains(c, "10.0.0.7") || !strings.HasPrefix(c, "Retrieval failed") {
		t.Errorf("model told %q", c)
	}
	if find(t, evs, "finalized")["normalizedResponse"] != "Nothing found." {
		t.Errorf("run did not finish after a failed search")
	}
}

func TestRunModelError(t *testing.T) {
	tests := []struct {
		name string
		resp llmtest.Response
		want string
	}{
		{"unauthorized", llmtest.ErrorStatus(401, "Incorrect API key provided: sk-sec***"), agent.MsgUnauthorized},
		{"server error is not forwarded raw", llmtest.ErrorStatus(400, "internal stack: db at 10.1.2.3 failed"), agent.MsgGeneric},
		{"stream error", llmtest.Response{Steps: []llmtest.Step{llmtest.Content("par"), llmtest.StreamError("boom at host-7", "server_error", nil)}}, agent.MsgGeneric},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			llm := startLLM(t, tt.resp)
			rec := &recorder{}
			err := newRunner(t, llm).Run(context.Background(), protocol.AgentRunRequest{Question: "q"}, &fakeSearch{}, rec)
			if err == nil {
				t.Fatal("Run returned nil after a model error")
			}
			evs := rec.all()
			if got := sequence(evs); !slices.Equal(got, []string{"started", "progress:step_started", "error", "done"}) {
				t.Fatalf("events = %v", got)
			}
			if e := evs[2].data; !maps.Equal(e, map[string]any{"error": tt.want}) {
				t.Errorf("error = %v, want %q", e, tt.want)
			}
			if !maps.Equal(evs[3].data, map[string]any{"ok": true}) {
				t.Errorf("done = %v", evs[3].data)
			}
		})
	}
}

func TestRunCancelStopsTheModelCall(t *testing.T) {
	pause := llmtest.NewPause()
	t.Cleanup(pause.Release)
	llm := startLLM(t, llmtest.Response{Steps: []llmtest.Step{llmtest.Content("thinking"), llmtest.Wait(pause), llmtest.Content(" more")}})
	rec := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- newRunner(t, llm).Run(ctx, protocol.AgentRunRequest{Question: "q"}, &fakeSearch{}, rec)
	}()
	select {
	case <-pause.Reached():
	case <-time.After(10 * time.Second):
		t.Fatal("model call never reached the pause")
	}
	cancel()
	var err error
	select {
	case err = <-errc:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	select {
	case <-llm.ChatRequests()[0].Cancelled():
	case <-time.After(10 * time.Second):
		t.Fatal("the model request was not cancelled upstream")
	}
	evs := rec.all()
	if got := sequence(evs); !slices.Equal(got, []string{"started", "progress:step_started", "error", "done"}) {
		t.Fatalf("events = %v", got)
	}
	if evs[2].data["error"] != retrieval.MsgCancelled {
		t.Errorf("error = %v", evs[2].data)
	}
}

func TestRunCancelDuringSearch(t *testing.T) {
	llm := startLLM(t, retrieveCall("", 1, 1, "slow"), answer("unreached", 1, 1))
	rec := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	search := searchFunc(func(ctx context.Context) ([]retrieval.Passage, error) {
		cancel()
		<-ctx.Done()
		return nil, ctx.Err()
	})
	err := newRunner(t, llm).Run(ctx, protocol.AgentRunRequest{Question: "q"}, search, rec)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	if got := sequence(rec.all()); !slices.Equal(got, []string{"started", "progress:step_started", "error", "done"}) {
		t.Errorf("events = %v", got)
	}
	if n := len(llm.ChatRequests()); n != 1 {
		t.Errorf("%d model calls after cancel, want 1", n)
	}
}

type searchFunc func(ctx context.Context) ([]retrieval.Passage, error)

func (f searchFunc) Search(ctx context.Context, _, _ string, _ int) ([]retrieval.Passage, error) {
	return f(ctx)
}

func TestRunStopsWhenTheStreamIsGone(t *testing.T) {
	llm := startLLM(t, retrieveCall("", 1, 1, "a"), answer("unreached", 1, 1))
	rec := &recorder{failAfter: 2} // started and step_started get through
	search := &fakeSearch{}
	err := newRunner(t, llm).Run(context.Background(), protocol.AgentRunRequest{Question: "q"}, search, rec)
	if err == nil {
		t.Fatal("Run returned nil though emitting failed")
	}
	if rec.calls != 4 { // started, step_started, retrieval_invoked (failed), done (attempted last)
		t.Errorf("%d emit attempts, want 4", rec.calls)
	}
	if n := len(llm.ChatRequests()); n != 1 {
		t.Errorf("%d model calls, want 1: the run must stop once nobody listens", n)
	}
}

func TestRunRequiresAQuestion(t *testing.T) {
	llm := startLLM(t)
	rec := &recorder{}
	err := newRunner(t, llm).Run(context.Background(), protocol.AgentRunRequest{Question: "  "}, &fakeSearch{}, rec)
	if err == nil {
		t.Fatal("Run accepted an empty question")
	}
	evs := rec.all()
	if got := sequence(evs); !slices.Equal(got, []string{"started", "error", "done"}) {
		t.Fatalf("events = %v", got)
	}
	if evs[1].data["error"] != "question is required" {
		t.Errorf("error = %v", evs[1].data)
	}
	if n := len(llm.ChatRequests()); n != 0 {
		t.Errorf("%d model calls for an empty question", n)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  retrieval.Config
		ok   bool
	}{
		{"defaults", retrieval.Config{}, true},
		{"not http", retrieval.Config{Model: chatstream.Model{BaseURL: "ftp://x"}}, false},
		{"no host", retrieval.Config{Model: chatstream.Model{BaseURL: "http://"}}, false},
		{"negative search limit", retrieval.Config{SearchLimit: -1}, false},
		{"negative cap", retrieval.Config{StepsCap: -2}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate = %v, want ok=%v", err, tt.ok)
			}
			if _, err := retrieval.New(tt.cfg); (err == nil) != tt.ok {
				t.Errorf("New = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
