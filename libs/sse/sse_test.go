package sse

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestStartAndEventBytes(t *testing.T) {
	rec := httptest.NewRecorder()
	w, err := Start(rec, map[string]string{"X-Waggle-Turn-Id": "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Flushed {
		t.Fatal("headers not flushed at start")
	}
	if err := w.Event(7, "token", []byte(`{"content":"a<b>"}`)); err != nil {
		t.Fatal(err)
	}
	if err := w.Event(0, "done", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := w.Comment("keep-alive"); err != nil {
		t.Fatal(err)
	}
	want := "id: 7\nevent: token\ndata: {\"content\":\"a<b>\"}\n\nevent: done\ndata: {}\n\n: keep-alive\n\n"
	if got := rec.Body.String(); got != want {
		t.Fatalf("body = %q\nwant %q", got, want)
	}
	for k, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
		"Connection": "keep-alive", "X-Accel-Buffering": "no", "X-Waggle-Turn-Id": "t1"} {
		if got := rec.Header().Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
}

func TestLastEventID(t *testing.T) {
	tests := []struct {
		header, query string
		id            uint64
		ok, err       bool
	}{
		{"", "", 0, false, false},
		{"42", "", 42, true, false},
		{"", "9", 9, true, false},
		{"5", "9", 5, true, false},
		{"x", "", 0, false, true},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodGet, "/?after="+tt.query, nil)
		if tt.query == "" {
			r = httptest.NewRequest(http.MethodGet, "/", nil)
		}
		if tt.header != "" {
			r.Header.Set("Last-Event-ID", tt.header)
		}
		id, ok, err := LastEventID(r)
		if id != tt.id || ok != tt.ok || (err != nil) != tt.err {
			t.Errorf("LastEventID(%q,%q) = %d,%v,%v", tt.header, tt.query, id, ok, err)
		}
	}
}

// TestLargeEventBytes: an event too large to copy is written around its
// data, byte for byte the same frame as a small one.
func TestLargeEventBytes(t *testing.T) {
	rec := httptest.NewRecorder()
	w, err := Start(rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte(`{"content":"` + strings.Repeat("x", 3*copyLimit) + `"}`)
	if err := w.Event(9, "done", data); err != nil {
		t.Fatal(err)
	}
	if err := w.Event(10, "token", []byte(`{"content":"after"}`)); err != nil {
		t.Fatal(err)
	}
	want := string(AppendEvent(nil, 9, "done", data)) + "id: 10\nevent: token\ndata: {\"content\":\"after\"}\n\n"
	if got := rec.Body.String(); got != want {
		t.Fatalf("large event framed wrong: got %d bytes, want %d", len(got), len(want))
	}
}
