package agent

import (
	"context"
	"net/http"

	openai "github.com/sashabaranov/go-openai"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/chatstream"
)

// stepResult is what one model call produced.
type stepResult struct {
	chatstream.Reply        // Streamed: a token reached the sink, the call must not be retried
	retryAfter       string // Retry-After of a failed answer
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
	sr.Reply, err = chatstream.Read(s, func(d string) { emitText(sink, protocol.EventToken, d) })
	return sr, err
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
