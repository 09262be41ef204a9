package llmtest

import "strings"

// Tests that run many chats at once script tool calls through the user's
// own words instead of a shared queue of responses: a user message holding
// "CALL <tool> <raw json args>" asks the model for that call, with exactly
// those argument bytes (hostile ones included).

// CallDirective returns the tool call that text asks for with
// "CALL <tool> <args>", streaming the arguments in two pieces, and false
// when text holds no directive.
func CallDirective(text string) (Response, bool) {
	_, rest, ok := strings.Cut(text, "CALL ")
	if !ok {
		return Response{}, false
	}
	tool, args, _ := strings.Cut(strings.TrimSpace(rest), " ")
	return Response{Steps: ToolCall(0, "call_1", tool, args, 2)}, true
}

// ToolCaller is a handler for WithHandler: the last message's CALL
// directive becomes a tool call, a tool result is answered with
// sawPrefix followed by the result (so a test reads exactly what the model
// was told), and anything else with "nothing to do".
func ToolCaller(sawPrefix string) func(*Request) Response {
	return func(r *Request) Response {
		msgs := r.Chat.Messages
		if len(msgs) == 0 {
			return Reply("no messages")
		}
		last := msgs[len(msgs)-1]
		if last.Role == "tool" {
			return Reply(sawPrefix + last.Content)
		}
		if resp, ok := CallDirective(last.Content); ok {
			return resp
		}
		return Reply("nothing to do")
	}
}
