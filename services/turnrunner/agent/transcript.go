package agent

import (
	openai "github.com/sashabaranov/go-openai"

	"github.com/waggle-os/core/libs/protocol"
)

// Texts that keep a rebuilt transcript valid after a failed turn.
const (
	interruptedNote  = "\n\n[This reply was interrupted before it finished.]"
	failedTurnText   = "[No reply: this turn failed before the assistant answered.]"
	missingReplyText = "[No reply: the previous turn did not complete.]"
	emptyToolOutput  = "(no output)"
)

// BuildMessages turns a session's (already windowed) history into the
// model transcript. Tool events are grouped by TurnID: an earlier turn's
// calls become one assistant message carrying its tool_calls plus one tool
// message per call, placed just before that turn's final assistant message,
// so the model sees what it did. Denied calls carry the text the model got.
// A failed turn's partial reply is annotated, and a user message that never
// got a reply is followed by a placeholder, so no two user messages are
// adjacent.
func BuildMessages(systemPrompt string, history []protocol.Message, tools []protocol.ToolEvent) []openai.ChatCompletionMessage {
	byTurn := map[string][]protocol.ToolEvent{}
	for _, ev := range tools {
		if ev.TurnID == "" || ev.Name == AutoRecallTool || ev.Parent != "" {
			// A sub-agent's calls (Parent set) are not the turn's model's:
			// it saw only their spawn_agent result.
			continue
		}
		byTurn[ev.TurnID] = append(byTurn[ev.TurnID], ev)
	}
	out := make([]openai.ChatCompletionMessage, 0, len(history)+1)
	if systemPrompt != "" {
		out = append(out, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleSystem, Content: systemPrompt})
	}
	lastUser := false
	for _, m := range history {
		switch m.Role {
		case protocol.RoleUser:
			if lastUser {
				out = append(out, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: missingReplyText})
			}
			out = append(out, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: m.Content})
			lastUser = true
		case protocol.RoleAssistant:
			content := m.Content
			if m.Error != "" {
				if content == "" {
					content = failedTurnText
				} else {
					content += interruptedNote
				}
			}
			if evs := byTurn[m.TurnID]; len(evs) > 0 {
				delete(byTurn, m.TurnID)
				out = append(out, toolTranscript(m.TurnID, evs)...)
				lastUser = false
			}
			if content == "" {
				continue
			}
			out = append(out, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: content})
			lastUser = false
		default:
			out = append(out, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleSystem, Content: m.Content})
		}
	}
	return out
}

func toolTranscript(turnID string, evs []protocol.ToolEvent) []openai.ChatCompletionMessage {
	call := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant}
	results := make([]openai.ChatCompletionMessage, 0, len(evs))
	for i, ev := range evs {
		id := ev.CallID
		if id == "" {
			id = "call_" + turnID + "_" + itoa(i)
		}
		args := string(ev.Input)
		if args == "" || args == "null" {
			args = "{}"
		}
		call.ToolCalls = append(call.ToolCalls, openai.ToolCall{
			ID: id, Type: openai.ToolTypeFunction,
			Function: openai.FunctionCall{Name: ev.Name, Arguments: args},
		})
		results = append(results, toolMessage(id, ev.Result))
	}
	return append([]openai.ChatCompletionMessage{call}, results...)
}

func toolMessage(callID, result string) openai.ChatCompletionMessage {
	if result == "" {
		result = emptyToolOutput
	}
	return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, Content: result, ToolCallID: callID}
}
