// Package chatstream reads a streamed OpenAI chat completion: it joins the
// content deltas of the first choice, hands each one on as it arrives, and
// assembles the tool calls from their fragments. The agent loop and the
// retrieval runner both read their model's reply through it.
package chatstream

import (
	"encoding/json"
	"errors"
	"io"
	"sort"
	"strconv"

	openai "github.com/sashabaranov/go-openai"
)

// ToolCall is one tool call assembled from its stream fragments.
type ToolCall struct {
	// Index is the call's position in the model's reply.
	Index int
	// ID is the model's call ID, or "call_<i>" when it sent none.
	ID string
	// Name is the tool's name.
	Name string
	// Args is the call's arguments, the JSON text as the model wrote it.
	Args []byte
}

// Reply is what one streamed chat completion produced.
type Reply struct {
	// Content is the first choice's text.
	Content string
	// Calls are the first choice's tool calls, in Index order.
	Calls []*ToolCall
	// Usage is the token usage the server reported (zero when it sent none).
	Usage openai.Usage
	// Streamed reports that a content delta reached onToken: a caller that
	// already showed text must not retry the call.
	Streamed bool
}

// chunk is the part of a chat.completion.chunk that Read uses. Read takes
// each chunk's raw JSON from go-openai (RecvRaw) and decodes only these
// fields: go-openai's Recv decodes into its whole response type, and that
// decoding was a third of the runner's CPU per streamed token (profile in
// docs/benchmarks.md, "Round 3: the per-token path"). Malformed JSON and a
// wrong type in a field Read uses are refused as Recv refused them (the
// same encoding/json error); a wrong type in a field Read never looked at
// (a numeric id, a string "created") no longer fails the reply.
type chunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content   string            `json:"content"`
			ToolCalls []openai.ToolCall `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *openai.Usage `json:"usage"`
}

// Read drains s until it ends, calling onToken (when not nil) with each
// non-empty content delta of the first choice the moment it arrives. On a
// read error the Reply holds what arrived before it (Calls unordered and
// without generated IDs). Read does not close s.
func Read(s *openai.ChatCompletionStream, onToken func(delta string)) (Reply, error) {
	var rep Reply
	var content []byte
	byIndex := map[int]*ToolCall{}
	for {
		raw, err := s.RecvRaw()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			rep.Content = string(content)
			return rep, err
		}
		if d, ok := fastDelta(raw); ok {
			if d != "" {
				content = append(content, d...)
				rep.Streamed = true
				if onToken != nil {
					onToken(d)
				}
			}
			continue
		}
		// A fresh value per chunk: decoding into a reused one would keep
		// fields an earlier chunk set and this one leaves out.
		var chunk chunk
		if err := json.Unmarshal(raw, &chunk); err != nil {
			rep.Content = string(content)
			return rep, err
		}
		if chunk.Usage != nil {
			rep.Usage = *chunk.Usage
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			if d := ch.Delta.Content; d != "" {
				content = append(content, d...)
				rep.Streamed = true
				if onToken != nil {
					onToken(d)
				}
			}
			for i, tc := range ch.Delta.ToolCalls {
				idx := i
				if tc.Index != nil {
					idx = *tc.Index
				}
				c := byIndex[idx]
				if c == nil {
					c = &ToolCall{Index: idx}
					byIndex[idx] = c
					rep.Calls = append(rep.Calls, c)
				}
				if tc.ID != "" {
					c.ID = tc.ID
				}
				if tc.Function.Name != "" {
					c.Name += tc.Function.Name
				}
				c.Args = append(c.Args, tc.Function.Arguments...)
			}
		}
	}
	rep.Content = string(content)
	sort.SliceStable(rep.Calls, func(i, j int) bool { return rep.Calls[i].Index < rep.Calls[j].Index })
	for i, c := range rep.Calls {
		if c.ID == "" {
			c.ID = "call_" + strconv.Itoa(i)
		}
	}
	return rep, nil
}
