package commands

import (
	"net/http"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

type usage struct {
	TotalInputTokens  int                    `json:"totalInputTokens"`
	TotalOutputTokens int                    `json:"totalOutputTokens"`
	EstimatedCost     float64                `json:"estimatedCost"`
	Turns             int                    `json:"turns"`
	ByModel           map[string]modelTotals `json:"byModel"`
}

type modelTotals struct {
	Input  int     `json:"input"`
	Output int     `json:"output"`
	Cost   float64 `json:"cost"`
}

type statusBody struct {
	Running       bool    `json:"running"`
	Model         string  `json:"model"`
	TokensUsed    int     `json:"tokensUsed"`
	EstimatedCost float64 `json:"estimatedCost"`
	Turns         int     `json:"turns"`
	Usage         usage   `json:"usage"`
}

type costBody struct {
	Summary string `json:"summary"`
	usage
}

func TestModelGetPut(t *testing.T) {
	srv := waggletest.Start(t)
	var m struct{ Model string }
	if st := srv.JSON(http.MethodGet, "/api/agent/model", nil, &m); st != 200 || m.Model != "claude-sonnet-4-6" {
		t.Fatalf("default model: %d %+v", st, m)
	}
	for _, body := range []any{map[string]any{}, map[string]any{"model": ""}, map[string]any{"model": nil}, map[string]any{"model": 4}, ""} {
		if st, got := rawJSON(t, srv, http.MethodPut, "/api/agent/model", body); st != 400 || got != `{"error":"model is required"}` {
			t.Errorf("PUT %v: %d %s", body, st, got)
		}
	}
	if st, got := rawJSON(t, srv, http.MethodPut, "/api/agent/model", map[string]any{"model": "gpt-5.4"}); st != 200 || got != `{"ok":true,"model":"gpt-5.4"}` {
		t.Fatalf("PUT gpt-5.4: %d %s", st, got)
	}
	srv.Restart()
	if st, got := rawJSON(t, srv, http.MethodGet, "/api/agent/model", nil); st != 200 || got != `{"model":"gpt-5.4"}` {
		t.Fatalf("model after restart: %d %s", st, got)
	}
	var s statusBody
	srv.JSON(http.MethodGet, "/api/agent/status", nil, &s)
	if !s.Running || s.Model != "gpt-5.4" {
		t.Fatalf("status %+v", s)
	}
}

// TestUsageLedger records two turns' usage as a runner does (over the
// bus), and checks the sums over HTTP, across a restart and a reset.
func TestUsageLedger(t *testing.T) {
	srv, connect := startWithBus(t)
	var s statusBody
	if st := srv.JSON(http.MethodGet, "/api/agent/status", nil, &s); st != 200 || s.Turns != 0 || s.TokensUsed != 0 || s.Usage.ByModel == nil {
		t.Fatalf("fresh status %d %+v", st, s)
	}
	if st, got := rawJSON(t, srv, http.MethodGet, "/api/agent/cost", nil); st != 200 ||
		got != `{"summary":"Tokens: 0 in / 0 out (0 turns) | Est. cost: $0.0000","totalInputTokens":0,"totalOutputTokens":0,"estimatedCost":0,"turns":0,"byModel":{}}` {
		t.Fatalf("fresh cost %d %s", st, got)
	}
	nc := connect()
	for _, r := range []protocol.UsageRecord{
		{Workspace: "default", Session: "s1", TurnID: "t1", Model: "claude-sonnet-4-6", InputTokens: 1200, OutputTokens: 300, Cost: 0.0081},
		{Workspace: "default", Session: "s1", TurnID: "t2", Model: "gpt-5.4", InputTokens: 800, OutputTokens: 200, Cost: 0.00126},
	} {
		busRequest(t, nc, protocol.RecordUsage, r)
	}
	check := func(when string, in, out, turns int, cost float64, summary string) {
		t.Helper()
		var s statusBody
		srv.JSON(http.MethodGet, "/api/agent/status", nil, &s)
		if s.TokensUsed != in+out || s.Turns != turns || s.Usage.TotalInputTokens != in || s.Usage.TotalOutputTokens != out ||
			!near(s.EstimatedCost, cost) || !near(s.Usage.EstimatedCost, cost) {
			t.Fatalf("%s: status %+v", when, s)
		}
		var c costBody
		srv.JSON(http.MethodGet, "/api/agent/cost", nil, &c)
		if c.Summary != summary || c.Turns != turns || c.TotalInputTokens != in {
			t.Fatalf("%s: cost %+v, want summary %q", when, c, summary)
		}
	}
	check("two turns", 2000, 500, 2, 0.00936, "Tokens: 2000 in / 500 out (2 turns) | Est. cost: $0.0094")
	var s2 statusBody
	srv.JSON(http.MethodGet, "/api/agent/status", nil, &s2)
	if m := s2.Usage.ByModel["gpt-5.4"]; m.Input != 800 || m.Output != 200 || !near(m.Cost, 0.00126) || len(s2.Usage.ByModel) != 2 {
		t.Fatalf("byModel %+v", s2.Usage.ByModel)
	}

	srv.Restart()
	check("after restart", 2000, 500, 2, 0.00936, "Tokens: 2000 in / 500 out (2 turns) | Est. cost: $0.0094")

	if st, got := rawJSON(t, srv, http.MethodPost, "/api/agent/cost/reset", nil); st != 200 || !strings.Contains(got, `"ok":true,"message":"Cost tracking reset","resetAt":"`) {
		t.Fatalf("reset %d %s", st, got)
	}
	check("after reset", 0, 0, 0, 0, "Tokens: 0 in / 0 out (0 turns) | Est. cost: $0.0000")
	srv.Restart()
	check("reset survives restart", 0, 0, 0, 0, "Tokens: 0 in / 0 out (0 turns) | Est. cost: $0.0000")
	nc = connect()
	busRequest(t, nc, protocol.RecordUsage,
		protocol.UsageRecord{Model: "m", InputTokens: 10, OutputTokens: 5, Cost: 0.5})
	check("record after reset", 10, 5, 1, 0.5, "Tokens: 10 in / 5 out (1 turns) | Est. cost: $0.5000")
}

func TestAgentsActiveIdle(t *testing.T) {
	srv := waggletest.Start(t)
	if st, got := rawJSON(t, srv, http.MethodGet, "/api/agents/active", nil); st != 200 || got != `{"workers":[],"active":[],"subAgents":[]}` {
		t.Fatalf("%d %s", st, got)
	}
}

func near(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 }

// TestUsageFromChatTurns runs two real agent-loop turns against a scripted
// model and reads their usage back from the ledger, also after a restart.
func TestUsageFromChatTurns(t *testing.T) {
	llm := llmtest.New(llmtest.WithResponses(
		llmtest.Response{Steps: llmtest.Steps(llmtest.Content("one"), llmtest.WithUsage(100, 10))},
		llmtest.Response{Steps: llmtest.Steps(llmtest.Content("two"), llmtest.WithUsage(200, 20))},
	))
	llm.Start()
	t.Cleanup(llm.Close)
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()))
	for _, m := range []string{"first", "second"} {
		evs := srv.Chat(map[string]any{"message": m, "workspace": "default", "session": "usage"}).All(t)
		var done struct {
			Usage struct {
				InputTokens int `json:"inputTokens"`
			} `json:"usage"`
		}
		evs[len(evs)-1].Decode(t, &done)
		if evs[len(evs)-1].Name != "done" || done.Usage.InputTokens == 0 {
			t.Fatalf("turn %q did not run the agent loop: %s %s", m, evs[len(evs)-1].Name, evs[len(evs)-1].Data)
		}
	}
	check := func(when string) {
		t.Helper()
		var s statusBody
		srv.JSON(http.MethodGet, "/api/agent/status", nil, &s)
		if s.Turns != 2 || s.Usage.TotalInputTokens != 300 || s.Usage.TotalOutputTokens != 30 || s.TokensUsed != 330 {
			t.Fatalf("%s: status %+v", when, s)
		}
	}
	check("after two turns")
	srv.Restart()
	check("after restart")
}
