package transcript

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

// Timeline statuses.
const (
	StatusSuccess = "success"
	StatusError   = "error"
)

// spawnAgent is the tool whose calls own the calls made by the sub-agent.
const spawnAgent = "spawn_agent"

// TimelineEvent is one tool call on a session's timeline.
type TimelineEvent struct {
	ID            string `json:"id"`
	Timestamp     string `json:"timestamp"`
	ToolName      string `json:"toolName"`
	Status        string `json:"status"`
	DurationMs    *int64 `json:"durationMs"`
	InputPreview  string `json:"inputPreview"`
	OutputPreview string `json:"outputPreview"`
	FullInput     any    `json:"fullInput"`
	FullOutput    any    `json:"fullOutput"`
	// Children are the calls made under a spawn_agent call. It is non-nil
	// (possibly empty) exactly for spawn_agent events and is then encoded
	// even when empty, as clients test for its presence.
	Children []TimelineEvent `json:"children,omitempty"`
}

// MarshalJSON encodes Children as [] for a spawn_agent event without
// children, where omitempty would drop it.
func (e TimelineEvent) MarshalJSON() ([]byte, error) {
	type plain TimelineEvent
	out := struct {
		plain
		Children *[]TimelineEvent `json:"children,omitempty"`
	}{plain: plain(e)}
	if e.Children != nil {
		out.Children = &e.Children
	}
	return json.Marshal(out)
}

// Timeline lists the session's tool calls. When the file holds tool-event
// lines it is built from them (the recorded truth); only a file without any
// falls back to the original's guesses from assistant text.
func Timeline(f File) []TimelineEvent {
	if len(f.Tools) > 0 {
		return toolTimeline(f.Tools)
	}
	return heuristicTimeline(f, time.Now())
}

// TimelineJSON is the timeline of a session file's bytes as the JSON
// array the API returns ([] for none): both session stores answer with it.
func TimelineJSON(data []byte) (json.RawMessage, error) {
	events := Timeline(Parse(data))
	if events == nil {
		events = []TimelineEvent{}
	}
	return json.Marshal(events)
}

// inputKeys are tried in order for an event's inputPreview: the argument
// that says what the call was about.
var inputKeys = []string{"query", "path", "file_path", "command", "url", "pattern", "name", "title", "task", "prompt"}

func toolTimeline(tools []protocol.ToolEvent) []TimelineEvent {
	events := make([]TimelineEvent, len(tools))
	spawns := make(map[string]int)
	for i, t := range tools {
		events[i] = toolEvent(i, t)
		if t.Name == spawnAgent && t.CallID != "" {
			if _, dup := spawns[t.CallID]; !dup {
				spawns[t.CallID] = i
			}
		}
	}
	// A sub-agent's calls finish before its spawn_agent call does, so the
	// parent usually comes later in the file: resolve parents first, then
	// assemble the tree.
	parent := make([]int, len(tools))
	for i, t := range tools {
		parent[i] = -1
		if p, ok := spawns[t.Parent]; ok && t.Parent != "" && p != i {
			parent[i] = p
		}
	}
	for i := range parent {
		if cyclic(parent, i) {
			parent[i] = -1
		}
	}
	children := make([][]int, len(tools))
	var roots []int
	for i, p := range parent {
		if p < 0 {
			roots = append(roots, i)
		} else {
			children[p] = append(children[p], i)
		}
	}
	var build func(i int) TimelineEvent
	build = func(i int) TimelineEvent {
		e := events[i]
		if e.Children != nil {
			for _, c := range children[i] {
				e.Children = append(e.Children, build(c))
			}
		}
		return e
	}
	out := make([]TimelineEvent, 0, len(roots))
	for _, r := range roots {
		out = append(out, build(r))
	}
	return out
}

// cyclic reports whether following parents from i comes back to i.
func cyclic(parent []int, i int) bool {
	for p, steps := parent[i], 0; p >= 0 && steps <= len(parent); p, steps = parent[p], steps+1 {
		if p == i {
			return true
		}
	}
	return false
}

func toolEvent(n int, t protocol.ToolEvent) TimelineEvent {
	status := StatusSuccess
	if !toolSucceeded(t) {
		status = StatusError
	}
	e := TimelineEvent{
		ID:            "tl-" + strconv.Itoa(n),
		Timestamp:     t.Timestamp,
		ToolName:      t.Name,
		Status:        status,
		DurationMs:    t.DurationMs,
		InputPreview:  t.Name,
		OutputPreview: truncateEllipsis(t.Result, 200, 197),
		FullInput:     map[string]any{},
		FullOutput:    map[string]string{"content": t.Result},
	}
	if e.Timestamp == "" {
		e.Timestamp = protocol.Timestamp(time.Now())
	}
	if in := bytes.TrimSpace(t.Input); len(in) > 0 && in[0] == '{' {
		e.FullInput = json.RawMessage(in)
		var fields map[string]json.RawMessage
		if json.Unmarshal(in, &fields) == nil {
			for _, k := range inputKeys {
				if s := stringField(fields, k); s != "" {
					e.InputPreview = protocol.SliceUTF16(s, 0, 120)
					break
				}
			}
		}
	}
	if t.Name == spawnAgent {
		e.Children = []TimelineEvent{}
	}
	return e
}

// toolSucceeded: an error result, an error status or a denied (never run)
// call is not a success.
func toolSucceeded(t protocol.ToolEvent) bool {
	return !t.IsError && t.Status != "error" && t.Status != "denied"
}

// toolPattern maps a step text the agent loop showed while running a tool
// to that tool; an empty tool means "the captured word".
type toolPattern struct {
	re   *regexp.Regexp
	tool string
}

// toolPatterns are the original's TOOL_CONTENT_PATTERNS, in its order (the
// order matters: each matching pattern makes one event, in list order).
var toolPatterns = []toolPattern{
	{regexp.MustCompile(`Searching the web for "([^"]*)"`), "web_search"},
	{regexp.MustCompile(`Reading web page: (.+?)\.\.\.`), "web_fetch"},
	{regexp.MustCompile(`Searching memory for "([^"]*)"`), "search_memory"},
	{regexp.MustCompile(`Saving to memory`), "save_memory"},
	{regexp.MustCompile(`Checking identity`), "get_identity"},
	{regexp.MustCompile(`Checking current awareness`), "get_awareness"},
	{regexp.MustCompile(`Querying knowledge graph`), "query_knowledge"},
	{regexp.MustCompile(`Adding task: "([^"]*)"`), "add_task"},
	{regexp.MustCompile(`Updating knowledge graph`), "correct_knowledge"},
	{regexp.MustCompile(`Running command: (.+?)\.\.\.`), "bash"},
	{regexp.MustCompile(`Reading file: (.+?)\.\.\.`), "read_file"},
	{regexp.MustCompile(`Writing file: (.+?)\.\.\.`), "write_file"},
	{regexp.MustCompile(`Editing file: (.+?)\.\.\.`), "edit_file"},
	{regexp.MustCompile(`Searching for files matching "([^"]*)"`), "search_files"},
	{regexp.MustCompile(`Searching file contents for "([^"]*)"`), "search_content"},
	{regexp.MustCompile(`Checking git status`), "git_status"},
	{regexp.MustCompile(`Checking git diff`), "git_diff"},
	{regexp.MustCompile(`Checking git log`), "git_log"},
	{regexp.MustCompile(`Creating git commit`), "git_commit"},
	{regexp.MustCompile(`Managing git branches`), "git_branch"},
	{regexp.MustCompile(`Creating plan: "([^"]*)"`), "create_plan"},
	{regexp.MustCompile(`Adding plan step`), "add_plan_step"},
	{regexp.MustCompile(`Executing plan step`), "execute_step"},
	{regexp.MustCompile(`Showing current plan`), "show_plan"},
	{regexp.MustCompile(`Generating document: (.+?)\.\.\.`), "generate_docx"},
	{regexp.MustCompile(`Generating spreadsheet: (.+?)\.\.\.`), "generate_xlsx"},
	{regexp.MustCompile(`Reading document: (.+?)\.\.\.`), "read_document"},
	{regexp.MustCompile(`Checking installed skills`), "list_skills"},
	{regexp.MustCompile(`Creating skill: (.+?)\.\.\.`), "create_skill"},
	{regexp.MustCompile(`Deleting skill: (.+?)\.\.\.`), "delete_skill"},
	{regexp.MustCompile(`Reading skill: (.+?)\.\.\.`), "read_skill"},
	{regexp.MustCompile(`Searching for skills: "([^"]*)"`), "search_skills"},
	{regexp.MustCompile(`Looking for relevant skills`), "suggest_skill"},
	{regexp.MustCompile(`Searching for capabilities: "([^"]*)"`), "acquire_capability"},
	{regexp.MustCompile(`Installing capability: (.+?)\.\.\.`), "install_capability"},
	{regexp.MustCompile(`Analyzing task and composing workflow`), "compose_workflow"},
	{regexp.MustCompile(`Running workflow`), "orchestrate_workflow"},
	{regexp.MustCompile(`Spawning sub-agent "([^"]*)"`), spawnAgent},
	{regexp.MustCompile(`Checking sub-agents`), "list_agents"},
	{regexp.MustCompile(`Getting sub-agent result`), "get_agent_result"},
	{regexp.MustCompile(`Using (\w+)\.\.\.`), ""},
}

var toolErrorRe = regexp.MustCompile(`(?i)error|failed|could not|unable to`)

// heuristicTimeline is the original's reconstruction from assistant text: a
// user message closes the current sub-agent; each pattern that matches an
// assistant message makes one event, nested under the open spawn_agent.
func heuristicTimeline(f File, now time.Time) []TimelineEvent {
	events := []TimelineEvent{}
	n := 0
	sub := -1 // index in events of the open spawn_agent event
	for i := range f.info {
		l := &f.info[i]
		if !l.isMessage() {
			continue
		}
		if l.role == "user" {
			sub = -1
			continue
		}
		if l.role != "assistant" {
			continue
		}
		ts := l.timestamp
		if !l.hasTimestamp {
			ts = protocol.Timestamp(now)
		}
		status := StatusSuccess
		if toolErrorRe.MatchString(l.content) {
			status = StatusError
		}
		for _, p := range toolPatterns {
			m := p.re.FindStringSubmatch(l.content)
			if m == nil {
				continue
			}
			capture := ""
			if len(m) > 1 {
				capture = m[1]
			}
			tool := p.tool
			if tool == "" {
				tool = capture
			}
			e := TimelineEvent{
				ID:            "tl-" + strconv.Itoa(n),
				Timestamp:     ts,
				ToolName:      tool,
				Status:        status,
				InputPreview:  tool,
				OutputPreview: truncateEllipsis(l.content, 200, 197),
				FullInput:     map[string]string{},
				FullOutput:    map[string]string{"content": l.content},
			}
			n++
			if capture != "" {
				e.InputPreview = protocol.SliceUTF16(capture, 0, 120)
				e.FullInput = map[string]string{"query": capture}
			}
			switch {
			case tool == spawnAgent:
				e.Children = []TimelineEvent{}
				events = append(events, e)
				sub = len(events) - 1
			case sub >= 0:
				events[sub].Children = append(events[sub].Children, e)
			default:
				events = append(events, e)
			}
		}
	}
	return events
}
