package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestAuthDesktopTrust(t *testing.T) {
	s := &Service{cfg: Config{Token: "secret-token"}}
	h := s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	tests := []struct {
		name, remote, method, path, auth string
		status                           int
		code                             string
	}{
		{"loopback v4", "127.0.0.1:5000", "GET", "/api/history", "", 204, ""},
		{"loopback v6", "[::1]:5000", "GET", "/api/history", "", 204, ""},
		{"mapped loopback", "[::ffff:127.0.0.1]:5000", "GET", "/api/history", "", 204, ""},
		{"remote health", "192.0.2.7:5000", "GET", "/health", "", 204, ""},
		{"remote preflight", "192.0.2.7:5000", "OPTIONS", "/api/chat", "", 204, ""},
		{"remote no token", "192.0.2.7:5000", "GET", "/api/history", "", 401, "MISSING_TOKEN"},
		{"remote wrong token", "192.0.2.7:5000", "GET", "/api/history", "Bearer nope", 401, "INVALID_TOKEN"},
		{"remote not bearer", "192.0.2.7:5000", "GET", "/api/history", "Basic secret-token", 401, "INVALID_TOKEN"},
		{"remote good token", "192.0.2.7:5000", "GET", "/api/history", "Bearer secret-token", 204, ""},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(tt.method, tt.path, nil)
		r.RemoteAddr = tt.remote
		if tt.auth != "" {
			r.Header.Set("Authorization", tt.auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tt.status {
			t.Errorf("%s: status %d, want %d", tt.name, w.Code, tt.status)
			continue
		}
		if tt.code != "" {
			var body map[string]string
			json.Unmarshal(w.Body.Bytes(), &body)
			if body["error"] != "Unauthorized" || body["code"] != tt.code {
				t.Errorf("%s: body %v", tt.name, body)
			}
		}
	}
}
