package agent

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sort"

	openai "github.com/sashabaranov/go-openai"

	"github.com/waggle-os/core/libs/protocol"
)

// stepResult is what one model call produced.
type stepResult struct {
	content    string
	calls      []*pendingCall
	usage      openai.Usage
	streamed   bool   // a token reached the sink: the call must not be retried
	retryAfter string // Retry-After of a failed answer
}

// pendingCall is a tool call assembled from its stream fragments.
type pendingCall struct {
	index int
	id    string
	name  string
	args  []byte
}

// stream makes one streamed model call, sending content deltas to sink as
// tokens the moment they arrive. ctx cancels the HTTP request, so the
// stream stops at once.
func (a *Agent) stream(ctx context.Context, model string, msgs []openai.ChatCompletionMessage, tools []openai.Tool, sink Sink) (stepResult, error) {
	var sr stepResult
	meta := &responseMeta{}
	s, err := a.client.CreateChatCompletionStream(context.WithValue(ctx, responseMetaKey{}, meta), openai.ChatCompletionRequest{
		Model:         model,
		Messages:      msgs,
		Tools:         tools,
		Stream:        true,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
	})
	if err != nil {
		sr.retryAfter = meta.retryAfter
		return sr, err
	}
	defer s.Close()

	var content []byte
	byIndex := map[int]*pendingCall{}
	for {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			sr.content = string(content)
			return sr, err
		}
		if chunk.Usage != nil {
			sr.usage = *chunk.Usage
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			if d := ch.Delta.Content; d != "" {
				content = append(content, d...)
				sr.streamed = true
				emitText(sink, protocol.EventToken, d)
			}
			for i, tc := range ch.Delta.ToolCalls {
				idx := i
				if tc.Index != nil {
					idx = *tc.Index
				}
				pc := byIndex[idx]
				if pc == nil {
					pc = &pendingCall{index: idx}
					byIndex[idx] = pc
					sr.calls = append(sr.calls, pc)
				}
				if tc.ID != "" {
					pc.id = tc.ID
				}
				if tc.Function.Name != "" {
					pc.name += tc.Function.Name
				}
				pc.args = append(pc.args, tc.Function.Arguments...)
			}
		}
	}
	sr.content = string(content)
	sort.SliceStable(sr.calls, func(i, j int) bool { return sr.calls[i].index < sr.calls[j].index })
	for i, pc := range sr.calls {
		if pc.id == "" {
			pc.id = "call_" + itoa(i)
		}
	}
	return sr, nil
}

// responseMeta carries response headers the go-openai error types drop.
type responseMeta struct{ retryAfter string }

type responseMetaKey struct{}

// metaTransport sets the turn's API key (credential pool) and records the
// Retry-After header of a response into the request context's responseMeta. RoundTrip runs on the caller's goroutine,
// so the write happens before the caller reads it.
type metaTransport struct{ base http.RoundTripper }

func (t *metaTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(authorize(req))
	if resp != nil {
		if m, ok := req.Context().Value(responseMetaKey{}).(*responseMeta); ok {
			m.retryAfter = resp.Header.Get("Retry-After")
		}
	}
	return resp, err
}

func newHTTPClient(cfg Config) *http.Client {
	var c http.Client
	if cfg.HTTPClient != nil {
		c = *cfg.HTTPClient
	}
	base := c.Transport
	if base == nil {
		if cfg.HTTPClient != nil {
			base = http.DefaultTransport
		} else {
			t := http.DefaultTransport.(*http.Transport).Clone()
			t.ResponseHeaderTimeout = cfg.ResponseHeaderTimeout
			base = t
		}
	}
	c.Transport = &metaTransport{base: base}
	return &c
}
