package llmtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func start(t *testing.T, opts ...Option) *Server {
	t.Helper()
	s := New(opts...)
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func post(t *testing.T, ctx context.Context, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

const streamBody = `{"model":"m1","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`

// frames reads "data: …" payloads until EOF.
func frames(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "data: ") {
			t.Fatalf("unexpected line %q", line)
		}
		out = append(out, strings.TrimPrefix(line, "data: "))
	}
	return out
}

type wireChunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    int     `json:"index"`
				ID       *string `json:"id"`
				Type     *string `json:"type"`
				Function struct {
					Name      *string `json:"name"`
					Arguments string  `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *Usage `json:"usage"`
}

func decode(t *testing.T, frames []string) []wireChunk {
	t.Helper()
	var out []wireChunk
	for _, f := range frames {
		if f == "[DONE]" {
			continue
		}
		var c wireChunk
		if err := json.Unmarshal([]byte(f), &c); err != nil {
			t.Fatalf("chunk %q: %v", f, err)
		}
		out = append(out, c)
	}
	return out
}

func TestStreamsContentUsageAndDone(t *testing.T) {
	s := start(t, WithResponses(Response{Steps: []Step{Content("Hel"), Content("lo"), WithUsage(10, 5)}}))
	resp := post(t, context.Background(), s.URL(), streamBody)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	fs := frames(t, resp.Body)
	if fs[len(fs)-1] != "[DONE]" {
		t.Fatalf("last frame %q, want [DONE]", fs[len(fs)-1])
	}
	if !strings.Contains(fs[1], `"finish_reason":null`) {
		t.Errorf("content chunk lacks finish_reason null: %s", fs[1])
	}
	cs := decode(t, fs)
	var text string
	for _, c := range cs {
		if c.Object != "chat.completion.chunk" || c.Model != "m1" || !strings.HasPrefix(c.ID, "chatcmpl-") {
			t.Fatalf("bad chunk header %+v", c)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				text += *ch.Delta.Content
			}
		}
	}
	if text != "Hello" {
		t.Errorf("text %q, want Hello", text)
	}
	final, usage := cs[len(cs)-2], cs[len(cs)-1]
	if final.Choices[0].FinishReason == nil || *final.Choices[0].FinishReason != "stop" {
		t.Errorf("final chunk %+v, want finish_reason stop", final)
	}
	if usage.Choices == nil || len(usage.Choices) != 0 || usage.Usage == nil || *usage.Usage != (Usage{10, 5, 15}) {
		t.Errorf("usage chunk %+v", usage)
	}
	reqs := s.ChatRequests()
	if len(reqs) != 1 || reqs[0].Chat.Model != "m1" || reqs[0].Chat.Messages[0].Content != "hi" ||
		!reqs[0].Chat.IncludeUsage() || reqs[0].Header.Get("Authorization") != "Bearer sk-test" || reqs[0].Body["stream"] != true {
		t.Errorf("recorded request %+v", reqs)
	}
}

func TestNoUsageChunkUnlessAsked(t *testing.T) {
	s := start(t, WithResponses(Reply("a")))
	resp := post(t, context.Background(), s.URL(), `{"model":"m","stream":true,"messages":[]}`)
	defer resp.Body.Close()
	for _, c := range decode(t, frames(t, resp.Body)) {
		if c.Usage != nil {
			t.Fatalf("usage chunk sent without include_usage: %+v", c)
		}
	}
}

func TestToolCallFragmentsInterleaved(t *testing.T) {
	steps := Steps(
		ToolCallStart(0, "call_a", "read_file"),
		ToolCallStart(1, "call_b", "web_search"),
		ToolCallArgs(0, `{"path":`),
		ToolCallArgs(1, `{"query":"bees"}`),
		ToolCallArgs(0, `"a.txt"}`),
	)
	s := start(t, WithResponses(Response{Steps: steps}))
	resp := post(t, context.Background(), s.URL(), streamBody)
	defer resp.Body.Close()
	cs := decode(t, frames(t, resp.Body))
	type acc struct{ id, name, args string }
	calls := map[int]*acc{}
	var finish string
	for _, c := range cs {
		for _, ch := range c.Choices {
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
			for _, tc := range ch.Delta.ToolCalls {
				a := calls[tc.Index]
				if a == nil {
					if tc.ID == nil || tc.Type == nil || tc.Function.Name == nil {
						t.Fatalf("first fragment of call %d lacks id/type/name", tc.Index)
					}
					a = &acc{id: *tc.ID, name: *tc.Function.Name}
					calls[tc.Index] = a
				} else if tc.ID != nil || tc.Function.Name != nil {
					t.Fatalf("later fragment of call %d repeats id/name", tc.Index)
				}
				a.args += tc.Function.Arguments
			}
		}
	}
	if finish != "tool_calls" {
		t.Errorf("finish_reason %q, want tool_calls", finish)
	}
	if a := calls[0]; a == nil || a.id != "call_a" || a.name != "read_file" || a.args != `{"path":"a.txt"}` {
		t.Errorf("call 0 = %+v", a)
	}
	if a := calls[1]; a == nil || a.id != "call_b" || a.name != "web_search" || a.args != `{"query":"bees"}` {
		t.Errorf("call 1 = %+v", a)
	}
}

func TestToolCallSplitsArguments(t *testing.T) {
	steps := ToolCall(0, "c", "bash", `{"command":"ls -la"}`, 3)
	if len(steps) != 4 {
		t.Fatalf("got %d steps, want start + 3 pieces", len(steps))
	}
	var joined string
	for _, s := range steps[1:] {
		joined += s.text
	}
	if joined != `{"command":"ls -la"}` {
		t.Errorf("pieces join to %q", joined)
	}
}

func TestErrorStatusWithRetryAfter(t *testing.T) {
	s := start(t, WithResponses(RateLimited("2"), ErrorStatus(401, "Incorrect API key")))
	resp := post(t, context.Background(), s.URL(), streamBody)
	var body struct {
		Error APIError `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" || body.Error.Type != "rate_limit_error" || body.Error.Message == "" {
		t.Errorf("429: status %d retry-after %q body %+v", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	resp = post(t, context.Background(), s.URL(), streamBody)
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != 401 || body.Error.Message != "Incorrect API key" {
		t.Errorf("401: status %d body %+v", resp.StatusCode, body)
	}
}

func TestEmptyQueueAnswers500(t *testing.T) {
	s := start(t)
	resp := post(t, context.Background(), s.URL(), streamBody)
	resp.Body.Close()
	if resp.StatusCode != 500 {
		t.Errorf("status %d, want 500", resp.StatusCode)
	}
}

func TestPauseHoldsStreamUntilReleased(t *testing.T) {
	p := NewPause()
	s := start(t, WithResponses(Response{Steps: []Step{Content("before"), Wait(p), Content("after")}}))
	resp := post(t, context.Background(), s.URL(), streamBody)
	defer resp.Body.Close()
	<-p.Reached()
	br := bufio.NewReader(resp.Body)
	var seen string
	for !strings.Contains(seen, "before") {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		seen += line
	}
	if strings.Contains(seen, "after") {
		t.Fatal("content after the pause arrived before release")
	}
	p.Release()
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "after") || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Errorf("after release got %q", rest)
	}
}

func TestClientCancelIsRecorded(t *testing.T) {
	p := NewPause()
	s := start(t, WithResponses(Response{Steps: []Step{Content("x"), Wait(p)}}))
	ctx, cancel := context.WithCancel(context.Background())
	resp := post(t, ctx, s.URL(), streamBody)
	<-p.Reached()
	cancel()
	resp.Body.Close()
	req := s.ChatRequests()[0]
	select {
	case <-req.Cancelled():
	case <-time.After(5 * time.Second):
		t.Fatal("server never saw the cancellation")
	}
	<-req.Done()
	if s.Cancellations() != 1 {
		t.Errorf("cancellations = %d, want 1", s.Cancellations())
	}
}

func TestCompletedRequestIsNotCancelled(t *testing.T) {
	s := start(t, WithResponses(Reply("ok")))
	resp := post(t, context.Background(), s.URL(), streamBody)
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	req := s.ChatRequests()[0]
	<-req.Done()
	if req.WasCancelled() || s.Cancellations() != 0 {
		t.Error("a completed request was reported as cancelled")
	}
}

func TestCutEndsStreamWithoutDone(t *testing.T) {
	s := start(t, WithResponses(Response{Steps: []Step{Content("part"), Cut()}}))
	resp := post(t, context.Background(), s.URL(), streamBody)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Fatalf("read succeeded after a cut: %q", b)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Logf("read error: %v", err)
	}
	if !strings.Contains(string(b), "part") || strings.Contains(string(b), "[DONE]") {
		t.Errorf("got %q", b)
	}
}

func TestStreamErrorObject(t *testing.T) {
	s := start(t, WithResponses(Response{Steps: []Step{Content("a"), StreamError("overloaded", "server_error", nil)}}))
	resp := post(t, context.Background(), s.URL(), streamBody)
	defer resp.Body.Close()
	fs := frames(t, resp.Body)
	last := fs[len(fs)-1]
	if !strings.HasPrefix(last, `{"error":{"message":"overloaded","type":"server_error"`) {
		t.Errorf("last frame %q, want the error object", last)
	}
}

func TestFastStreamsNTokens(t *testing.T) {
	s := start(t, WithDefault(FastReply(500)))
	for range 2 {
		resp := post(t, context.Background(), s.URL(), streamBody)
		cs := decode(t, frames(t, resp.Body))
		resp.Body.Close()
		n := 0
		for _, c := range cs {
			if len(c.Choices) > 0 && c.Choices[0].Delta.Content != nil && *c.Choices[0].Delta.Content == "tok " {
				n++
			}
		}
		if n != 500 {
			t.Fatalf("got %d tokens, want 500", n)
		}
		if u := cs[len(cs)-1].Usage; u == nil || u.CompletionTokens != 500 {
			t.Errorf("usage %+v, want 500 completion tokens", u)
		}
	}
}

func TestHandlerSeesRequest(t *testing.T) {
	s := start(t, WithHandler(func(r *Request) Response { return Reply("model was " + r.Chat.Model) }))
	resp := post(t, context.Background(), s.URL(), streamBody)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "model was m1") {
		t.Errorf("got %q", b)
	}
}

func TestNonStreamingCompletion(t *testing.T) {
	s := start(t, WithResponses(Reply("he", "llo")))
	resp := post(t, context.Background(), s.URL(), `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`)
	defer resp.Body.Close()
	var body struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if body.Object != "chat.completion" || body.Choices[0].Message.Content != "hello" {
		t.Errorf("got %+v", body)
	}
	if got := s.ChatRequests()[0].Chat.Messages[0].Content; got != "hi" {
		t.Errorf("array content decoded as %q", got)
	}
}

func TestModelsRoute(t *testing.T) {
	s := start(t, WithModels("a", "b"))
	get := func() (*http.Response, error) { return http.Get(s.URL() + "/models") }
	resp, err := get()
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if resp.StatusCode != 200 || list.Object != "list" || len(list.Data) != 2 || list.Data[1].ID != "b" {
		t.Errorf("models: %d %+v", resp.StatusCode, list)
	}

	s.SetModelsStatus(503)
	resp, err = get()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Errorf("status %d, want 503", resp.StatusCode)
	}

	s.SetModelsStatus(0)
	s.SetUnreachable(true)
	if resp, err = get(); err == nil {
		resp.Body.Close()
		t.Fatalf("unreachable server answered %d", resp.StatusCode)
	}
	s.SetUnreachable(false)
	if resp, err = get(); err != nil || resp.StatusCode != 200 {
		t.Fatalf("server did not come back: %v", err)
	}
	resp.Body.Close()
}

func TestUnknownRoute404(t *testing.T) {
	s := start(t)
	resp, err := http.Get(s.URL() + "/nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("status %d", resp.StatusCode)
	}
}
