package transcript

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

// toolLine is one tool-event line.
func toolLine(callID, name, input, result, status, parent string, isError bool, durationMs int) string {
	m := map[string]any{
		"type": "tool", "turnId": "turn-1", "callId": callID, "name": name,
		"input": json.RawMessage(input), "result": result, "isError": isError,
		"status": status, "timestamp": "2026-03-19T10:0" + callID[len(callID)-1:] + ":00.000Z",
	}
	if parent != "" {
		m["parent"] = parent
	}
	if durationMs > 0 {
		m["durationMs"] = durationMs
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func TestTimelineFromToolEvents(t *testing.T) {
	long := strings.Repeat("r", 250)
	data := jsonl(metaLine,
		msg("user", "Research AI news and save it", "2026-03-19T10:00:00.000Z"),
		// Sub-agent calls complete (and are written) before their spawn_agent.
		toolLine("c1", "web_search", `{"query":"AI news","limit":5}`, long, "success", "c3", false, 120),
		toolLine("c2", "save_memory", `{"content":"notes"}`, "Saved", "success", "c3", false, 0),
		toolLine("c3", "spawn_agent", `{"name":"researcher","task":"find news"}`, "done", "success", "", false, 900),
		toolLine("c4", "bash", `{"command":"rm -rf /tmp/x"}`, "Denied by user", "denied", "", false, 0),
		toolLine("c5", "read_file", `{"path":"missing.ts"}`, "Error: not found", "error", "", true, 3),
		toolLine("c6", "spawn_agent", `{"name":"idle"}`, "nothing", "success", "", false, 0),
		toolLine("c7", "list_agents", `null`, "[]", "success", "c9", false, 0),
		msg("assistant", "Done. Searching the web for \"ignored\" text is not a tool here.", ""),
	)
	got := mustJSON(t, Timeline(Parse(data)))
	want := `[` +
		`{"id":"tl-2","timestamp":"2026-03-19T10:03:00.000Z","toolName":"spawn_agent","status":"success","durationMs":900,"inputPreview":"researcher","outputPreview":"done","fullInput":{"name":"researcher","task":"find news"},"fullOutput":{"content":"done"},"children":[` +
		`{"id":"tl-0","timestamp":"2026-03-19T10:01:00.000Z","toolName":"web_search","status":"success","durationMs":120,"inputPreview":"AI news","outputPreview":"` + strings.Repeat("r", 197) + `...","fullInput":{"query":"AI news","limit":5},"fullOutput":{"content":"` + long + `"}},` +
		`{"id":"tl-1","timestamp":"2026-03-19T10:02:00.000Z","toolName":"save_memory","status":"success","durationMs":null,"inputPreview":"save_memory","outputPreview":"Saved","fullInput":{"content":"notes"},"fullOutput":{"content":"Saved"}}]},` +
		`{"id":"tl-3","timestamp":"2026-03-19T10:04:00.000Z","toolName":"bash","status":"error","durationMs":null,"inputPreview":"rm -rf /tmp/x","outputPreview":"Denied by user","fullInput":{"command":"rm -rf /tmp/x"},"fullOutput":{"content":"Denied by user"}},` +
		`{"id":"tl-4","timestamp":"2026-03-19T10:05:00.000Z","toolName":"read_file","status":"error","durationMs":3,"inputPreview":"missing.ts","outputPreview":"Error: not found","fullInput":{"path":"missing.ts"},"fullOutput":{"content":"Error: not found"}},` +
		`{"id":"tl-5","timestamp":"2026-03-19T10:06:00.000Z","toolName":"spawn_agent","status":"success","durationMs":null,"inputPreview":"idle","outputPreview":"nothing","fullInput":{"name":"idle"},"fullOutput":{"content":"nothing"},"children":[]},` +
		`{"id":"tl-6","timestamp":"2026-03-19T10:07:00.000Z","toolName":"list_agents","status":"success","durationMs":null,"inputPreview":"list_agents","outputPreview":"[]","fullInput":{},"fullOutput":{"content":"[]"}}` +
		`]`
	if got != want {
		t.Errorf("timeline\n got %s\nwant %s", got, want)
	}
}

func TestTimelineNestedSpawnAndCycles(t *testing.T) {
	data := jsonl(metaLine,
		toolLine("c1", "web_fetch", `{"url":"https://x"}`, "page", "success", "c2", false, 0),
		toolLine("c2", "spawn_agent", `{"name":"inner"}`, "ok", "success", "c3", false, 0),
		toolLine("c3", "spawn_agent", `{"name":"outer"}`, "ok", "success", "", false, 0),
		// Two spawn_agent calls naming each other: neither may vanish.
		toolLine("c4", "spawn_agent", `{}`, "a", "success", "c5", false, 0),
		toolLine("c5", "spawn_agent", `{}`, "b", "success", "c4", false, 0),
	)
	events := Timeline(Parse(data))
	if len(events) != 2 || countEvents(events) != 5 {
		t.Fatalf("want 2 top-level events holding all 5: %s", mustJSON(t, events))
	}
	outer := events[0]
	if outer.ID != "tl-2" || len(outer.Children) != 1 || outer.Children[0].ID != "tl-1" ||
		len(outer.Children[0].Children) != 1 || outer.Children[0].Children[0].InputPreview != "https://x" {
		t.Errorf("nesting = %s", mustJSON(t, outer))
	}
	// The cycle is broken at its first member in file order.
	if events[1].ID != "tl-3" || len(events[1].Children) != 1 || events[1].Children[0].ID != "tl-4" {
		t.Errorf("cycle members = %s", mustJSON(t, events[1]))
	}
}

func countEvents(ev []TimelineEvent) int {
	n := len(ev)
	for _, e := range ev {
		n += countEvents(e.Children)
	}
	return n
}

func TestTimelineHeuristics(t *testing.T) {
	const ts = "2026-03-19T10:05:00.000Z"
	tests := []struct {
		name  string
		lines []string
		check func(t *testing.T, ev []TimelineEvent)
	}{
		{"empty file", nil, func(t *testing.T, ev []TimelineEvent) {
			if ev == nil || len(ev) != 0 {
				t.Errorf("want empty non-nil, got %#v", ev)
			}
		}},
		{"web search and read file", []string{metaLine,
			msg("assistant", `Searching the web for "AI news"... found it`, ts),
			msg("assistant", "Reading file: src/index.ts... done", ts)},
			func(t *testing.T, ev []TimelineEvent) {
				if len(ev) != 2 || ev[0].ToolName != "web_search" || ev[0].Status != "success" || !strings.Contains(ev[0].InputPreview, "AI news") ||
					ev[1].ToolName != "read_file" || !strings.Contains(ev[1].InputPreview, "src/index.ts") {
					t.Errorf("events = %+v", ev)
				}
				if ev[0].ID != "tl-0" || ev[1].ID != "tl-1" {
					t.Errorf("ids = %s, %s", ev[0].ID, ev[1].ID)
				}
				if ev[0].Timestamp != ts {
					t.Errorf("timestamp = %q, want %q", ev[0].Timestamp, ts)
				}
				if got := mustJSON(t, ev[0].FullInput); got != `{"query":"AI news"}` {
					t.Errorf("fullInput = %s", got)
				}
			}},
		{"only user messages", []string{metaLine, msg("user", `Searching the web for "x"`, ts)}, func(t *testing.T, ev []TimelineEvent) {
			if len(ev) != 0 {
				t.Errorf("events = %+v", ev)
			}
		}},
		{"sub-agent nesting until the next user message", []string{metaLine,
			msg("assistant", `Spawning sub-agent "researcher" (researcher)...`, ts),
			msg("assistant", `Searching the web for "x"... and Saving to memory`, ts),
			msg("user", "thanks", ts),
			msg("assistant", "Checking git status", ts)},
			func(t *testing.T, ev []TimelineEvent) {
				if len(ev) != 2 || ev[0].ToolName != "spawn_agent" || ev[0].InputPreview != "researcher" || len(ev[0].Children) != 2 ||
					ev[0].Children[0].ToolName != "web_search" || ev[0].Children[1].ToolName != "save_memory" || ev[1].ToolName != "git_status" {
					t.Fatalf("events = %s", mustJSON(t, ev))
				}
				if ev[1].Children != nil || strings.Contains(mustJSON(t, ev[1]), "children") {
					t.Errorf("non-spawn event has children: %s", mustJSON(t, ev[1]))
				}
			}},
		{"error wording marks the event", []string{metaLine,
			msg("assistant", "Reading file: missing.ts... Error: file not found, unable to read.", ts)},
			func(t *testing.T, ev []TimelineEvent) {
				if len(ev) != 1 || ev[0].ToolName != "read_file" || ev[0].Status != "error" {
					t.Errorf("events = %+v", ev)
				}
			}},
		{"patterns fire in list order, not text order; dynamic tool", []string{metaLine,
			msg("assistant", "Using custom_tool... then Checking identity", ts)},
			func(t *testing.T, ev []TimelineEvent) {
				if len(ev) != 2 || ev[0].ToolName != "get_identity" || ev[0].InputPreview != "get_identity" || mustJSON(t, ev[0].FullInput) != "{}" ||
					ev[1].ToolName != "custom_tool" || ev[1].InputPreview != "custom_tool" {
					t.Errorf("events = %s", mustJSON(t, ev))
				}
			}},
		{"long content preview is cut to 197 + ...", []string{metaLine,
			msg("assistant", "Saving to memory "+strings.Repeat("m", 300), ts)},
			func(t *testing.T, ev []TimelineEvent) {
				if len(ev) != 1 || protocol.UTF16Len(ev[0].OutputPreview) != 200 || !strings.HasSuffix(ev[0].OutputPreview, "m...") {
					t.Errorf("outputPreview = %q", ev[0].OutputPreview)
				}
			}},
		{"missing timestamp: now", []string{metaLine, msg("assistant", "Checking git log", "")},
			func(t *testing.T, ev []TimelineEvent) {
				got, err := time.Parse(time.RFC3339, ev[0].Timestamp)
				if err != nil || time.Since(got) > time.Minute {
					t.Errorf("timestamp = %q", ev[0].Timestamp)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, Timeline(Parse(jsonl(tt.lines...))))
		})
	}
}

func TestTimelineEmptyFileEncodesAsArray(t *testing.T) {
	if got := mustJSON(t, Timeline(Parse(nil))); got != "[]" {
		t.Errorf("got %s, want []", got)
	}
}
