package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestConfigOrigins(t *testing.T) {
	c := Config{AllowedOrigins: []string{"https://App.example.com/", "tauri://localhost", " "}}
	got := c.origins()
	if got[0] != "http://localhost:1420" || len(got) != len(DesktopOrigins)+1 || got[len(got)-1] != "https://app.example.com" {
		t.Errorf("origins = %v", got)
	}
	for _, o := range got {
		if o == "http://localhost:5173" {
			t.Errorf("dev origin without the opt-in: %v", got)
		}
	}
	c.AllowDevOrigins = true
	if got := c.origins(); len(got) != len(DesktopOrigins)+len(DevOrigins)+1 {
		t.Errorf("origins with dev = %v", got)
	}
}

func trustService() *Service {
	return &Service{
		log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		origins: (&Config{AllowedOrigins: []string{"https://app.example.com"}}).origins(),
		cfg:     Config{BodyReadTimeout: time.Second},
	}
}

func TestOriginCheck(t *testing.T) {
	s := trustService()
	reached := false
	h := s.originCheck(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = true
		w.WriteHeader(http.StatusNoContent)
	}))
	for _, tt := range []struct {
		name, method string
		headers      []string
		want         int
	}{
		{"no origin (curl)", "POST", nil, 204},
		{"same origin", "POST", []string{"Origin", "http://127.0.0.1:3333", "Sec-Fetch-Site", "same-origin"}, 204},
		{"tauri", "POST", []string{"Origin", "tauri://localhost", "Sec-Fetch-Site", "cross-site"}, 204},
		{"tauri windows", "DELETE", []string{"Origin", "http://tauri.localhost"}, 204},
		{"desktop dev", "PATCH", []string{"Origin", "http://127.0.0.1:1420", "Sec-Fetch-Site", "cross-site"}, 204},
		{"operator's", "PUT", []string{"Origin", "https://app.example.com"}, 204},
		{"foreign", "POST", []string{"Origin", "http://evil.example"}, 403},
		{"foreign delete", "DELETE", []string{"Origin", "http://evil.example"}, 403},
		{"prefix look-alike", "POST", []string{"Origin", "http://localhost:1420.evil.com"}, 403},
		{"null", "POST", []string{"Origin", "null"}, 403},
		{"empty", "POST", []string{"Origin", ""}, 403},
		{"dev port by default", "POST", []string{"Origin", "http://localhost:5173"}, 403},
		{"cross-site, no origin", "POST", []string{"Sec-Fetch-Site", "cross-site"}, 403},
		{"same-site, no origin", "POST", []string{"Sec-Fetch-Site", "same-site"}, 204},
		{"foreign GET", "GET", []string{"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"}, 204},
		{"foreign HEAD", "HEAD", []string{"Origin", "http://evil.example"}, 204},
		{"foreign preflight", "OPTIONS", []string{"Origin", "http://evil.example"}, 204},
	} {
		reached = false
		r := httptest.NewRequest(tt.method, "/api/workspaces", nil)
		r.Host = "127.0.0.1:3333"
		for i := 0; i+1 < len(tt.headers); i += 2 {
			r.Header.Set(tt.headers[i], tt.headers[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tt.want || reached != (tt.want == 204) {
			t.Errorf("%s: %d (handler reached %v), want %d", tt.name, w.Code, reached, tt.want)
			continue
		}
		if tt.want == 403 {
			var body map[string]string
			_ = json.Unmarshal(w.Body.Bytes(), &body)
			if body["code"] != OriginNotAllowed || body["error"] != "Cross-origin request refused" {
				t.Errorf("%s: body %s", tt.name, w.Body.Bytes())
			}
		}
	}
}

func TestJSONBody(t *testing.T) {
	reached := false
	h := trustService().jsonBody(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = true
		w.WriteHeader(http.StatusNoContent)
	}))
	for _, tt := range []struct {
		name, method, ct, body string
		chunked                bool
		want                   int
	}{
		{"json", "POST", "application/json", `{"a":1}`, false, 204},
		{"json charset", "POST", "application/json; charset=utf-8", `{}`, false, 204},
		{"+json", "PATCH", "application/merge-patch+json", `{}`, false, 204},
		{"empty json (DESIGN §9)", "POST", "application/json", "", false, 204},
		{"no body, no type (curl -X POST)", "POST", "", "", false, 204},
		{"body, no type", "POST", "", `{"a":1}`, false, 415},
		{"chunked body, no type", "POST", "", `{"a":1}`, true, 415},
		{"text/plain", "POST", "text/plain", `{"a":1}`, false, 415},
		{"empty text/plain", "POST", "text/plain", "", false, 415},
		{"form", "POST", "application/x-www-form-urlencoded", "a=1", false, 415},
		{"multipart", "PUT", "multipart/form-data; boundary=x", "", false, 415},
		{"garbage type", "DELETE", ";;;", "", false, 415},
		{"GET with text/plain", "GET", "text/plain", "", false, 204},
		{"DELETE no body", "DELETE", "", "", false, 204},
	} {
		reached = false
		r := httptest.NewRequest(tt.method, "/api/x", strings.NewReader(tt.body))
		if tt.chunked {
			r.ContentLength = -1
		}
		if tt.ct != "" {
			r.Header.Set("Content-Type", tt.ct)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tt.want || reached != (tt.want == 204) {
			t.Errorf("%s: %d (handler reached %v), want %d", tt.name, w.Code, reached, tt.want)
			continue
		}
		if tt.want == 415 {
			var body map[string]any
			_ = json.Unmarshal(w.Body.Bytes(), &body)
			if body["code"] != "FST_ERR_CTP_INVALID_MEDIA_TYPE" || body["error"] != "Unsupported Media Type" ||
				!strings.HasPrefix(fmt.Sprint(body["message"]), "Unsupported Media Type: ") || body["statusCode"] != float64(415) {
				t.Errorf("%s: body %s", tt.name, w.Body.Bytes())
			}
		}
	}
}

// TestBodyDeadline runs a real server: a stalled body is cut off at the
// deadline, and a response that outlasts the deadline after the body was
// read is not.
func TestBodyDeadline(t *testing.T) {
	s := trustService()
	s.cfg.BodyReadTimeout = 300 * time.Millisecond
	srv := httptest.NewServer(s.bodyDeadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		// A long answer, as an event stream, while watching for the
		// client hanging up (which a stale deadline would fake).
		rc := http.NewResponseController(w)
		for i := range 8 {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			fmt.Fprintf(w, "tick %d\n", i)
			_ = rc.Flush()
		}
	})))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", addr)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	data, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the stalled connection was not closed")
	}
	if !strings.Contains(string(data), "400") {
		t.Errorf("stalled body answer %q", data)
	}

	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.Contains(string(body), "tick 7") {
		t.Fatalf("the answer after the body was cut: %q %v", body, err)
	}
}

func TestHealthTokenOnlyForDirectLoopback(t *testing.T) {
	s := &Service{cfg: Config{Mode: "local"}}
	for _, tt := range []struct {
		name, remote string
		headers      []string
		want         bool
	}{
		{"loopback", "127.0.0.1:5000", nil, true},
		{"loopback v6", "[::1]:5000", nil, true},
		{"LAN", "192.0.2.7:5000", nil, false},
		{"proxied by a local proxy", "127.0.0.1:5000", []string{"X-Forwarded-For", "192.0.2.7"}, false},
		{"Forwarded", "127.0.0.1:5000", []string{"Forwarded", "for=192.0.2.7"}, false},
		{"X-Real-IP", "127.0.0.1:5000", []string{"X-Real-IP", "192.0.2.7"}, false},
	} {
		r := httptest.NewRequest("GET", "/health", nil)
		r.RemoteAddr = tt.remote
		for i := 0; i+1 < len(tt.headers); i += 2 {
			r.Header.Set(tt.headers[i], tt.headers[i+1])
		}
		if got := s.reportsToken(r); got != tt.want {
			t.Errorf("%s: reportsToken = %v, want %v", tt.name, got, tt.want)
		}
	}
	team := &Service{cfg: Config{Mode: "team"}}
	r := httptest.NewRequest("GET", "/health", nil)
	r.RemoteAddr = "127.0.0.1:5000"
	if team.reportsToken(r) {
		t.Error("team mode reports a token")
	}
}

func TestAuthBeyondLoopbackWantsTokenFromEveryone(t *testing.T) {
	s := &Service{cfg: Config{Token: "secret-token"}, beyondLoopback: true}
	h := s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	for _, tt := range []struct {
		name, remote, path, auth string
		want                     int
	}{
		{"loopback, no token", "127.0.0.1:5000", "/api/workspaces", "", 401},
		{"loopback, token", "127.0.0.1:5000", "/api/workspaces", "Bearer secret-token", 204},
		{"loopback health", "127.0.0.1:5000", "/health", "", 204},
		{"remote health", "192.0.2.7:5000", "/health", "", 204},
		{"remote, token", "192.0.2.7:5000", "/api/workspaces", "Bearer secret-token", 204},
	} {
		r := httptest.NewRequest("GET", tt.path, nil)
		r.RemoteAddr = tt.remote
		if tt.auth != "" {
			r.Header.Set("Authorization", tt.auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, w.Code, tt.want)
		}
	}
	// On a loopback listener a request relayed by a local proxy is not
	// a loopback client's.
	local := &Service{cfg: Config{Token: "secret-token"}}
	r := httptest.NewRequest("GET", "/api/workspaces", nil)
	r.RemoteAddr = "127.0.0.1:5000"
	r.Header.Set("X-Forwarded-For", "192.0.2.7")
	w := httptest.NewRecorder()
	local.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })).ServeHTTP(w, r)
	if w.Code != 401 {
		t.Errorf("proxied request on a loopback listener: %d, want 401", w.Code)
	}
}
