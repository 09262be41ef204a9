package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/waggle-os/core/libs/injection"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/chatstream"
)

// Tool is a function the model may call.
type Tool interface {
	// Name is the function name the model uses.
	Name() string
	// Description tells the model what the tool does.
	Description() string
	// Schema is the JSON schema of the arguments object; nil means none.
	Schema() json.RawMessage
	// Call runs the tool with the model's arguments (a JSON object). A
	// returned error is reported to the model as the tool's result.
	Call(ctx context.Context, input json.RawMessage) (string, error)
}

// Decoder is implemented by tools that decode their arguments themselves,
// once and strictly, before the gate sees them (the built-in tools). Decode
// returns the canonical JSON of the decoded value — what the tool event
// and the gate see — and a function that runs exactly that value; an error
// refuses the call as invalid arguments, before any approval.
type Decoder interface {
	Decode(input json.RawMessage) (canonical json.RawMessage, run func(context.Context) (string, error), err error)
}

// ToolCall is one call the gate is asked about.
type ToolCall struct {
	ID    string
	Name  string
	Input json.RawMessage
}

// Verdict is a gate's decision on a tool call.
type Verdict struct {
	// Allow lets the call run.
	Allow bool
	// ModelText is what the model receives instead of a result when the
	// call is denied, e.g. "[BLOCKED] User denied write_file".
	ModelText string
	// ToolResult makes a denial visible as a tool_result event carrying
	// ModelText (governance blocks do; user denials do not).
	ToolResult bool
}

// Gate decides whether a tool call may run; it may block (waiting for a
// human) and emit its own events (approval_required, step) meanwhile.
type Gate interface {
	Check(ctx context.Context, call ToolCall) (Verdict, error)
}

// Recall finds memories relevant to a query, best first. The frames'
// Mind, Importance and Created reach the prompt (see Request.BuildPrompt).
type Recall interface {
	Search(ctx context.Context, query string) ([]protocol.MemoryFrame, error)
}

// AutoRecallTool is the name of the tool event that records a turn's
// auto-recall (not a tool the model can call).
const AutoRecallTool = "auto_recall"

const (
	// maxIdenticalCalls is how often one tool may run with the same
	// arguments in a turn before the call is refused as a loop.
	maxIdenticalCalls = 3
	recallPreview     = 3
)

var fileActions = map[string]string{"write_file": "write", "edit_file": "edit", "generate_docx": "generate", "generate_xlsx": "generate"}

// isErrorText is the contract's isError rule.
func isErrorText(s string) bool {
	return strings.HasPrefix(s, "Error:") || strings.HasPrefix(s, "Error ")
}

// runTools runs a step's tool calls in order and returns the messages that
// continue the transcript: the assistant's tool_calls and one result each.
func (r *run) runTools(ctx context.Context, sr stepResult) ([]openai.ChatCompletionMessage, error) {
	assistant := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: sr.Content}
	for _, pc := range sr.Calls {
		args := string(pc.Args)
		if strings.TrimSpace(args) == "" {
			args = "{}"
		}
		assistant.ToolCalls = append(assistant.ToolCalls, openai.ToolCall{
			ID: pc.ID, Type: openai.ToolTypeFunction,
			Function: openai.FunctionCall{Name: pc.Name, Arguments: args},
		})
	}
	out := []openai.ChatCompletionMessage{assistant}
	for _, pc := range sr.Calls {
		result, err := r.execute(ctx, pc)
		if err != nil {
			return nil, err
		}
		out = append(out, toolMessage(pc.ID, result))
	}
	return out, nil
}

// execute runs one call and returns what the model receives. Only a
// cancelled ctx is an error; every other failure is a result text.
func (r *run) execute(ctx context.Context, pc *chatstream.ToolCall) (string, error) {
	raw := bytes.TrimSpace(pc.Args)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	tool, known := r.tools[pc.Name]
	input, run, err := decodeArgs(tool, known && !r.blocked[pc.Name], raw)
	if err != nil {
		// Like the original: the model learns its mistake, the client sees
		// nothing, and nobody is asked to approve arguments that cannot run.
		return fmt.Sprintf("Error: Invalid arguments for %s: %v", pc.Name, err), nil
	}
	var fields map[string]any
	_ = json.Unmarshal(input, &fields)

	r.step(DescribeToolUse(pc.Name, fields))
	r.emit(protocol.EventTool, ToolData{Name: pc.Name, Input: input})
	r.res.ToolsUsed = append(r.res.ToolsUsed, pc.Name)
	r.starts[pc.Name] = append(r.starts[pc.Name], time.Now())
	ev := protocol.ToolEvent{TurnID: r.req.TurnID, CallID: pc.ID, Name: pc.Name, Input: input}

	key := pc.Name + "\x00" + string(input)
	r.repeats[key]++
	var result string
	switch {
	case r.repeats[key] > maxIdenticalCalls:
		result = fmt.Sprintf("Error: Loop detected — called %s with identical arguments too many times. Try a different approach.", pc.Name)
	case r.blocked[pc.Name]:
		v := Verdict{ModelText: protocol.GovernanceBlockedText(pc.Name), ToolResult: true}
		r.deny(&ev, v)
		return v.ModelText, nil
	case !known:
		result = fmt.Sprintf("Error: Unknown tool \"%s\". Available tools: %s", pc.Name, strings.Join(r.names, ", "))
	default:
		v := Verdict{Allow: true}
		if r.req.Gate != nil {
			var err error
			v, err = r.req.Gate.Check(ctx, ToolCall{ID: pc.ID, Name: pc.Name, Input: input})
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			if err != nil {
				// A gate that cannot decide must not let the call through.
				v = Verdict{ModelText: "[BLOCKED] Could not get approval for " + pc.Name}
			}
		}
		if !v.Allow {
			r.deny(&ev, v)
			return v.ModelText, nil
		}
		if cp := r.req.Checkpoint; cp != nil {
			if err := cp.Executing(ctx, protocol.ExecCheckpoint{Step: r.steps, CallID: pc.ID}); err != nil {
				if ctx.Err() != nil {
					return "", ctx.Err()
				}
				return "", fmt.Errorf("agent: checkpoint %s: %w", pc.Name, err)
			}
		}
		out, err := callTool(withCall(ctx, r.steps, pc.ID), run)
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if err != nil {
			out = fmt.Sprintf("Error executing %s: %v", pc.Name, err)
		}
		result = out
	}

	result, _ = injection.SanitizeToolOutput(result)
	ev.Result = result
	ev.IsError = isErrorText(result)
	ev.Status = "success"
	if ev.IsError {
		ev.Status = "error"
	}
	ev.DurationMs = r.finishTiming(pc.Name)
	// Recorded (persisted) first: a runner that resumes this turn after a
	// crash finds every result a client saw.
	r.record(ev)
	r.emit(protocol.EventToolResult, ToolResultData{Name: pc.Name, Result: result, Duration: ev.DurationMs, IsError: ev.IsError})
	if action, ok := fileActions[pc.Name]; ok && truthy(fields["path"]) && !strings.HasPrefix(result, "Error") {
		r.emit(protocol.EventFileCreated, FileCreatedData{FilePath: jsString(fields["path"]), FileAction: action})
	}
	return result, nil
}

// decodeArgs reads a call's raw arguments once. A tool that decodes its
// own (Decoder; only asked when decode is set, i.e. the tool is known and
// may run) gives the canonical input and the run of exactly that value.
// Any other call gets its arguments compacted, refused when they are not
// JSON or repeat a key (the approval card would show the first, a server
// could use the last), and run with Tool.Call.
func decodeArgs(tool Tool, decode bool, raw []byte) (json.RawMessage, func(context.Context) (string, error), error) {
	if d, ok := tool.(Decoder); ok && decode {
		return d.Decode(raw)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, nil, err
	}
	if err := checkDuplicateKeys(raw); err != nil {
		return nil, nil, err
	}
	input := json.RawMessage(compact.Bytes())
	return input, func(ctx context.Context) (string, error) {
		if tool == nil {
			return "", errors.New("unknown tool")
		}
		return tool.Call(ctx, input)
	}, nil
}

// checkDuplicateKeys fails when the JSON text data is invalid or an object
// in it has a key twice.
func checkDuplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := walkJSON(dec); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the arguments")
	}
	return nil
}

// walkJSON reads one value from dec, failing on a repeated key.
func walkJSON(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return errors.New("not valid JSON")
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return errors.New("not valid JSON")
			}
			key, _ := k.(string)
			if seen[key] {
				return fmt.Errorf("duplicate key %q", key)
			}
			seen[key] = true
			if err := walkJSON(dec); err != nil {
				return err
			}
		}
	case json.Delim('['):
		for dec.More() {
			if err := walkJSON(dec); err != nil {
				return err
			}
		}
	default:
		return nil
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return errors.New("not valid JSON")
	}
	return nil
}

// callKey is the context key of the running call.
type callKey struct{}

// runningCall is the call a tool's ctx belongs to: its id and step.
type runningCall struct {
	id   string
	step int
}

func withCall(ctx context.Context, step int, id string) context.Context {
	return context.WithValue(ctx, callKey{}, runningCall{id: id, step: step})
}

// CallID is the id of the tool call whose run ctx belongs to ("" outside
// one): spawn_agent tags its sub-agent's calls with it (ToolEvent.Parent).
func CallID(ctx context.Context) string {
	c, _ := ctx.Value(callKey{}).(runningCall)
	return c.id
}

// CallKey names the tool call whose run ctx belongs to within its turn
// ("" outside one), as EventKey does.
func CallKey(ctx context.Context) string {
	c, ok := ctx.Value(callKey{}).(runningCall)
	if !ok {
		return ""
	}
	return EventKey(c.step, c.id)
}

// EventKey names the event of a call within its agent's run: its step and
// its id. A model may reuse an id in a later step (the ids are its own),
// never within one; a resumed run numbers its steps as the first did, so
// an event it stores again is named as before.
func EventKey(step int, callID string) string {
	return strconv.Itoa(step) + "/" + callID
}

// callTool runs a decoded call, turning a panic into an error so one
// broken tool cannot take down every turn of the process.
func callTool(ctx context.Context, run func(context.Context) (string, error)) (out string, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = "", fmt.Errorf("internal error (%v)", p)
		}
	}()
	return run(ctx)
}

// deny records a call the gate refused; only a verdict asking for it shows
// a tool_result.
func (r *run) deny(ev *protocol.ToolEvent, v Verdict) {
	ev.Result = v.ModelText
	ev.IsError = isErrorText(v.ModelText)
	ev.Status = "denied"
	ev.DurationMs = r.finishTiming(ev.Name)
	r.record(*ev)
	if v.ToolResult {
		r.emit(protocol.EventToolResult, ToolResultData{Name: ev.Name, Result: v.ModelText, Duration: ev.DurationMs, IsError: ev.IsError})
	}
}

// finishTiming is the ms since the oldest unfinished call of name (FIFO).
func (r *run) finishTiming(name string) *int64 {
	q := r.starts[name]
	if len(q) == 0 {
		return nil
	}
	r.starts[name] = q[1:]
	ms := time.Since(q[0]).Milliseconds()
	return &ms
}

func (r *run) record(ev protocol.ToolEvent) {
	ev.Timestamp = protocol.Timestamp(time.Now())
	r.res.Tools = append(r.res.Tools, ev)
	if r.req.OnToolEvent != nil {
		ev.Key = EventKey(r.steps, ev.CallID)
		r.req.OnToolEvent(ev)
	}
}

// recall runs the auto-recall of the turn's message and returns the
// memories worth keeping (none when the scan finds injected instructions).
// A failing search only ends the recall (as in the original: a tool event
// without a result); a cancelled ctx ends the turn.
func (r *run) recall(ctx context.Context) ([]protocol.MemoryFrame, error) {
	r.step("Recalling relevant memories...")
	input, _ := json.Marshal(map[string]string{"query": r.req.Message})
	r.emit(protocol.EventTool, ToolData{Name: AutoRecallTool, Input: input})
	start := time.Now()
	memories, err := r.req.Recall.Search(ctx, r.req.Message)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, nil
	}
	ms := time.Since(start).Milliseconds()

	result := "No relevant memories found"
	var kept []protocol.MemoryFrame
	if n := len(memories); n > 0 {
		if injection.Scan(contents(memories), injection.ToolOutput).Blocked() {
			r.step("Recalled memories dropped — suspicious content detected.")
		} else {
			kept = memories
		}
		noun := "memories"
		if n == 1 {
			noun = "memory"
		}
		r.step(fmt.Sprintf("Recalled %d relevant %s.", n, noun))
		var sb strings.Builder
		fmt.Fprintf(&sb, "%d memories recalled:", n)
		for _, m := range memories[:min(n, recallPreview)] {
			sb.WriteString("\n  - ")
			sb.WriteString(m.Content)
		}
		result = sb.String()
	}
	r.emit(protocol.EventToolResult, ToolResultData{Name: AutoRecallTool, Result: result, Duration: &ms})
	r.record(protocol.ToolEvent{
		TurnID: r.req.TurnID, CallID: "recall-" + protocol.NewUUID(), Name: AutoRecallTool,
		Input: input, Result: result, Status: "success", DurationMs: &ms,
	})
	return kept, nil
}

// quietRecall is the auto-recall of a resumed turn: the same search, no
// events and no tool event.
func (r *run) quietRecall(ctx context.Context) []protocol.MemoryFrame {
	memories, err := r.req.Recall.Search(ctx, r.req.Message)
	if err != nil || len(memories) == 0 || injection.Scan(contents(memories), injection.ToolOutput).Blocked() {
		return nil
	}
	return memories
}

func contents(fs []protocol.MemoryFrame) string {
	var sb strings.Builder
	for i, f := range fs {
		if i > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString(f.Content)
	}
	return sb.String()
}

// memorySection is the system-prompt section of recalled memories ("" for none).
func memorySection(kept []protocol.MemoryFrame) string {
	if len(kept) == 0 {
		return ""
	}
	var sb strings.Builder
	sb.WriteString("## Relevant memories\n")
	for _, m := range kept {
		sb.WriteString("- ")
		sb.WriteString(m.Content)
		sb.WriteString("\n")
	}
	return strings.TrimRight(sb.String(), "\n")
}
