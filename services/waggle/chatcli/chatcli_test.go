package chatcli

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestCompleter(t *testing.T) {
	complete := completer([]command{{Name: "catchup", Aliases: []string{"catch-up", "recap"}}, {Name: "status"}, {Name: "draft"}})
	tab := func(line string) (string, bool) {
		got, pos, ok := complete(line, len(line), '\t')
		if ok && pos != len(got) {
			t.Fatalf("%q: cursor %d on %q", line, pos, got)
		}
		return got, ok
	}
	tests := []struct {
		line, want string
		ok         bool
	}{
		{"/sta", "/status ", true},
		{"/rec", "/recap ", true},
		{"/catc", "/catch", true}, // common prefix of catchup and catch-up
		{"/x", "", false},
		{"hello /sta", "", false},
		{"/status now", "", false},
	}
	for _, tt := range tests {
		if got, ok := tab(tt.line); got != tt.want || ok != tt.ok {
			t.Errorf("Tab on %q: %q %v, want %q %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
	// At the common prefix, Tab cycles through the matches.
	first, _ := tab("/catch")
	second, _ := tab(first)
	third, _ := tab(second)
	if first != "/catch-up" || second != "/catchup" || third != "/catch-up" {
		t.Errorf("cycle: %q %q %q", first, second, third)
	}
	// Any other key is typed as usual.
	if _, _, ok := complete("/sta", 4, 't'); ok {
		t.Error("a letter was taken by completion")
	}
}

func TestEvents(t *testing.T) {
	stream := ": keep-alive\n\nid: 1\nevent: token\ndata: {\"content\":\"a\"}\n\n" +
		"id: 2\r\nevent: step\r\ndata: {\"content\":\r\ndata: \"b\"}\r\n\r\n" +
		"id: 3\nevent: done\ndata: {}"
	evs := newEvents(io.NopCloser(strings.NewReader(stream)))
	want := []event{{"1", "token", []byte(`{"content":"a"}`)}, {"2", "step", []byte("{\"content\":\n\"b\"}")}}
	for _, w := range want {
		got, err := evs.Next()
		if err != nil || got.ID != w.ID || got.Name != w.Name || !bytes.Equal(got.Data, w.Data) {
			t.Fatalf("event %+v %v, want %+v", got, err, w)
		}
	}
	// A stream cut inside an event ends without it.
	if got, err := evs.Next(); err != io.EOF {
		t.Fatalf("cut stream: %+v %v", got, err)
	}
}

func TestAPIError(t *testing.T) {
	tests := []struct {
		status int
		body   string
		want   string
	}{
		{400, `{"error":"Message too long (60 > 10)","code":"MESSAGE_TOO_LONG"}`, "400 Message too long (60 > 10) (MESSAGE_TOO_LONG)"},
		{400, `{"statusCode":400,"error":"Bad Request","message":"Invalid session: contains illegal characters"}`, "400 Invalid session: contains illegal characters"},
		{502, `<html>bad gateway</html>`, "502 Bad Gateway"},
		{401, `{"error":"Unauthorized","code":"INVALID_TOKEN"}`, "401 Unauthorized (INVALID_TOKEN)"},
	}
	for _, tt := range tests {
		err := readAPIError(&http.Response{StatusCode: tt.status, Body: io.NopCloser(strings.NewReader(tt.body))})
		if err.Error() != tt.want {
			t.Errorf("%d %s: %q, want %q", tt.status, tt.body, err, tt.want)
		}
	}
}

func TestKeyReaderCtrlCClearsLine(t *testing.T) {
	keys := make(chan byte, 4)
	keys <- 'x'
	keys <- keyCtrlC
	close(keys)
	kr := &keyReader{keys: keys}
	var got []byte
	buf := make([]byte, 8)
	for {
		n, err := kr.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			break
		}
		if n != 1 {
			t.Fatalf("Read gave %d bytes; one key at a time keeps later keys for the turn", n)
		}
	}
	if string(got) != "x\x05\x15" {
		t.Fatalf("keys %q", got)
	}
}

func TestKeyReaderUnreadComesFirst(t *testing.T) {
	keys := make(chan byte, 1)
	keys <- 'z'
	close(keys)
	kr := &keyReader{keys: keys}
	kr.unread([]byte("ab\r"))
	got, err := io.ReadAll(kr)
	if err != nil || string(got) != "ab\rz" {
		t.Fatalf("keys %q %v, want the typed-ahead keys first", got, err)
	}
}
