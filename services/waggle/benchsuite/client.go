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
	// DoneBytes is the length of the done event's content (the whole reply
	// as the server stored it), -1 without a done event.
	DoneBytes int
	// StreamGaps counts stream_gap events: the client fell behind the
	// server's kept window and that many times events were not delivered.
	StreamGaps int
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

// tokenText returns the decoded length in bytes of the first "content"
// string of a JSON line, or -1 when there is none. Plain strings (bench
// tokens) are measured without decoding, so the client does not become
// the bottleneck it measures; a string with escapes (echo replies, a done
// event's full text) is decoded, so the count is exact either way.
func tokenText(data []byte) int {
	i := bytes.Index(data, contentKey)
	if i < 0 {
		return -1
	}
	start := i + len(contentKey)
	escaped := false
	for j := start; j < len(data); j++ {
		switch data[j] {
		case '\\':
			escaped = true
			j++ // the escaped byte cannot end the string
		case '"':
			if !escaped {
				return j - start
			}
			var s string
			if json.Unmarshal(data[start-1:j+1], &s) != nil {
				return -1
			}
			return len(s)
		}
	}
	return -1
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
	tr := Trace{DoneBytes: -1}
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
	lines := newLineReader(resp.Body)
	var event []byte
	var prev time.Duration
	for {
		line, err := lines.next()
		if err != nil {
			if errors.Is(err, io.EOF) && tr.Terminal != "" {
				return tr, nil
			}
			if errors.Is(err, io.EOF) && tr.StreamGaps > 0 {
				// The server said what was lost and ended the stream: the
				// turn's events were gone. Not silent, so not a broken stream.
				tr.Terminal = "stream_gap"
				return tr, nil
			}
			return tr, fmt.Errorf("benchsuite: stream ended without a terminal event after %d tokens (%d bytes): %w", tr.Events, tr.Bytes, err)
		}
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
				case "stream_gap":
					tr.StreamGaps++
				case "done", "error":
					tr.Terminal = string(event)
					if string(event) == "error" {
						tr.Body = string(data)
					} else {
						tr.DoneBytes = tokenText(data)
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

// lineReader reads whole lines of any length. Ten thousand streams are read
// at once, so each has a small buffer, and a line longer than it (a done
// event carries the whole reply; a burst of tokens joined into one event
// can be as long) is assembled in a second buffer that grows only then.
type lineReader struct {
	r    *bufio.Reader
	long []byte
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 4<<10)}
}

// next returns the next line without its line ending; the slice is valid
// until the next call. A last line without a newline is an error: an SSE
// event is only complete with its blank line.
func (l *lineReader) next() ([]byte, error) {
	line, err := l.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		l.long = append(l.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = l.r.ReadSlice('\n')
			l.long = append(l.long, line...)
		}
		line = l.long
	}
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return bytes.TrimRight(line, "\r\n"), nil
}

// openStalled posts a chat turn and returns as soon as the response
// headers arrived, without reading the body: a client that stopped
// reading but keeps its connection open. The caller closes the body.
func openStalled(ctx context.Context, c *http.Client, baseURL, message, session string) (*http.Response, error) {
	body, _ := json.Marshal(map[string]string{"message": message, "session": session})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/api/chat", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return c.Do(req)
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
