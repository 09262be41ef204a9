package openapi

import (
	"github.com/waggle-os/core/libs/protocol"
)

// event is one entry of an SSE event catalogue.
type event struct {
	name    string
	data    *Schema
	summary string
}

// chatEvents is the event catalogue of a chat turn (POST /api/chat, GET
// /api/chat/turns/{turnId}/events), contract §1 plus stream_gap. The data
// of the events the turn runner builds (its agent and pipeline packages,
// which the gateway may not import) is written out here; the e2e tests
// check real turns against it.
func chatEvents() []event {
	return []event{
		{protocol.EventToken, ref("TokenData"), "A chunk of the assistant's text; concatenate in order. A client that reads slower than tokens arrive may get several joined in one event."},
		{protocol.EventStep, ref("TokenData"), "A progress line for display (tool approved, model switched, resumed on another runner…)."},
		{protocol.EventTool, ref("ToolData"), "The agent calls a tool."},
		{protocol.EventToolResult, ref("ToolResultData"), "A tool call finished."},
		{protocol.EventFileCreated, ref("FileCreatedData"), "write_file, edit_file or generate_docx succeeded."},
		{protocol.EventApprovalRequired, ref("ApprovalRequiredData"), "The turn waits for POST /api/approval/{requestId}."},
		{protocol.EventGepaChoices, ref("GepaChoicesData"), "A vague first message was expanded; the client may offer the clarifying questions."},
		{protocol.EventModelSwitch, ref("ModelSwitchData"), "The turn's model changed (fallback, budget)."},
		{protocol.EventNotification, ref("NotificationData"), "A repeated workflow was captured."},
		{protocol.EventStreamGap, ref("StreamGapData"), "Events of the turn were discarded before this client read them (it fell behind the window the server keeps); done still carries the whole reply. When nothing of the turn is left, POST /api/chat follows it with the turn's end from the stored history (done with the stored reply, or error); a follower's stream ends after it."},
		{protocol.EventDone, ref("ChatDoneData"), "Terminal success: the stream ends."},
		{protocol.EventError, ref("ErrorData"), "Terminal failure (user-friendly message only): the stream ends."},
	}
}

// agentRunEvents is the event catalogue of POST /api/agent/run (contract
// §8): different names, and done is always last (error is not terminal).
func agentRunEvents() []event {
	return []event{
		{protocol.AgentRunEventStarted, ref("AgentRunStartedData"), "The run started with this shape and model."},
		{protocol.AgentRunEventProgress, ref("AgentRunProgressData"), "One step of the loop."},
		{protocol.AgentRunEventFinalized, ref("AgentRunFinalizedData"), "The answer and the run's totals."},
		{protocol.AgentRunEventError, ref("AgentRunErrorData"), "The run failed; done follows."},
		{protocol.AgentRunEventDone, ref("AgentRunDoneData"), "Always last: the stream ends."},
	}
}

// eventSchemas are the data schemas of the turn runner's events and the
// catalogue unions.
func eventSchemas() map[string]*Schema {
	usage := object(req("inputTokens", integer()), req("outputTokens", integer()))
	opt1 := func(name string, s *Schema) prop { return opt(name, s) }
	m := map[string]*Schema{
		"ToolData": object(
			req("name", str()),
			req("input", anyValue("the call's arguments (an object)")),
		),
		"ToolResultData": object(
			req("name", str()),
			req("result", str()),
			opt("duration", describe(integer(), "milliseconds; absent when no start was recorded")),
			req("isError", describe(boolean(), "the result starts with \"Error:\" or \"Error \"")),
		),
		"FileCreatedData": object(
			req("filePath", str()),
			req("fileAction", &Schema{Type: "string", Enum: []any{"write", "edit", "generate"}}),
		),
		"GepaChoicesData": object(
			req("original", str()),
			req("expanded", str()),
			req("clarifyingQuestions", arrayOf(str())),
			req("intent", str()),
		),
		"ModelSwitchData": object(
			req("model", strDesc("the model now answering")),
			req("reason", str()),
			req("primary", strDesc("the model the turn started with")),
		),
		"NotificationData": object(
			req("type", constant("workflow_captured")),
			req("title", str()),
			req("message", str()),
			req("pattern", ref("WorkflowPattern")),
		),
		"AgentDoneData": object(
			req("content", strDesc("the whole reply")),
			req("usage", usage),
			req("toolsUsed", arrayOf(str())),
			req("model", str()),
			req("cost", number()),
			req("tokens", object(req("input", integer()), req("output", integer()))),
		),
		"ChatDoneData": describe(&Schema{OneOf: []*Schema{ref("AgentDoneData"), ref("EchoDoneData")}},
			"The agent loop's done, or the echo-mode / slash-command done (usage in prompt_tokens / completion_tokens, all 0)."),
		"AgentRunStartedData": object(
			req("shape", strDesc("the requested shape when recognised, else the model's default")),
			req("shapeRequested", &Schema{Type: []string{"string", "null"}}),
			req("shapeRecognized", boolean()),
			req("model", str()),
		),
		"AgentRunProgressData": describe(object(
			req("type", &Schema{Type: "string", Enum: []any{"step_started", "retrieval_invoked", "step_completed", "finalized", "loop_exhausted"}}),
			req("step_index", integer()),
			opt1("retrieval_query", str()),
			opt1("retrieval_results_count", integer()),
			opt1("tokens_in", integer()),
			opt1("tokens_out", integer()),
			opt1("cost_usd", number()),
			opt1("message", str()),
		), "Only the keys that apply to the type are present (docs/agent-run.md)."),
		"AgentRunFinalizedData": object(
			req("rawResponse", str()),
			req("normalizedResponse", str()),
			req("promptShapeName", str()),
			req("stepsTaken", integer()),
			req("retrievalCalls", integer()),
			req("loopExhausted", boolean()),
			req("totalTokensIn", integer()),
			req("totalTokensOut", integer()),
			req("totalCostUsd", number()),
			req("totalLatencyMs", integer()),
		),
		"AgentRunErrorData": object(req("error", str())),
		"AgentRunDoneData":  object(req("ok", constant(true))),
		"ChatEvent":         catalogue(chatEvents(), "ChatEvent"),
		"AgentRunEvent":     catalogue(agentRunEvents(), "AgentRunEvent"),
		"TurnEvent": describe(&Schema{AnyOf: []*Schema{ref("ChatEvent"), ref("AgentRunEvent")}},
			"An event of the turn followed: a chat turn's (ChatEvent), or a retrieval run's (AgentRunEvent) when the id is a run's."),
		"TurnEventStream":     eventStream("The followed turn's events (see x-itemSchema and TurnEvent)."),
		"SSEEventID":          describe(&Schema{Type: "string", Pattern: "^[0-9]+$"}, "The event's id: line, its turn-stream sequence. Send it back as Last-Event-ID (or ?after=) to resume."),
		"ChatEventStream":     eventStream("A chat turn's events (see x-itemSchema and ChatEvent)."),
		"AgentRunEventStream": eventStream("A retrieval run's events (see x-itemSchema and AgentRunEvent)."),
	}
	for _, e := range chatEvents() {
		m["ChatEvent."+e.name] = envelope(e)
	}
	for _, e := range agentRunEvents() {
		m["AgentRunEvent."+e.name] = envelope(e)
	}
	return m
}

// envelope is one parsed SSE event: its name, its id line and its JSON data.
func envelope(e event) *Schema {
	return describe(object(
		req("event", constant(e.name)),
		opt("id", ref("SSEEventID")),
		req("data", e.data),
	), e.summary)
}

// catalogue is the union of a catalogue's envelopes, told apart by event.
func catalogue(events []event, prefix string) *Schema {
	s := &Schema{Description: "One event of the stream, parsed: `event:` is the name, `id:` the resume point, `data:` the JSON below. Lines starting with ':' are keep-alive comments."}
	for _, e := range events {
		s.OneOf = append(s.OneOf, ref(prefix+"."+e.name))
	}
	return s
}

func eventStream(d string) *Schema {
	return &Schema{Type: "string", Description: d + " Each event is `id: <n>\\nevent: <name>\\ndata: <json>\\n\\n`; an idle stream gets `: keep-alive` comments every 15 s."}
}
