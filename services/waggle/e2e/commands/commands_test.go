// Package commands holds the black-box tests of slash commands, agent info
// (status, cost, model, active agents) and agent groups: a real waggle app,
// real HTTP, real SSE bytes.
package commands

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

type execReply struct {
	Result  string `json:"result"`
	Command string `json:"command"`
}

// execute posts a command and returns the reply of a 200.
func execute(t *testing.T, srv *waggletest.Server, body any) execReply {
	t.Helper()
	var rep execReply
	if st := srv.JSON(http.MethodPost, "/api/commands/execute", body, &rep); st != 200 {
		t.Fatalf("execute %v: status %d", body, st)
	}
	return rep
}

// rawJSON returns a response's status and body.
func rawJSON(t *testing.T, srv *waggletest.Server, method, path string, body any) (int, string) {
	t.Helper()
	resp := srv.Do(method, path, body)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(data))
}

func TestExecuteRejects(t *testing.T) {
	srv := waggletest.Start(t)
	tests := []struct {
		name       string
		body       any
		wantStatus int
		wantBody   string
	}{
		{"empty object", map[string]any{}, 400, `{"error":"command is required"}`},
		{"empty command", map[string]any{"command": ""}, 400, `{"error":"command is required"}`},
		{"null command", map[string]any{"command": nil}, 400, `{"error":"command is required"}`},
		{"number command", map[string]any{"command": 5}, 400, `{"error":"command is required"}`},
		{"empty body", "", 400, `{"error":"command is required"}`},
		{"unsafe workspace", map[string]any{"command": "/help", "workspaceId": "../etc"}, 400,
			`{"statusCode":400,"error":"Bad Request","message":"Invalid workspaceId: contains illegal characters"}`},
		// The workspace is resolved (and a non-string one refused) before
		// the handler runs, with the safe-segment rule's answer.
		{"workspace not a string", map[string]any{"command": "/help", "workspaceId": 3}, 400,
			`{"statusCode":400,"error":"Bad Request","message":"Invalid workspaceId: contains illegal characters"}`},
		{"malformed json", "{", 400,
			`{"statusCode":400,"code":"FST_ERR_CTP_INVALID_JSON_BODY","error":"Bad Request","message":"Body is not valid JSON but content-type is set to 'application/json'"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, body := rawJSON(t, srv, http.MethodPost, "/api/commands/execute", tt.body)
			if st != tt.wantStatus || body != tt.wantBody {
				t.Fatalf("got %d %s, want %d %s", st, body, tt.wantStatus, tt.wantBody)
			}
		})
	}
}

// TestReferenceScenarios re-runs the original's commands.test.ts (reference
// §7.2) over HTTP. Reroute results come back raw, prefix included.
func TestReferenceScenarios(t *testing.T) {
	srv := waggletest.Start(t)
	tests := []struct {
		command string
		want    []string
		prefix  string
	}{
		{"/help", []string{"Available Commands", "/catchup", "/memory", "/skills"}, "## Available Commands"},
		{"/skills", []string{"Active Skills", "No skills are currently active in this workspace."}, "## Active Skills"},
		{"/memory architecture decisions", []string{"Memory Search", "architecture decisions"}, `## Memory Search: "architecture decisions"`},
		{"/catchup", []string{"Catch-Up Briefing"}, "## Catch-Up Briefing"},
		{"/research quantum computing", []string{"Research the following topic", "quantum computing"}, protocol.RerouteAgentLoopPrefix},
		{"/decide Should we use PostgreSQL or MongoDB?", []string{"decision", "PostgreSQL or MongoDB"}, protocol.RerouteAgentLoopPrefix},
		{"/nonexistent", []string{"Unknown command", "`/nonexistent`", "`/catchup`"}, "Unknown command `/nonexistent`."},
		{"/spawn researcher find papers", []string{"specialist researcher", "find papers"}, protocol.RerouteAgentLoopPrefix},
		{"  /HELP  ", []string{"Available Commands"}, "## Available Commands"},
		{"hello", []string{"Not a command."}, "Not a command."},
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			rep := execute(t, srv, map[string]any{"command": tt.command})
			if rep.Command != tt.command {
				t.Errorf("command = %q, want %q", rep.Command, tt.command)
			}
			if !strings.HasPrefix(rep.Result, tt.prefix) {
				t.Errorf("result does not start with %q: %q", tt.prefix, rep.Result)
			}
			for _, w := range tt.want {
				if !strings.Contains(rep.Result, w) {
					t.Errorf("result lacks %q: %q", w, rep.Result)
				}
			}
		})
	}
	// The workspace reaches reroute prompts that quote it.
	rep := execute(t, srv, map[string]any{"command": "/settings", "workspaceId": "ws-9"})
	if !strings.Contains(rep.Result, `workspace "ws-9"`) {
		t.Errorf("/settings in ws-9: %q", rep.Result)
	}
	// Without workspaceId the workspace is "default".
	if rep := execute(t, srv, map[string]any{"command": "/settings"}); !strings.Contains(rep.Result, `workspace "default"`) {
		t.Errorf("/settings without workspace: %q", rep.Result)
	}
}

func TestCommandList(t *testing.T) {
	srv := waggletest.Start(t)
	type info struct {
		Name        string   `json:"name"`
		Aliases     []string `json:"aliases"`
		Usage       string   `json:"usage"`
		Description string   `json:"description"`
	}
	var all []info
	if st := srv.JSON(http.MethodGet, "/api/commands", nil, &all); st != 200 {
		t.Fatalf("status %d", st)
	}
	if len(all) != 23 {
		t.Fatalf("%d commands, want 23", len(all))
	}
	byName := map[string]info{}
	for _, c := range all {
		if c.Usage == "" || c.Description == "" || c.Aliases == nil {
			t.Errorf("incomplete entry %+v", c)
		}
		byName[c.Name] = c
	}
	if all[0].Name != "catchup" || strings.Join(all[0].Aliases, ",") != "catch-up,recap" || all[0].Usage != "/catchup" {
		t.Errorf("first entry %+v", all[0])
	}
	if all[22].Name != "marketplace" {
		t.Errorf("last entry %+v", all[22])
	}
	// "?" cannot be typed as a command ("/?" is not one), so it is not offered.
	if h := byName["help"]; strings.Join(h.Aliases, ",") != "commands" {
		t.Errorf("help aliases %v", h.Aliases)
	}
	if r := byName["research"]; r.Usage != "/research <topic>" {
		t.Errorf("research usage %q", r.Usage)
	}
	var some []info
	srv.JSON(http.MethodGet, "/api/commands?q=/REC", nil, &some)
	var names []string
	for _, c := range some {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "catchup,memory" {
		t.Errorf("?q=/REC = %v, want catchup (recap), memory (recall)", names)
	}
	var none []info
	srv.JSON(http.MethodGet, "/api/commands?q=zzzz", nil, &none)
	if none == nil || len(none) != 0 {
		t.Errorf("?q=zzzz = %#v, want []", none)
	}
}

// TestSlashCommandsThroughChat: a command sent to /api/chat streams its
// text as tokens (split on spaces, trailing space each) and a zero-usage
// done, in echo mode too, and is persisted like any reply.
func TestSlashCommandsThroughChat(t *testing.T) {
	// A 1ms token pace: with none, the gateway's relay has been seen to skip
	// a run of events of a 234-token reply under -race and load (the stream
	// holds them all); reported to the gateway's owner.
	srv := waggletest.Start(t, echoDelay(time.Millisecond))
	help := execute(t, srv, map[string]any{"command": "/help"}).Result
	requiresAI := "**/research requires AI** — This command needs a working LLM connection.\n\nTo get AI replies, set WAGGLE_LLM_URL and save any key at /api/vault."
	tests := []struct {
		message string
		want    string
	}{
		{"/help", help},
		{"/research x", requiresAI},
		{"/focus Go", "## Focus: Go\n\nContext narrowed to **Go**. Subsequent responses will prioritize this topic.\n\n> Tip: Use /focus again to change, or just ask about anything else to broaden context."},
	}
	for i, tt := range tests {
		t.Run(tt.message, func(t *testing.T) {
			session := "cmd-" + string(rune('a'+i))
			evs := srv.Chat(map[string]any{"message": tt.message, "workspace": "default", "session": session}).All(t)
			if len(evs) < 2 {
				t.Fatalf("events %v", waggletest.Names(evs))
			}
			pieces := strings.Split(tt.want, " ")
			if len(evs) != len(pieces)+1 {
				t.Fatalf("%d events, want %d tokens + done; last %s %s", len(evs), len(pieces), evs[len(evs)-1].Name, evs[len(evs)-1].Data)
			}
			for k, p := range pieces {
				if evs[k].Name != "token" || evs[k].Content() != p+" " {
					t.Fatalf("event %d = %s %q, want token %q", k, evs[k].Name, evs[k].Content(), p+" ")
				}
			}
			last := evs[len(evs)-1]
			if last.Name != "done" {
				t.Fatalf("last event %s", last.Name)
			}
			want := `{"content":` + jsonStr(tt.want) + `,"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0},"toolsUsed":[]}`
			if string(last.Data) != want {
				t.Fatalf("done = %s\nwant %s", last.Data, want)
			}
			var h struct {
				Messages []struct{ Role, Content string }
			}
			srv.JSON(http.MethodGet, "/api/history?workspace=default&session="+session, nil, &h)
			if len(h.Messages) != 2 || h.Messages[0].Content != tt.message || h.Messages[1].Content != tt.want {
				t.Fatalf("history %+v", h.Messages)
			}
		})
	}
}

func jsonStr(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// busConn starts the app with a NATS listener and connects to it, so a
// test can play another service (e.g. a runner recording usage).
func startWithBus(t *testing.T, opts ...waggletest.Option) (*waggletest.Server, func() *nats.Conn) {
	t.Helper()
	opts = append(opts, waggletest.WithConfig(func(c *app.Config) { c.NATSListen = "127.0.0.1:0" }))
	srv := waggletest.Start(t, opts...)
	connect := func() *nats.Conn {
		t.Helper()
		return srv.DialNATS()
	}
	return srv, connect
}

func busRequest[Req, Rep any](t *testing.T, nc *nats.Conn, ep protocol.Endpoint[Req, Rep], req Req) Rep {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rep, err := bus.Call(ctx, nc, ep, req)
	if err != nil {
		t.Fatalf("%s: %v", ep.Subject, err)
	}
	return rep
}

// TestMemorySearchInCommands saves memories through the store and finds
// them with /memory. It needs the store's memory endpoints.
func TestMemorySearchInCommands(t *testing.T) {
	srv, connect := startWithBus(t)
	nc := connect()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := bus.Call(ctx, nc, protocol.SaveMemory,
		protocol.MemorySaveRequest{Workspace: "mem-ws", Content: "We chose PostgreSQL for the architecture decisions log"})
	if protocol.KindOf(err) == protocol.Unavailable {
		t.Skip("the session store does not serve memories yet")
	}
	if err != nil {
		t.Fatal(err)
	}
	rep := execute(t, srv, map[string]any{"command": "/memory architecture decisions", "workspaceId": "mem-ws"})
	want := "## Memory Search: \"architecture decisions\"\n\n1. We chose PostgreSQL for the architecture decisions log"
	if !strings.HasPrefix(rep.Result, want) {
		t.Fatalf("result %q, want prefix %q", rep.Result, want)
	}
	if rep := execute(t, srv, map[string]any{"command": "/memory zebra quokka", "workspaceId": "mem-ws"}); !strings.HasSuffix(rep.Result, "No relevant memories found.") {
		t.Fatalf("no match: %q", rep.Result)
	}
}
