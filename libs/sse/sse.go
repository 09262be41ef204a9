// Package sse writes Server-Sent Events the way Waggle clients parse them:
// one write and one flush per event, `id:` then `event:` then a single
// `data:` line, LF line endings.
package sse

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
)

// Headers are the response headers of every Waggle event stream
// (contract §1). Content-Type carries no charset: clients compare it
// exactly.
var Headers = map[string]string{
	"Content-Type":      "text/event-stream",
	"Cache-Control":     "no-cache",
	"Connection":        "keep-alive",
	"X-Accel-Buffering": "no",
}

// ErrNoFlush means the ResponseWriter cannot flush, so events would sit in a
// buffer instead of reaching the client.
var ErrNoFlush = errors.New("sse: response writer cannot flush")

// Writer writes events to one response. It is not safe for concurrent use:
// one goroutine owns a stream.
type Writer struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf []byte
}

// Start writes the status line and headers (Headers plus extra) and flushes
// them at once, so a client sees the stream open before the first event.
func Start(w http.ResponseWriter, extra map[string]string) (*Writer, error) {
	h := w.Header()
	for k, v := range Headers {
		h.Set(k, v)
	}
	for k, v := range extra {
		h.Set(k, v)
	}
	w.WriteHeader(http.StatusOK)
	sw := &Writer{w: w, rc: http.NewResponseController(w), buf: make([]byte, 0, 512)}
	if err := sw.rc.Flush(); err != nil {
		return nil, ErrNoFlush
	}
	return sw, nil
}

// Event writes one event. id 0 omits the id line. data must be single-line
// JSON (encoding/json output is).
//
// A small event is framed in one reused buffer and written at once; a
// large one (a coalesced run of tokens, a done carrying a long reply) is
// written around its data instead of being copied, so a stream never holds
// a second copy of its largest event, or keeps that much buffer after it.
func (s *Writer) Event(id uint64, name string, data []byte) error {
	if len(data) <= copyLimit {
		b := AppendEvent(s.buf[:0], id, name, data)
		s.buf = b[:0]
		if _, err := s.w.Write(b); err != nil {
			return err
		}
		return s.rc.Flush()
	}
	head := AppendEvent(s.buf[:0], id, name, nil)
	s.buf = head[:0]
	head = head[:len(head)-2] // without the closing blank line
	for _, part := range [][]byte{head, data, []byte("\n\n")} {
		if _, err := s.w.Write(part); err != nil {
			return err
		}
	}
	return s.rc.Flush()
}

// copyLimit is the largest event data framed by copying.
const copyLimit = 16 << 10

// AppendEvent appends the wire form of one event to b.
func AppendEvent(b []byte, id uint64, name string, data []byte) []byte {
	if id != 0 {
		b = append(b, "id: "...)
		b = strconv.AppendUint(b, id, 10)
		b = append(b, '\n')
	}
	b = append(b, "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, '\n', '\n')
}

// Comment writes a comment line (clients ignore it); used as a keep-alive
// so proxies and clients see bytes during long waits.
func (s *Writer) Comment(text string) error {
	b := append(s.buf[:0], ": "...)
	b = append(b, text...)
	b = append(b, '\n', '\n')
	s.buf = b[:0]
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}

// LastEventID returns the event id a reconnecting client has seen, from the
// Last-Event-ID header or the `after` query parameter (header wins). ok is
// false when neither is present; a malformed value is an error.
func LastEventID(r *http.Request) (id uint64, ok bool, err error) {
	v := strings.TrimSpace(r.Header.Get("Last-Event-ID"))
	if v == "" {
		v = strings.TrimSpace(r.URL.Query().Get("after"))
	}
	if v == "" {
		return 0, false, nil
	}
	id, err = strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false, errors.New("sse: Last-Event-ID must be a decimal event id")
	}
	return id, true, nil
}
