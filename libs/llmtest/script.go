package llmtest

import (
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Response is the scripted answer to one chat-completions request.
//
// With Status 0 (or 200) the server streams Steps as chunks, then — unless a
// step ended the stream early — the final chunk, the usage chunk (when the
// client asked for it) and `data: [DONE]`. With any other Status the server
// answers that status with an OpenAI error body and never streams.
type Response struct {
	// Status is the HTTP status; 0 means 200 and a stream.
	Status int
	// Error is the error object of a non-200 answer; a generic one matching
	// Status is used when nil.
	Error *APIError
	// Header is added to the response (e.g. Retry-After on a 429).
	Header http.Header
	// Model is the model named in the chunks; empty echoes the request's.
	Model string
	// Steps are played in order.
	Steps []Step
}

// APIError is the OpenAI error object, sent as `{"error": {…}}`.
type APIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    any     `json:"code"`
}

// Step is one instruction of a scripted stream. Build steps with the
// functions of this package (Content, ToolCall, Wait, Cut, …).
type Step struct {
	kind stepKind

	text   string
	index  int
	id     string
	name   string
	reason string
	delay  time.Duration
	pause  *Pause
	apiErr *APIError
	n      int
	usage  *Usage
}

type stepKind int

const (
	stepContent stepKind = iota
	stepToolStart
	stepToolArgs
	stepFinish
	stepUsage
	stepDelay
	stepWait
	stepCut
	stepStreamError
	stepFast
	stepRaw
)

// Usage is the token usage reported in the usage chunk.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Content streams one content delta.
func Content(text string) Step { return Step{kind: stepContent, text: text} }

// ToolCallStart streams the first fragment of tool call index: its id, type
// and function name, with empty arguments — as OpenAI does.
func ToolCallStart(index int, id, name string) Step {
	return Step{kind: stepToolStart, index: index, id: id, name: name}
}

// ToolCallArgs streams a piece of tool call index's arguments.
func ToolCallArgs(index int, args string) Step {
	return Step{kind: stepToolArgs, index: index, text: args}
}

// Finish sends the final chunk with the given finish_reason now. Without
// it the server sends one at the end: "tool_calls" when the stream had a
// tool call, else "stop".
func Finish(reason string) Step { return Step{kind: stepFinish, reason: reason} }

// WithUsage sets the usage reported in the usage chunk. Without it the
// usage chunk reports one prompt token per request message and one
// completion token per streamed delta.
func WithUsage(prompt, completion int) Step {
	return Step{kind: stepUsage, usage: &Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}}
}

// Delay waits d (or until the client goes away).
func Delay(d time.Duration) Step { return Step{kind: stepDelay, delay: d} }

// Wait blocks the stream at this point until p is released (or the client
// goes away). p reports when the stream reached it.
func Wait(p *Pause) Step { return Step{kind: stepWait, pause: p} }

// Cut aborts the connection at this point without finishing the stream.
func Cut() Step { return Step{kind: stepCut} }

// StreamError sends an OpenAI error object inside the stream
// (`data: {"error":{…}}`) and ends the stream without [DONE].
func StreamError(message, errType string, code any) Step {
	return Step{kind: stepStreamError, apiErr: &APIError{Message: message, Type: errType, Code: code}}
}

// Fast streams n content deltas of text back to back, each its own chunk
// flushed at once; the chunk is encoded once, so the server spends as
// little as possible per token (for benchmarks).
func Fast(n int, text string) Step { return Step{kind: stepFast, n: n, text: text} }

// Raw writes line followed by a blank line as-is (e.g. a malformed chunk).
func Raw(line string) Step { return Step{kind: stepRaw, text: line} }

// Pause is a point where a scripted stream blocks until the test releases it.
type Pause struct {
	reachedOnce sync.Once
	releaseOnce sync.Once
	reached     chan struct{}
	release     chan struct{}
}

// NewPause returns an unreleased pause.
func NewPause() *Pause {
	return &Pause{reached: make(chan struct{}), release: make(chan struct{})}
}

// Reached is closed once a stream arrives at the pause (everything before it
// has been written and flushed).
func (p *Pause) Reached() <-chan struct{} { return p.reached }

// Release lets every stream waiting on p (and any later one) continue.
func (p *Pause) Release() { p.releaseOnce.Do(func() { close(p.release) }) }

func (p *Pause) arrive() { p.reachedOnce.Do(func() { close(p.reached) }) }

// Reply is a plain streamed answer: each piece is one content delta.
func Reply(pieces ...string) Response {
	steps := make([]Step, 0, len(pieces))
	for _, p := range pieces {
		steps = append(steps, Content(p))
	}
	return Response{Steps: steps}
}

// ToolCall returns the steps of one complete tool call: the first fragment,
// then args split into at most pieces parts (at least one).
func ToolCall(index int, id, name, args string, pieces int) []Step {
	steps := []Step{ToolCallStart(index, id, name)}
	for _, part := range split(args, pieces) {
		steps = append(steps, ToolCallArgs(index, part))
	}
	return steps
}

// Steps concatenates step lists, for scripts built from ToolCall and single steps.
func Steps(parts ...any) []Step {
	var out []Step
	for _, p := range parts {
		switch v := p.(type) {
		case Step:
			out = append(out, v)
		case []Step:
			out = append(out, v...)
		default:
			panic("llmtest: Steps takes Step and []Step values")
		}
	}
	return out
}

// ErrorStatus answers status with an OpenAI error body carrying message.
func ErrorStatus(status int, message string) Response {
	return Response{Status: status, Error: &APIError{Message: message, Type: errorType(status)}}
}

// RateLimited answers 429 with `Retry-After: <retryAfter>` when retryAfter
// is not empty.
func RateLimited(retryAfter string) Response {
	r := ErrorStatus(http.StatusTooManyRequests, "Rate limit reached for requests")
	r.Error.Code = "rate_limit_exceeded"
	if retryAfter != "" {
		r.Header = http.Header{"Retry-After": []string{retryAfter}}
	}
	return r
}

// FastReply is a response that streams n copies of "tok " as fast as possible.
func FastReply(n int) Response { return Response{Steps: []Step{Fast(n, "tok ")}} }

func errorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "invalid_request_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

// split cuts s into at most n pieces of nearly equal byte length, never
// inside a UTF-8 sequence.
func split(s string, n int) []string {
	if n < 1 {
		n = 1
	}
	if s == "" {
		return []string{""}
	}
	size := (len(s) + n - 1) / n
	var out []string
	for len(s) > 0 {
		cut := min(size, len(s))
		for cut < len(s) && s[cut]&0xC0 == 0x80 {
			cut++
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }
