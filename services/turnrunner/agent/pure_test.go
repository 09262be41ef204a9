package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/chatstream"
)

func TestDescribeToolUse(t *testing.T) {
	long := strings.Repeat("a", 79) + "é" + "tail"
	cases := []struct {
		name  string
		input map[string]any
		want  string
	}{
		{"web_search", map[string]any{"query": "waggle bees"}, `Searching the web for "waggle bees"...`},
		{"web_search", nil, `Searching the web for ""...`},
		{"web_fetch", map[string]any{"url": "https://x.io"}, "Reading web page: https://x.io..."},
		{"search_memory", map[string]any{"query": "q"}, `Searching memory for "q"...`},
		{"save_memory", nil, "Saving to memory..."},
		{"get_identity", nil, "Checking identity..."},
		{"get_awareness", nil, "Checking current awareness state..."},
		{"query_knowledge", nil, "Querying knowledge graph..."},
		{"add_task", map[string]any{"title": "T"}, `Adding task: "T"...`},
		{"correct_knowledge", nil, "Updating knowledge graph..."},
		{"bash", map[string]any{"command": "ls -la"}, "Running command: ls -la..."},
		{"bash", map[string]any{"command": long}, "Running command: " + strings.Repeat("a", 79) + "é..."},
		{"bash", nil, "Running command: ..."},
		{"read_file", map[string]any{"path": "src/a.go"}, "Reading file: src/a.go..."},
		{"read_file", map[string]any{}, "Reading file: ..."},
		{"write_file", map[string]any{"path": "b"}, "Writing file: b..."},
		{"edit_file", map[string]any{"path": "c"}, "Editing file: c..."},
		{"search_files", map[string]any{"pattern": "*.go"}, `Searching for files matching "*.go"...`},
		{"search_content", map[string]any{"pattern": "TODO"}, `Searching file contents for "TODO"...`},
		{"git_status", nil, "Checking git status..."},
		{"git_diff", nil, "Checking git diff..."},
		{"git_log", nil, "Checking git log..."},
		{"git_commit", nil, "Creating git commit..."},
		{"create_plan", map[string]any{"title": "P"}, `Creating plan: "P"...`},
		{"add_plan_step", nil, "Adding plan step..."},
		{"execute_step", nil, "Executing plan step..."},
		{"show_plan", nil, "Showing current plan..."},
		{"generate_docx", map[string]any{"path": "r.docx"}, "Generating document: r.docx..."},
		{"list_skills", nil, "Checking installed skills..."},
		{"create_skill", map[string]any{"name": "s"}, "Creating skill: s..."},
		{"delete_skill", map[string]any{"name": "s"}, "Deleting skill: s..."},
		{"read_skill", map[string]any{"name": "s"}, "Reading skill: s..."},
		{"search_skills", map[string]any{"query": "q"}, `Searching for skills: "q"...`},
		{"suggest_skill", nil, "Looking for relevant skills..."},
		{"acquire_capability", map[string]any{"need": "pdf"}, `Searching for capabilities: "pdf"...`},
		{"install_capability", map[string]any{"name": "pdf"}, "Installing capability: pdf..."},
		{"compose_workflow", nil, "Analyzing task and composing workflow plan..."},
		{"orchestrate_workflow", map[string]any{"template": "research-team"}, "Running workflow: inline..."},
		{"orchestrate_workflow", map[string]any{"inline_template": map[string]any{}}, "Running workflow: inline..."},
		{"orchestrate_workflow", map[string]any{"template": ""}, "Running workflow: ..."},
		{"orchestrate_workflow", nil, "Running workflow: ..."},
		{"spawn_agent", map[string]any{"name": "Rex", "role": "researcher"}, `Spawning sub-agent "Rex" (researcher)...`},
		{"list_agents", nil, "Checking sub-agents..."},
		{"get_agent_result", nil, "Getting sub-agent result..."},
		{"custom_tool", nil, "Using custom_tool..."},
		{"add_task", map[string]any{"title": 42.0}, `Adding task: "42"...`},
	}
	for _, tc := range cases {
		if got := DescribeToolUse(tc.name, tc.input); got != tc.want {
			t.Errorf("DescribeToolUse(%s, %v) = %q, want %q", tc.name, tc.input, got, tc.want)
		}
	}
}

func msgs(n int, role string) []protocol.Message {
	out := make([]protocol.Message, n)
	for i := range out {
		out[i] = protocol.Message{Role: role, Content: fmt.Sprintf("msg-%d", i)}
	}
	return out
}

func TestApplyContextWindow(t *testing.T) {
	cases := []struct {
		name        string
		history     []protocol.Message
		max         int
		wantLen     int
		notice      string
		first, last string
	}{
		{"two messages", msgs(2, "user"), 50, 2, "", "msg-0", "msg-1"},
		{"exactly fifty", msgs(50, "user"), 50, 50, "", "msg-0", "msg-49"},
		{"sixty", msgs(60, "user"), 50, 51, "10 earlier messages", "msg-10", "msg-59"},
		{"fifty-five", msgs(55, "user"), 50, 51, "5 earlier messages", "msg-5", "msg-54"},
		{"custom max", msgs(10, "user"), 5, 6, "5 earlier messages", "msg-5", "msg-9"},
		{"empty", nil, 50, 0, "", "", ""},
		{"default max", msgs(51, "user"), 0, 51, "1 earlier messages", "msg-1", "msg-50"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ApplyContextWindow(tc.history, tc.max)
			if len(got) != tc.wantLen {
				t.Fatalf("len %d, want %d", len(got), tc.wantLen)
			}
			if tc.wantLen == 0 {
				return
			}
			body := got
			if tc.notice != "" {
				if got[0].Role != protocol.RoleSystem || !strings.HasPrefix(got[0].Content, "[Context summary — "+tc.notice+" compressed]\n") {
					t.Errorf("notice %q", got[0].Content)
				}
				body = got[1:]
			}
			if body[0].Content != tc.first || body[len(body)-1].Content != tc.last {
				t.Errorf("window %q..%q, want %q..%q", body[0].Content, body[len(body)-1].Content, tc.first, tc.last)
			}
		})
	}
}

func TestSummarizeDroppedContext(t *testing.T) {
	u := func(s string) protocol.Message { return protocol.Message{Role: "user", Content: s} }
	a := func(s string) protocol.Message { return protocol.Message{Role: "assistant", Content: s} }
	requests := func(n int) []protocol.Message {
		var out []protocol.Message
		for i := range n {
			out = append(out, u(fmt.Sprintf("Please help me with request number %d", i)))
		}
		return out
	}
	cases := []struct {
		name    string
		dropped []protocol.Message
		want    string
	}{
		{"nothing", nil, "0 messages covering earlier conversation context."},
		{"short only", []protocol.Message{u("hi"), a("hello")}, "2 messages covering earlier conversation context."},
		{"one short", []protocol.Message{u("ok")}, "1 messages covering earlier conversation context."},
		{"decision", []protocol.Message{a("We decided to use Postgres. It scales.")}, "Decisions made: We decided to use Postgres"},
		{"decision keywords", []protocol.Message{
			a("They agreed on Friday"), a("She chose the red one"), a("We selected vendor B"), a("Team went with plan C"),
		}, "Decisions made: They agreed on Friday | She chose the red one | We selected vendor B | Team went with plan C"},
		{"five decisions max", []protocol.Message{
			a("decided one thing"), a("decided two thing"), a("decided three thing"), a("decided four thing"),
			a("decided five thing"), a("decided six thing"),
		}, "Decisions made: decided one thing | decided two thing | decided three thing | decided four thing | decided five thing"},
		{"decision too short", []protocol.Message{a("decided.ok then more text")}, "1 messages covering earlier conversation context."},
		{"decision too long", []protocol.Message{a("we decided " + strings.Repeat("x", 200))}, "1 messages covering earlier conversation context."},
		{"four requests", requests(4), "Topics discussed: Please help me with request number 0 → Please help me with request number 1 → Please help me with request number 2 → Please help me with request number 3"},
		{"six requests", requests(6), "Topics discussed: Please help me with request number 0 → Please help me with request number 1 → ... → Please help me with request number 4 → Please help me with request number 5"},
		{"request first line only", []protocol.Message{u("Draft the quarterly report\nwith all the details")}, "Topics discussed: Draft the quarterly report"},
		{"request too short", []protocol.Message{u("fifteen chars!!")}, "1 messages covering earlier conversation context."},
		{"both", []protocol.Message{u("Can you compare these two databases"), a("We agreed on Postgres.")},
			"Decisions made: We agreed on Postgres\nTopics discussed: Can you compare these two databases"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := SummarizeDroppedContext(tc.dropped); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestResolveModel(t *testing.T) {
	cases := []struct {
		name          string
		mc            ModelConfig
		body, ws, msg string
		spent         float64
		want          ModelChoice
	}{
		{"default", ModelConfig{}, "", "", "hi", 0, ModelChoice{Model: DefaultModel, Primary: DefaultModel}},
		{"config default", ModelConfig{DefaultModel: "c"}, "", "", "hi", 0, ModelChoice{Model: "c", Primary: "c"}},
		{"workspace", ModelConfig{DefaultModel: "c"}, "", "w", "hi", 0, ModelChoice{Model: "w", Primary: "w"}},
		{"body wins", ModelConfig{DefaultModel: "c", FallbackModel: "f"}, "b", "w", "hi", 0, ModelChoice{Model: "b", Primary: "b", Fallback: "f"}},
		{"budget reached", ModelConfig{BudgetModel: "cheap", DailyBudget: 5, BudgetThreshold: 0.5}, "b", "", "implement it", 2.5,
			ModelChoice{Model: "cheap", Primary: "b", SwitchReason: "Budget 50% reached ($2.50/$5.00)"}},
		{"budget not reached, complex", ModelConfig{BudgetModel: "cheap", DailyBudget: 5}, "b", "", "implement it", 3.99,
			ModelChoice{Model: "b", Primary: "b"}},
		{"smart routing", ModelConfig{BudgetModel: "cheap"}, "b", "", "what time is it?", 0, ModelChoice{Model: "cheap", Primary: "b"}},
		{"no budget model", ModelConfig{DailyBudget: 1}, "", "", "hi", 100, ModelChoice{Model: DefaultModel, Primary: DefaultModel}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ResolveModel(tc.mc, tc.body, tc.ws, tc.msg, tc.spent); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestIsSimpleMessage(t *testing.T) {
	cases := map[string]bool{
		"what time is it?":          true,
		"thanks!":                   true,
		"please fix the bug":        false,
		"Can you REVIEW this":       false,
		"look at `x`":               false,
		"see https://x.io":          false,
		"a\nb\nc\nd":                false,
		"a\nb\nc":                   true,
		strings.Repeat("word ", 81): false,
		strings.Repeat("a", 501):    false,
		"testing is fun":            true, // "test" only as a whole word
		"the builder of things":     true,
		"we should test":            false,
		strings.Repeat("é", 500):    true,
		"set up the page":           true,
	}
	for msg, want := range cases {
		if got := IsSimpleMessage(msg); got != want {
			t.Errorf("IsSimpleMessage(%q) = %v, want %v", msg, got, want)
		}
	}
}

func TestCost(t *testing.T) {
	cases := []struct {
		model   string
		in, out int
		prices  map[string]Price
		want    float64
	}{
		{"claude-sonnet-4-6", 10, 5, nil, 0.000105},
		{"claude-sonnet-4-6", 1234, 567, nil, 0.012207},
		{"unknown-model", 10, 5, nil, 0.000105},
		{"claude-opus-4-6", 1000, 1000, nil, 0.09},
		{"claude-haiku-3-5", 1000, 1000, nil, 0.0015},
		{"mine", 1000, 1000, map[string]Price{"mine": {Input: 0.001, Output: 0.002}}, 0.003},
		{"claude-sonnet-4-6", 0, 0, nil, 0},
	}
	for _, tc := range cases {
		if got := Cost(tc.model, tc.in, tc.out, tc.prices); got != tc.want {
			t.Errorf("Cost(%s, %d, %d) = %v, want %v", tc.model, tc.in, tc.out, got, tc.want)
		}
	}
}

func TestLoadModelConfig(t *testing.T) {
	dir := t.TempDir()
	mc, err := LoadModelConfig(dir)
	if err != nil || mc.DefaultModel != "" {
		t.Fatalf("missing file: %+v %v", mc, err)
	}
	body := `{"defaultModel":"d","fallbackModel":"f","budgetModel":"b","budgetThreshold":0.9,"dailyBudget":3,
	          "prices":{"d":{"input":0.1,"output":0.2}},"theme":"dark"}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	mc, err = LoadModelConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if mc.DefaultModel != "d" || mc.FallbackModel != "f" || mc.BudgetModel != "b" || mc.BudgetThreshold != 0.9 ||
		mc.DailyBudget != 3 || mc.Prices["d"] != (Price{0.1, 0.2}) {
		t.Errorf("loaded %+v", mc)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadModelConfig(dir); err == nil {
		t.Error("malformed config accepted")
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o deadline" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestFriendlyError(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), MsgUnreachable},
		{errors.New("connect ECONNREFUSED 127.0.0.1:4000"), MsgUnreachable},
		{&openai.APIError{HTTPStatusCode: 401, Message: "bad key"}, MsgUnauthorized},
		{errors.New("Unauthorized"), MsgUnauthorized},
		{timeoutErr{}, MsgTimeout},
		{context.DeadlineExceeded, MsgTimeout},
		{errors.New("ETIMEDOUT"), MsgTimeout},
		{&openai.APIError{HTTPStatusCode: 400, Message: "x", Code: "context_length_exceeded"}, MsgTooLong},
		{errors.New("prompt has too many tokens"), MsgTooLong},
		{errors.New("panic: secret internal trace at /home/x"), MsgGeneric},
		{nil, MsgGeneric},
		// Ollama's answer for a model it has not pulled, as the agent wraps it.
		{&ModelError{Model: "claude-sonnet-4-6", Err: &openai.APIError{HTTPStatusCode: 404, Message: `model "claude-sonnet-4-6" not found, try pulling it first`}},
			`The model "claude-sonnet-4-6" is not available on the model server. Choose one it serves with --model (WAGGLE_MODEL) or "defaultModel" in config.json.`},
		{&ModelError{Model: "gpt-5", Err: &openai.APIError{HTTPStatusCode: 404, Code: "model_not_found", Message: "The model `gpt-5` does not exist"}},
			`The model "gpt-5" is not available on the model server. Choose one it serves with --model (WAGGLE_MODEL) or "defaultModel" in config.json.`},
		// A 404 that is not about a model stays generic.
		{&openai.APIError{HTTPStatusCode: 404, Message: "route not found"}, MsgGeneric},
	}
	for _, tc := range cases {
		if got := FriendlyError(tc.err); got != tc.want {
			t.Errorf("FriendlyError(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestRetryable(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{&openai.APIError{HTTPStatusCode: 429}, true},
		{&openai.APIError{HTTPStatusCode: 500}, true},
		{&openai.RequestError{HTTPStatusCode: 502}, true},
		{&openai.APIError{HTTPStatusCode: 503}, true},
		{&openai.APIError{HTTPStatusCode: 504}, true},
		{&openai.APIError{HTTPStatusCode: 400}, false},
		{&openai.APIError{HTTPStatusCode: 401}, false},
		{timeoutErr{}, true},
		{fmt.Errorf("x: %w", syscall.ECONNREFUSED), true},
		{errors.New("unexpected EOF"), false},
	}
	for _, tc := range cases {
		if got := retryable(tc.err); got != tc.want {
			t.Errorf("retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if d, ok := parseRetryAfter("2", now); !ok || d != 2*time.Second {
		t.Errorf("seconds: %v %v", d, ok)
	}
	if d, ok := parseRetryAfter(now.Add(3*time.Second).Format(http.TimeFormat), now); !ok || d != 3*time.Second {
		t.Errorf("date: %v %v", d, ok)
	}
	if _, ok := parseRetryAfter("soon", now); ok {
		t.Error("garbage accepted")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("zero config: %v", err)
	}
	for _, c := range []Config{{Model: chatstream.Model{BaseURL: "localhost:4000"}}, {MaxSteps: -1}, {RetryBackoff: -1}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
