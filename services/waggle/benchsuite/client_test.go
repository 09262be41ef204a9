package benchsuite

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/sse"
)

func TestTokenTextDecodesEscapes(t *testing.T) {
	tests := []struct {
		line string
		want int
	}{
		{`{"content":"a\"b\n"}`, 4},
		{`{"content":"\\"}`, 1},
		{`{"content":"\u00e9x"}`, 3},
		{`{"content":"Your message: \"hi\"","usage":{}}`, len(`Your message: "hi"`)},
		{`{"content":"unterminated`, -1},
	}
	for _, tt := range tests {
		if got := tokenText([]byte(tt.line)); got != tt.want {
			t.Errorf("tokenText(%s) = %d, want %d", tt.line, got, tt.want)
		}
	}
}

// sseServer answers every request with the given events written by
// libs/sse, then, unless terminal is empty, the terminal event.
func sseServer(t *testing.T, tokens []string, terminal string, cut bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out, err := sse.Start(w, nil)
		if err != nil {
			return
		}
		var all strings.Builder
		for i, tok := range tokens {
			all.WriteString(tok)
			data, _ := json.Marshal(map[string]string{"content": tok})
			_ = out.Event(uint64(i+1), "token", data)
		}
		if cut {
			_, _ = w.Write([]byte("event: token\ndata: {\"content\":\"half"))
			return
		}
		if terminal != "" {
			data, _ := json.Marshal(map[string]any{"content": all.String(), "toolsUsed": []string{}})
			_ = out.Event(uint64(len(tokens)+1), terminal, data)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestReadStreamCountsLongEvents: an event far longer than the reader's
// buffer (tokens joined by a server that coalesces) is counted whole, and
// the done event's text is measured too (issue 11: the old client cut
// such lines at 4 KiB and reported lost tokens).
func TestReadStreamCountsLongEvents(t *testing.T) {
	big := strings.Repeat("tok ", 50000) // 200 KB in one event
	tokens := []string{"tok ", big, "tok ", strings.Repeat("x", 4093), "é\"\n"}
	want := 0
	for _, tok := range tokens {
		want += len(tok)
	}
	srv := sseServer(t, tokens, "done", false)
	tr, err := ChatTurn(context.Background(), newClient(4), srv.URL, "m", "s", traceOpts{gaps: true})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Terminal != "done" || tr.Bytes != want || tr.DoneBytes != want || tr.Events != len(tokens) || len(tr.Gaps) != len(tokens)-1 {
		t.Fatalf("terminal %q, %d bytes (done %d) in %d events, %d gaps; want done, %d bytes in %d events",
			tr.Terminal, tr.Bytes, tr.DoneBytes, tr.Events, len(tr.Gaps), want, len(tokens))
	}
	if why := streamCheck(tr, err, want, false); why != "" {
		t.Fatalf("streamCheck of a complete stream: %s", why)
	}
}

func TestReadStreamReportsBrokenStreams(t *testing.T) {
	tests := []struct {
		name     string
		terminal string
		cut      bool
		wantErr  string
	}{
		{"no terminal event", "", false, "without a terminal event after 2 tokens (8 bytes): EOF"},
		{"cut inside a line", "", true, "unexpected EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := sseServer(t, []string{"tok ", "tok "}, tt.terminal, tt.cut)
			tr, err := ChatTurn(context.Background(), newClient(4), srv.URL, "m", "s", traceOpts{})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err %v, want %q", err, tt.wantErr)
			}
			if why := streamCheck(tr, err, 8, false); why == "" {
				t.Fatal("streamCheck passed a broken stream")
			}
		})
	}
	srv := sseServer(t, []string{"tok "}, "error", false)
	tr, err := ChatTurn(context.Background(), newClient(4), srv.URL, "m", "s", traceOpts{})
	if err != nil || tr.Terminal != "error" {
		t.Fatalf("error event: terminal %q err %v", tr.Terminal, err)
	}
	if why := streamCheck(tr, err, 4, false); !strings.Contains(why, `terminal "error"`) {
		t.Fatalf("streamCheck of an error-terminated stream: %q", why)
	}
	short := fmt.Sprint(streamCheck(Trace{Status: 200, Terminal: "done", Bytes: 4, DoneBytes: 4}, nil, 8, false))
	if !strings.Contains(short, "4 of 8 token bytes") {
		t.Fatalf("short stream: %q", short)
	}
}

// TestReadStreamNamesStreamGaps: a client told it fell behind (stream_gap)
// is not a broken stream, but its tokens are not all there: the check says
// so instead of calling it a silent loss.
func TestReadStreamNamesStreamGaps(t *testing.T) {
	tests := []struct {
		name, terminal string
	}{
		{"gap, then done", "done"},
		{"gap, then the stream ends", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				out, _ := sse.Start(w, nil)
				_ = out.Event(1, "token", []byte(`{"content":"tok "}`))
				_ = out.Event(0, "stream_gap", []byte(`{"missed":3,"message":"Part of this reply was not kept"}`))
				_ = out.Event(5, "token", []byte(`{"content":"tok "}`))
				if tt.terminal != "" {
					_ = out.Event(6, tt.terminal, []byte(`{"content":"tok tok tok tok tok "}`))
				}
			}))
			defer srv.Close()
			tr, err := ChatTurn(context.Background(), newClient(4), srv.URL, "m", "s", traceOpts{})
			if err != nil {
				t.Fatal(err)
			}
			if tr.StreamGaps != 1 || tr.Bytes != 8 {
				t.Fatalf("trace %+v", tr)
			}
			if why := streamCheck(tr, err, 20, false); !strings.Contains(why, "fell behind: 1 stream_gap event(s), 8 of 20 token bytes live") {
				t.Fatalf("streamCheck: %q", why)
			}
		})
	}
}
