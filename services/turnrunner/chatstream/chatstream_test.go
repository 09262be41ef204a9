package chatstream

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// serve answers every chat completion with the SSE data lines given
// (each is one chunk's JSON), then [DONE].
func serve(t testing.TB, chunks []string) *openai.Client {
	t.Helper()
	body := ""
	for _, c := range chunks {
		body += "data: " + c + "\n\n"
	}
	body += "data: [DONE]\n\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	cfg := openai.DefaultConfig("k")
	cfg.BaseURL = srv.URL + "/v1"
	return openai.NewClientWithConfig(cfg)
}

func open(t testing.TB, c *openai.Client) *openai.ChatCompletionStream {
	t.Helper()
	s, err := c.CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{Model: "m", Stream: true})
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	return s
}

func delta(d string) string {
	return `{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":` + d + `}]}`
}

func TestRead(t *testing.T) {
	tests := []struct {
		name     string
		chunks   []string
		tokens   []string
		content  string
		calls    []ToolCall
		usage    int // total tokens
		streamed bool
	}{
		{
			name:     "text",
			chunks:   []string{delta(`{"content":"Hel"}`), delta(`{"content":""}`), delta(`{"content":"lo"}`), `{"id":"x","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`},
			tokens:   []string{"Hel", "lo"},
			content:  "Hello",
			usage:    5,
			streamed: true,
		},
		{
			name: "tool calls by index, fragments joined, missing ids filled",
			chunks: []string{
				delta(`{"tool_calls":[{"index":1,"function":{"name":"b","arguments":"{\"x\""}}]}`),
				delta(`{"tool_calls":[{"index":0,"id":"c0","function":{"name":"a","arguments":"{}"}}]}`),
				delta(`{"tool_calls":[{"index":1,"function":{"arguments":":1}"}}]}`),
			},
			calls: []ToolCall{{Index: 0, ID: "c0", Name: "a", Args: []byte("{}")}, {Index: 1, ID: "call_1", Name: "b", Args: []byte(`{"x":1}`)}},
		},
		{
			name:   "other choices ignored",
			chunks: []string{`{"id":"x","choices":[{"index":1,"delta":{"content":"no"}}]}`, delta(`{"content":"yes"}`)},
			tokens: []string{"yes"}, content: "yes", streamed: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, serve(t, tc.chunks))
			defer s.Close()
			var tokens []string
			rep, err := Read(s, func(d string) { tokens = append(tokens, d) })
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if rep.Content != tc.content || rep.Streamed != tc.streamed || rep.Usage.TotalTokens != tc.usage {
				t.Errorf("content %q streamed %v usage %d, want %q %v %d", rep.Content, rep.Streamed, rep.Usage.TotalTokens, tc.content, tc.streamed, tc.usage)
			}
			if fmt.Sprint(tokens) != fmt.Sprint(tc.tokens) {
				t.Errorf("tokens %q, want %q", tokens, tc.tokens)
			}
			if len(rep.Calls) != len(tc.calls) {
				t.Fatalf("%d calls, want %d", len(rep.Calls), len(tc.calls))
			}
			for i, c := range rep.Calls {
				w := tc.calls[i]
				if c.Index != w.Index || c.ID != w.ID || c.Name != w.Name || string(c.Args) != string(w.Args) {
					t.Errorf("call %d = %+v (args %s), want %+v (args %s)", i, *c, c.Args, w, w.Args)
				}
			}
		})
	}
}

func TestReadNilOnToken(t *testing.T) {
	s := open(t, serve(t, []string{delta(`{"content":"a"}`)}))
	defer s.Close()
	rep, err := Read(s, nil)
	if err != nil || rep.Content != "a" || !rep.Streamed {
		t.Fatalf("Read = %+v, %v; want content a, streamed", rep, err)
	}
}

// BenchmarkRead measures the per-token path: one 500-token reply.
func BenchmarkRead(b *testing.B) {
	chunks := make([]string, 500)
	for i := range chunks {
		chunks[i] = delta(`{"content":"tok` + strings.Repeat("x", i%5) + ` "}`)
	}
	c := serve(b, chunks)
	b.ReportAllocs()
	for b.Loop() {
		s := open(b, c)
		n := 0
		if _, err := Read(s, func(d string) { n += len(d) }); err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}
