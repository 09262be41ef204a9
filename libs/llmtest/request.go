package llmtest

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
)

// Request is one recorded HTTP request.
type Request struct {
	Method string
	Path   string
	Header http.Header
	// RawBody is the request body as received.
	RawBody []byte
	// Body is RawBody decoded as a JSON object (nil when it is not one).
	Body map[string]any
	// Chat is RawBody decoded as a chat-completions request.
	Chat ChatRequest

	cancelOnce sync.Once
	cancelled  chan struct{}
	done       chan struct{}
}

func newRequest(r *http.Request, raw []byte) *Request {
	req := &Request{
		Method:    r.Method,
		Path:      r.URL.Path,
		Header:    r.Header.Clone(),
		RawBody:   raw,
		cancelled: make(chan struct{}),
		done:      make(chan struct{}),
	}
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &req.Body)
		_ = json.Unmarshal(raw, &req.Chat)
	}
	return req
}

// Cancelled is closed when the client went away (its context was cancelled
// or the connection closed) before the server finished the response.
func (r *Request) Cancelled() <-chan struct{} { return r.cancelled }

// WasCancelled reports whether Cancelled is closed.
func (r *Request) WasCancelled() bool {
	select {
	case <-r.cancelled:
		return true
	default:
		return false
	}
}

// Done is closed when the server finished handling the request.
func (r *Request) Done() <-chan struct{} { return r.done }

func (r *Request) markCancelled() (first bool) {
	r.cancelOnce.Do(func() {
		close(r.cancelled)
		first = true
	})
	return first
}

// ChatRequest is the part of a chat-completions request body tests assert on.
type ChatRequest struct {
	Model         string         `json:"model"`
	Messages      []Message      `json:"messages"`
	Tools         []Tool         `json:"tools"`
	Stream        bool           `json:"stream"`
	StreamOptions *StreamOptions `json:"stream_options"`
}

// IncludeUsage reports whether the client asked for the usage chunk.
func (c ChatRequest) IncludeUsage() bool {
	return c.StreamOptions != nil && c.StreamOptions.IncludeUsage
}

// StreamOptions is the request's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Message is one request message. Content holds the text whether it was
// sent as a string or as an array of text parts.
type Message struct {
	Role       string            `json:"role"`
	Content    string            `json:"content"`
	Name       string            `json:"name,omitempty"`
	ToolCalls  []MessageToolCall `json:"tool_calls,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
}

// UnmarshalJSON accepts content as a string, null or an array of parts.
func (m *Message) UnmarshalJSON(b []byte) error {
	type plain Message
	var aux struct {
		plain
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*m = Message(aux.plain)
	m.Content = ""
	if len(aux.Content) == 0 || string(aux.Content) == "null" {
		return nil
	}
	if aux.Content[0] == '"' {
		return json.Unmarshal(aux.Content, &m.Content)
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(aux.Content, &parts); err != nil {
		return err
	}
	var sb strings.Builder
	for _, p := range parts {
		sb.WriteString(p.Text)
	}
	m.Content = sb.String()
	return nil
}

// MessageToolCall is a tool call of an assistant message in a request.
type MessageToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is a function name and its JSON-encoded arguments.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a tool offered in a request.
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}
