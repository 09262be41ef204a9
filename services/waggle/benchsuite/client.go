package benchsuite

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// newClient is an HTTP client for many concurrent long-lived streams on
// loopback: one connection per stream, no compression, no global timeout
// (every request carries its own context).
func newClient(maxConns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConns:        maxConns,
		MaxIdleConnsPerHost: maxConns,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}}
}

// Trace is what a client saw of one streamed answer. Times are since the
// request was sent.
type Trace struct {
	// Status is the HTTP status.
	Status int
	// Opened is when the response headers arrived.
	Opened time.Duration
	// First is when the first token's bytes arrived (0 if none did).
	First time.Duration
	// Last is when the last token's bytes arrived.
	Last time.Duration
	// Events counts token events (SSE events or model chunks with text).
	Events int
	// Bytes is the length of all token text received.
	Bytes int
	// Gaps are the times between consecutive token events, when recorded.
	Gaps []time.Duration
	// Terminal is the terminal event: done, error (server), [DONE] (stub).
	Terminal string
	// Body is the error body of a non-200 answer (truncated).
	Body string
}

// traceOpts say what to record while reading.
type traceOpts struct {
	gaps bool
	// opened, when set, is called once the headers arrived; the read then
	// continues.
	opened func()
	// firstToken, when set, is called once the first token arrived.
	firstToken func()
}

var contentKey = []byte(`"content":"`)

// tokenText returns the length of the first "content" string of a JSON
// line without decoding it: bench tokens never contain quotes, and the
// client must not become the bottleneck it measures.
func tokenText(data []byte) int {
	i := bytes.Index(data, contentKey)
	if i < 0 {
		return -1
	}
	rest := data[i+len(contentKey):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return -1
	}
	return j
}

// ChatTurn posts a chat turn to the gateway and reads its SSE stream to
// the terminal event.
func ChatTurn(ctx context.Context, c *http.Client, baseURL, message, session string, o traceOpts) (Trace, error) {
	body, _ := json.Marshal(map[string]string{"message": message, "session": session})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/api/chat", bytes.NewReader(body))
	if err != nil {
		return Trace{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	return readStream(c, req, o, false)
}

// DirectTurn asks the model stub directly for a streamed completion, as
// the runner would, and reads it to [DONE].
func DirectTurn(ctx context.Context, c *http.Client, llmURL, message string, o traceOpts) (Trace, error) {
	body, _ := json.Marshal(map[string]any{
		"model": "bench", "stream": true,
		"messages": []map[string]string{{"role": "system", "content": "bench"}, {"role": "user", "content": message}},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, llmURL+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return Trace{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	return readStream(c, req, o, true)
}

// readStream sends req and parses the SSE answer. direct selects the
// model-stub dialect (`data:` chunks, `[DONE]`) over the gateway's
// (`event:` + `data:`, terminal done/error).
func readStream(c *http.Client, req *http.Request, o traceOpts, direct bool) (Trace, error) {
	var tr Trace
	t0 := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return tr, err
	}
	defer resp.Body.Close()
	tr.Status, tr.Opened = resp.StatusCode, time.Since(t0)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		tr.Body = string(b)
		return tr, nil
	}
	if o.opened != nil {
		o.opened()
	}
	// A small buffer per stream: ten thousand streams are read at once.
	// Lines longer than it (the done event carries the whole reply) are
	// classified by their start and the rest is skipped.
	r := bufio.NewReaderSize(resp.Body, 4<<10)
	var event []byte
	var prev time.Duration
	for {
		line, err := r.ReadSlice('\n')
		for errors.Is(err, bufio.ErrBufferFull) {
			line = append([]byte(nil), line...)
			_, err = r.ReadSlice('\n')
		}
		if err != nil {
			if errors.Is(err, io.EOF) && tr.Terminal != "" {
				return tr, nil
			}
			return tr, fmt.Errorf("benchsuite: stream ended without a terminal event after %d tokens: %w", tr.Events, err)
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			event = event[:0]
		case bytes.HasPrefix(line, []byte("event: ")):
			event = append(event[:0], line[len("event: "):]...)
		case bytes.HasPrefix(line, []byte("data: ")):
			data := line[len("data: "):]
			isToken := false
			n := 0
			if direct {
				if string(data) == "[DONE]" {
					tr.Terminal = "[DONE]"
					return tr, nil
				}
				n = tokenText(data)
				isToken = n > 0
			} else {
				switch string(event) {
				case "token":
					isToken = true
					n = max(tokenText(data), 0)
				case "done", "error":
					tr.Terminal = string(event)
					if string(event) == "error" {
						tr.Body = string(data)
					}
					return tr, nil
				}
			}
			if !isToken {
				continue
			}
			now := time.Since(t0)
			if tr.Events == 0 {
				tr.First = now
				if o.firstToken != nil {
					o.firstToken()
				}
			} else if o.gaps {
				tr.Gaps = append(tr.Gaps, now-prev)
			}
			prev, tr.Last = now, now
			tr.Events++
			tr.Bytes += n
		}
	}
}

// timedGet reads a whole GET response and reports its status, time and size.
func timedGet(ctx context.Context, c *http.Client, url string) (int, time.Duration, int, error) {
	t0 := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, time.Since(t0), int(n), err
}
