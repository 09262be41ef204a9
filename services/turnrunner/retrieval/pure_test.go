package retrieval

import (
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
)

func TestNormalize(t *testing.T) {
	tests := []struct{ name, raw, want string }{
		{"plain", "  The answer.\n", "The answer."},
		{"think block", "<think>reasoning\nmore</think>\n\nThe answer.", "The answer."},
		{"several blocks", "<think>a</think>One <THINK>b</Think>two", "One two"},
		{"open tag in the prompt", "reasoning the template opened\n</think>\nThe answer.", "The answer."},
		{"cut off while thinking", "The answer. <think>and then I", "The answer."},
		{"only thinking", "<think>no answer yet</think>", ""},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Normalize(tt.raw); got != tt.want {
				t.Errorf("Normalize(%q) = %q, want %q", tt.raw, got, tt.want)
			}
		})
	}
}

func TestFormatResults(t *testing.T) {
	tests := []struct {
		name string
		in   []Passage
		want string
	}{
		{"none", nil, NoResults},
		{"one", []Passage{{Content: "alpha", Score: 1}}, "[result 1, score 1.000]\nalpha"},
		{"rounds to three places", []Passage{{Content: "a", Score: 0.12345}, {Content: "b\nc", Score: 0.0005}},
			"[result 1, score 0.123]\na\n\n---\n\n[result 2, score 0.001]\nb\nc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FormatResults(tt.in); got != tt.want {
				t.Errorf("FormatResults = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestChooseShape(t *testing.T) {
	tests := []struct {
		requested, model string
		started, name    string
		recognized       bool
	}{
		{"", "claude-sonnet-4-6", ModelDefaultShape, "claude", true},
		{"", "qwen3-235b-thinking", ModelDefaultShape, "qwen-thinking", true},
		{"", "qwen2.5-72b-instruct", ModelDefaultShape, "qwen-non-thinking", true},
		{"", "gpt-4o", ModelDefaultShape, "gpt", true},
		{"", "o3-mini", ModelDefaultShape, "gpt", true},
		{"", "llama-3.1-8b", ModelDefaultShape, "generic-simple", true},
		{"bogus", "claude-sonnet-4-6", ModelDefaultShape, "claude", false},
		{"claude-gen1-v2", "claude-sonnet-4-6", ModelDefaultShape, "claude", false},
		{"generic-simple", "claude-sonnet-4-6", "generic-simple", "generic-simple", true},
	}
	for _, tt := range tests {
		c := chooseShape(tt.requested, tt.model)
		if c.startedShape() != tt.started || c.name != tt.name || c.recognized != tt.recognized {
			t.Errorf("chooseShape(%q, %q) = started %q name %q recognized %v, want %q %q %v",
				tt.requested, tt.model, c.startedShape(), c.name, c.recognized, tt.started, tt.name, tt.recognized)
		}
		if (c.requested == nil) != (tt.requested == "") {
			t.Errorf("chooseShape(%q).requested = %v", tt.requested, c.requested)
		}
	}
}

func TestEveryShapeHasAPrompt(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range protocol.AgentRunShapes {
		p := systemPrompt(s, "analyst", 5, 8)
		if !strings.HasPrefix(p, promptCore) || shapePrompts[s] == "" {
			t.Errorf("shape %q has no prompt", s)
		}
		if seen[p] {
			t.Errorf("shape %q has the same prompt as another shape", s)
		}
		seen[p] = true
		if !strings.Contains(p, `"analyst" persona`) || !strings.Contains(p, "at most 5 steps") || !strings.Contains(p, "at most 8 `retrieve` calls") {
			t.Errorf("shape %q prompt lacks persona or budget:\n%s", s, p)
		}
	}
	if len(shapePrompts) != len(protocol.AgentRunShapes) {
		t.Errorf("%d prompts for %d shapes", len(shapePrompts), len(protocol.AgentRunShapes))
	}
}

func TestChatRequestParams(t *testing.T) {
	tests := []struct {
		model         string
		maxTokens     int
		maxCompletion int
		temperature   float32
	}{
		{"claude-sonnet-4-6", 4096, 0, 0.3},
		{"claude-opus-4-6", 4096, 0, 1},
		{"qwen3-32b", 16384, 0, 0.3},
		{"Qwen-Max", 16384, 0, 0.3},
		{"minimax-m27-via-openrouter", 4096, 0, 0},
		// go-openai rejects max_tokens and temperatures for its reasoning
		// models: the cap moves, the temperature goes.
		{"gpt-5.4", 0, 4096, 0},
		{"o3-mini", 0, 4096, 0},
	}
	for _, tt := range tests {
		r := chatRequest(tt.model, nil)
		if r.MaxTokens != tt.maxTokens || r.MaxCompletionTokens != tt.maxCompletion || r.Temperature != tt.temperature {
			t.Errorf("%s: max_tokens %d max_completion_tokens %d temperature %v, want %d %d %v",
				tt.model, r.MaxTokens, r.MaxCompletionTokens, r.Temperature, tt.maxTokens, tt.maxCompletion, tt.temperature)
		}
		if !r.Stream || r.StreamOptions == nil || !r.StreamOptions.IncludeUsage || len(r.Tools) != 1 {
			t.Errorf("%s: not a streamed request with usage and the tool", tt.model)
		}
	}
}
