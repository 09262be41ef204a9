package gateway

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestHostPolicy(t *testing.T) {
	tests := []struct {
		name     string
		listen   string
		hostname string
		allowed  []string
		host     string
		want     bool
	}{
		{"localhost with port", "127.0.0.1:3333", "box", nil, "localhost:3333", true},
		{"localhost without port", "127.0.0.1:3333", "box", nil, "localhost", true},
		{"localhost other port (dev proxy)", "127.0.0.1:3333", "box", nil, "localhost:5173", true},
		{"localhost upper case, trailing dot", "127.0.0.1:3333", "box", nil, "LocalHost.:3333", true},
		{"127.0.0.1 with port", "127.0.0.1:3333", "box", nil, "127.0.0.1:3333", true},
		{"127.0.0.1 without port", "127.0.0.1:3333", "box", nil, "127.0.0.1", true},
		{"[::1] with port", "127.0.0.1:3333", "box", nil, "[::1]:3333", true},
		{"[::1] without port", "127.0.0.1:3333", "box", nil, "[::1]", true},
		{"subdomain of localhost", "127.0.0.1:3333", "box", nil, "app.localhost:3333", true},
		{"rebound name", "127.0.0.1:3333", "box", nil, "evil.example:3333", false},
		{"rebound name without port", "127.0.0.1:3333", "box", nil, "evil.example", false},
		{"localhost as a prefix", "127.0.0.1:3333", "box", nil, "localhost.evil.example:3333", false},
		{"localhost as a suffix without dot", "127.0.0.1:3333", "box", nil, "evillocalhost:3333", false},
		{"empty Host", "127.0.0.1:3333", "box", nil, "", false},
		{"garbage Host", "127.0.0.1:3333", "box", nil, "evil example", false},
		{"machine name refused on a loopback bind", "127.0.0.1:3333", "box", nil, "box:3333", false},
		{"listen name", "waggle.lan:3333", "box", nil, "waggle.lan:3333", true},
		{"listen name, case", "Waggle.LAN:3333", "box", nil, "waggle.lan", true},
		{"any bind: machine name", "0.0.0.0:3333", "box.corp.example", nil, "box.corp.example:3333", true},
		{"any bind: machine short name", "0.0.0.0:3333", "box.corp.example", nil, "box:3333", true},
		{"any bind: LAN address", "0.0.0.0:3333", "box", nil, "192.168.1.20:3333", true},
		{"any bind: IPv6 address", "[::]:3333", "box", nil, "[2001:db8::7]:3333", true},
		{"empty listen host: machine name", ":3333", "box", nil, "box", true},
		{"any bind: other name", "0.0.0.0:3333", "box", nil, "evil.example:3333", false},
		{"configured name", "0.0.0.0:3333", "box", []string{"waggle.example.com"}, "waggle.example.com", true},
		{"configured name, port and case", "0.0.0.0:3333", "box", []string{"Waggle.Example.com"}, "WAGGLE.example.com:443", true},
		{"configured name, not its subdomain", "0.0.0.0:3333", "box", []string{"waggle.example.com"}, "a.waggle.example.com", false},
		{"configured name on a loopback bind", "127.0.0.1:3333", "box", []string{"waggle.test"}, "waggle.test:3333", true},
		{"configured domain: itself", "0.0.0.0:3333", "box", []string{".example.com"}, "example.com", true},
		{"configured domain: subdomain", "0.0.0.0:3333", "box", []string{".example.com"}, "team.example.com", true},
		{"configured domain: look-alike", "0.0.0.0:3333", "box", []string{".example.com"}, "evilexample.com", false},
		{"configured wildcard domain", "0.0.0.0:3333", "box", []string{"*.example.com"}, "team.example.com", true},
		{"star turns the check off", "127.0.0.1:3333", "box", []string{"*"}, "evil.example:3333", true},
		{"blank entries ignored", "127.0.0.1:3333", "box", []string{"", " "}, "evil.example", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newHostPolicy(tt.listen, tt.hostname, tt.allowed)
			if got := p.allows(tt.host); got != tt.want {
				t.Errorf("allows(%q) with listen %q, allowed %q = %v, want %v", tt.host, tt.listen, tt.allowed, got, tt.want)
			}
		})
	}
}

func TestHostCheckMiddleware(t *testing.T) {
	s := &Service{log: slog.New(slog.NewTextHandler(io.Discard, nil)), hosts: newHostPolicy("127.0.0.1:3333", "", nil)}
	reached := false
	h := s.hostCheck(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = true
		w.WriteHeader(http.StatusNoContent)
	}))
	for _, tt := range []struct {
		method, path, host string
		status             int
	}{
		{"GET", "/health", "localhost:3333", 204},
		{"GET", "/health", "evil.example:3333", 403},
		{"POST", "/api/chat", "evil.example:3333", 403},
		{"OPTIONS", "/api/chat", "evil.example:3333", 403},
		{"POST", "/api/chat", "127.0.0.1:3333", 204},
		{"GET", "/health", "", 204}, // HTTP/1.0, no Host: not a browser
	} {
		reached = false
		r := httptest.NewRequest(tt.method, tt.path, nil)
		r.Host = tt.host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tt.status || reached != (tt.status == 204) {
			t.Errorf("%s %s Host %s: status %d (handler reached %v), want %d", tt.method, tt.path, tt.host, w.Code, reached, tt.status)
			continue
		}
		if tt.status != 403 {
			continue
		}
		var body map[string]string
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("403 body %q: %v", w.Body.Bytes(), err)
		}
		if body["code"] != HostNotAllowed || body["error"] != hostNotAllowedMessage {
			t.Errorf("403 body %v", body)
		}
	}
}
