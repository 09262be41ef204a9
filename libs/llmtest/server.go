package llmtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// DefaultModels is the model list served by GET /v1/models unless WithModels
// replaces it.
var DefaultModels = []string{"claude-sonnet-4-6", "claude-haiku-3-5"}

// Option configures a Server.
type Option func(*Server)

// WithResponses queues scripted responses, consumed one per chat request.
func WithResponses(rs ...Response) Option {
	return func(s *Server) { s.queue = append(s.queue, rs...) }
}

// WithHandler answers every chat request with h; the queue is not used.
// h runs on the request's goroutine and may block.
func WithHandler(h func(*Request) Response) Option {
	return func(s *Server) { s.handler = h }
}

// WithDefault answers chat requests with r once the queue is empty (instead
// of a 500 "no scripted response left").
func WithDefault(r Response) Option {
	return func(s *Server) { s.fallback = &r }
}

// WithModels sets the ids listed by GET /v1/models.
func WithModels(ids ...string) Option {
	return func(s *Server) { s.models = ids }
}

// WithAPIKey makes every route answer 401 (OpenAI's invalid_api_key
// error) unless the request carries "Authorization: Bearer key", as a
// hosted model server does. The refused requests are recorded too.
func WithAPIKey(key string) Option {
	return func(s *Server) { s.apiKey = key }
}

// Server is a scripted OpenAI-compatible server. Its zero value is not
// usable; create one with New and Start it.
type Server struct {
	mu            sync.Mutex
	srv           *httptest.Server
	queue         []Response
	fallback      *Response
	handler       func(*Request) Response
	embed         EmbedFunc
	models        []string
	modelsStatus  int
	unreachable   bool
	apiKey        string
	requests      []*Request
	cancellations int
	seq           int
}

// New returns an unstarted server configured by opts.
func New(opts ...Option) *Server {
	s := &Server{models: DefaultModels}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Start listens on a random port of 127.0.0.1 and serves. It must be called
// once, before URL.
func (s *Server) Start() {
	s.srv = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
}

// Close stops the server: it cuts open connections (which ends streams
// blocked on an unreleased Pause) and waits for every handler to return.
func (s *Server) Close() {
	if s.srv != nil {
		s.srv.CloseClientConnections()
		s.srv.Close()
	}
}

// URL is the OpenAI base URL including /v1, e.g. http://127.0.0.1:1234/v1.
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Enqueue appends scripted responses to the queue.
func (s *Server) Enqueue(rs ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, rs...)
}

// SetModelsStatus makes GET /v1/models answer status with an error body
// (0 or 200 restores the model list).
func (s *Server) SetModelsStatus(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.modelsStatus = status
}

// SetUnreachable makes every route drop the connection without an answer,
// as a server that is down would (the port stays open so it can come back).
func (s *Server) SetUnreachable(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unreachable = down
}

// Requests returns the recorded requests (every route) in arrival order.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.requests...)
}

// ChatRequests returns the recorded chat-completions requests.
func (s *Server) ChatRequests() []*Request {
	var out []*Request
	for _, r := range s.Requests() {
		if r.Path == "/v1/chat/completions" {
			out = append(out, r)
		}
	}
	return out
}

// Cancellations counts requests whose client went away mid-response.
func (s *Server) Cancellations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancellations
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	req := newRequest(r, raw)
	s.mu.Lock()
	s.requests = append(s.requests, req)
	down := s.unreachable
	s.mu.Unlock()
	defer close(req.done)

	if down {
		panic(http.ErrAbortHandler)
	}
	if s.apiKey != "" && r.Header.Get("Authorization") != "Bearer "+s.apiKey {
		writeError(w, http.StatusUnauthorized, &APIError{Message: "Incorrect API key provided.", Type: "invalid_request_error", Code: "invalid_api_key"})
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		s.serveModels(w)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		s.serveChat(w, r, req)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/embeddings":
		s.serveEmbeddings(w, req)
	default:
		writeError(w, http.StatusNotFound, &APIError{
			Message: fmt.Sprintf("Unknown request URL: %s %s", r.Method, r.URL.Path),
			Type:    "invalid_request_error",
		})
	}
}

func (s *Server) serveModels(w http.ResponseWriter) {
	s.mu.Lock()
	status, models := s.modelsStatus, s.models
	s.mu.Unlock()
	if status != 0 && status != http.StatusOK {
		writeError(w, status, &APIError{Message: http.StatusText(status), Type: errorType(status)})
		return
	}
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, id := range models {
		list.Data = append(list.Data, model{ID: id, Object: "model", Created: 1700000000, OwnedBy: "llmtest"})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}

func (s *Server) next(req *Request) Response {
	s.mu.Lock()
	h := s.handler
	if h == nil {
		defer s.mu.Unlock()
		if len(s.queue) > 0 {
			r := s.queue[0]
			s.queue = s.queue[1:]
			return r
		}
		if s.fallback != nil {
			return *s.fallback
		}
		return ErrorStatus(http.StatusInternalServerError, "llmtest: no scripted response left")
	}
	s.mu.Unlock()
	return h(req)
}

func (s *Server) serveChat(w http.ResponseWriter, r *http.Request, req *Request) {
	if req.Body == nil {
		writeError(w, http.StatusBadRequest, &APIError{Message: "request body is not a JSON object", Type: "invalid_request_error"})
		return
	}
	resp := s.next(req)
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if resp.Status != 0 && resp.Status != http.StatusOK {
		e := resp.Error
		if e == nil {
			e = &APIError{Message: http.StatusText(resp.Status), Type: errorType(resp.Status)}
		}
		writeError(w, resp.Status, e)
		return
	}
	s.mu.Lock()
	s.seq++
	id := "chatcmpl-llmtest-" + itoa(s.seq)
	s.mu.Unlock()
	model := resp.Model
	if model == "" {
		model = req.Chat.Model
	}
	st := &stream{
		ctx:     r.Context(),
		w:       w,
		id:      id,
		model:   model,
		created: time.Now().Unix(),
		usage:   Usage{PromptTokens: len(req.Chat.Messages)},
	}
	var completed bool
	if req.Chat.Stream {
		completed = st.play(resp.Steps, req.Chat.IncludeUsage())
	} else {
		completed = st.writeCompletion(resp.Steps)
	}
	if !completed && r.Context().Err() != nil {
		if req.markCancelled() {
			s.mu.Lock()
			s.cancellations++
			s.mu.Unlock()
		}
	}
}

func writeError(w http.ResponseWriter, status int, e *APIError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Error *APIError `json:"error"`
	}{e})
}

// stream writes one scripted SSE response.
type stream struct {
	ctx      context.Context
	w        http.ResponseWriter
	id       string
	model    string
	created  int64
	usage    Usage
	usageSet bool
	hadTool  bool
	finished bool
	deltas   int
}

// play streams steps and reports whether the script ran to its end (false
// when the client went away first).
func (st *stream) play(steps []Step, includeUsage bool) bool {
	h := st.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	st.w.WriteHeader(http.StatusOK)
	empty := ""
	if !st.send(chunk{Choices: []choice{{Delta: delta{Role: "assistant", Content: &empty}}}}) {
		return false
	}
	for _, step := range steps {
		if !st.step(step) {
			return false
		}
		if step.kind == stepStreamError {
			return true
		}
	}
	if !st.finished && !st.finish("") {
		return false
	}
	if includeUsage {
		u := st.usage
		if !st.usageSet {
			u.CompletionTokens = st.deltas
		}
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
		if !st.send(chunk{Choices: []choice{}, Usage: &u}) {
			return false
		}
	}
	return st.writeRaw("data: [DONE]\n\n")
}

func (st *stream) step(s Step) bool {
	switch s.kind {
	case stepContent:
		st.deltas++
		text := s.text
		return st.send(chunk{Choices: []choice{{Delta: delta{Content: &text}}}})
	case stepToolStart:
		st.hadTool = true
		return st.send(chunk{Choices: []choice{{Delta: delta{ToolCalls: []toolCallDelta{{
			Index: s.index, ID: s.id, Type: "function", Function: functionDelta{Name: s.name},
		}}}}}})
	case stepToolArgs:
		st.deltas++
		return st.send(chunk{Choices: []choice{{Delta: delta{ToolCalls: []toolCallDelta{{
			Index: s.index, Function: functionDelta{Arguments: s.text},
		}}}}}})
	case stepFinish:
		return st.finish(s.reason)
	case stepUsage:
		st.usage, st.usageSet = *s.usage, true
		return true
	case stepDelay:
		t := time.NewTimer(s.delay)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-st.ctx.Done():
			return false
		}
	case stepWait:
		s.pause.arrive()
		select {
		case <-s.pause.release:
			return st.ctx.Err() == nil
		case <-st.ctx.Done():
			return false
		}
	case stepCut:
		panic(http.ErrAbortHandler)
	case stepStreamError:
		b, _ := json.Marshal(struct {
			Error *APIError `json:"error"`
		}{s.apiErr})
		return st.writeRaw("data: " + string(b) + "\n\n")
	case stepFast:
		text := s.text
		frame := st.frame(chunk{Choices: []choice{{Delta: delta{Content: &text}}}})
		for range s.n {
			if !st.writeRaw(frame) {
				return false
			}
		}
		st.deltas += s.n
		return true
	case stepRaw:
		return st.writeRaw(s.text + "\n\n")
	}
	return true
}

func (st *stream) finish(reason string) bool {
	if reason == "" {
		reason = "stop"
		if st.hadTool {
			reason = "tool_calls"
		}
	}
	st.finished = true
	return st.send(chunk{Choices: []choice{{Delta: delta{}, FinishReason: &reason}}})
}

func (st *stream) frame(c chunk) string {
	c.ID, c.Object, c.Created, c.Model = st.id, "chat.completion.chunk", st.created, st.model
	b, err := json.Marshal(c)
	if err != nil {
		panic("llmtest: encode chunk: " + err.Error())
	}
	return "data: " + string(b) + "\n\n"
}

func (st *stream) send(c chunk) bool { return st.writeRaw(st.frame(c)) }

// writeRaw writes and flushes one frame; false means the client is gone.
func (st *stream) writeRaw(s string) bool {
	if st.ctx.Err() != nil {
		return false
	}
	if _, err := io.WriteString(st.w, s); err != nil {
		return false
	}
	if err := http.NewResponseController(st.w).Flush(); err != nil {
		return false
	}
	return st.ctx.Err() == nil
}

// writeCompletion answers a non-streaming request with the script's text
// and tool calls in one chat.completion object. Delays are ignored; a Wait
// holds the answer until released (no answer when the client goes away
// first), so a test can stop its caller mid-call.
func (st *stream) writeCompletion(steps []Step) (completed bool) {
	var content strings.Builder
	type call struct {
		ID       string       `json:"id"`
		Type     string       `json:"type"`
		Function FunctionCall `json:"function"`
	}
	var calls []call
	byIndex := map[int]int{}
	for _, s := range steps {
		switch s.kind {
		case stepContent:
			st.deltas++
			content.WriteString(s.text)
		case stepFast:
			st.deltas += s.n
			content.WriteString(strings.Repeat(s.text, s.n))
		case stepToolStart:
			byIndex[s.index] = len(calls)
			calls = append(calls, call{ID: s.id, Type: "function", Function: FunctionCall{Name: s.name}})
		case stepToolArgs:
			if i, ok := byIndex[s.index]; ok {
				calls[i].Function.Arguments += s.text
			}
		case stepUsage:
			st.usage, st.usageSet = *s.usage, true
		case stepStreamError:
			writeError(st.w, http.StatusInternalServerError, s.apiErr)
			return true
		case stepCut:
			panic(http.ErrAbortHandler)
		case stepWait:
			if !st.step(s) {
				return false
			}
		}
	}
	if !st.usageSet {
		st.usage.CompletionTokens = st.deltas
	}
	st.usage.TotalTokens = st.usage.PromptTokens + st.usage.CompletionTokens
	reason := "stop"
	if len(calls) > 0 {
		reason = "tool_calls"
	}
	msg := map[string]any{"role": "assistant", "content": content.String()}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	st.w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(st.w).Encode(map[string]any{
		"id": st.id, "object": "chat.completion", "created": st.created, "model": st.model,
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": reason}},
		"usage":   st.usage,
	})
	return true
}

type chunk struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   *Usage   `json:"usage,omitempty"`
}

type choice struct {
	Index        int     `json:"index"`
	Delta        delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

type delta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	ToolCalls []toolCallDelta `json:"tool_calls,omitempty"`
}

type toolCallDelta struct {
	Index    int           `json:"index"`
	ID       string        `json:"id,omitempty"`
	Type     string        `json:"type,omitempty"`
	Function functionDelta `json:"function"`
}

type functionDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}
