package agent

import (
	"encoding/json"

	"github.com/waggle-os/core/libs/protocol"
)

// Sink receives a turn's events in order, named by the protocol.Event*
// constants with the payloads below (or protocol.TokenData for token and
// step). Emit may block (back-pressure); the loop waits.
type Sink interface {
	Emit(event string, data any)
}

// ToolData is the data of a tool event.
type ToolData struct {
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// ToolResultData is the data of a tool_result event. Duration (ms) is
// omitted when no start was recorded for the call.
type ToolResultData struct {
	Name     string `json:"name"`
	Result   string `json:"result"`
	Duration *int64 `json:"duration,omitempty"`
	IsError  bool   `json:"isError"`
}

// FileCreatedData is the data of a file_created event.
type FileCreatedData struct {
	FilePath   string `json:"filePath"`
	FileAction string `json:"fileAction"`
}

// ModelSwitchData is the data of a model_switch event.
type ModelSwitchData struct {
	Model   string `json:"model"`
	Reason  string `json:"reason"`
	Primary string `json:"primary"`
}

// Usage is a turn's token usage, summed over its model calls.
type Usage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
}

// Done is the data of the agent loop's done event, keys in contract order.
type Done struct {
	Content   string     `json:"content"`
	Usage     Usage      `json:"usage"`
	ToolsUsed []string   `json:"toolsUsed"`
	Model     string     `json:"model"`
	Cost      float64    `json:"cost"`
	Tokens    DoneTokens `json:"tokens"`
}

// DoneTokens repeats the usage under the `tokens` key of done.
type DoneTokens struct {
	Input  int `json:"input"`
	Output int `json:"output"`
}

// DoneData is the done payload of a finished turn.
func DoneData(res Result) Done {
	tools := res.ToolsUsed
	if tools == nil {
		tools = []string{}
	}
	return Done{
		Content:   res.Content,
		Usage:     res.Usage,
		ToolsUsed: tools,
		Model:     res.Model,
		Cost:      res.Cost,
		Tokens:    DoneTokens{Input: res.Usage.InputTokens, Output: res.Usage.OutputTokens},
	}
}

// Result is what a turn produced. On failure or cancellation Run returns
// the part produced so far.
type Result struct {
	// Content is every text delta the model streamed in this turn, in order.
	Content string
	Usage   Usage
	// ToolsUsed names each tool call the model made (in call order).
	ToolsUsed []string
	// Model is the model that answered (the fallback after a switch).
	Model string
	Cost  float64
	// Tools are the turn's finished and denied tool calls.
	Tools []protocol.ToolEvent
	// Extra is the usage of helper calls (GEPA, context compression), each
	// on its own model; it is not part of Usage or Cost (done reports the
	// turn's model), but belongs in the usage ledger.
	Extra []ExtraUsage
}

// ExtraUsage is one helper call's usage.
type ExtraUsage struct {
	Model        string
	InputTokens  int
	OutputTokens int
	Cost         float64
}

func emitText(s Sink, event, text string) {
	s.Emit(event, protocol.TokenData{Content: text})
}
