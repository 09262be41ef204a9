package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/waggle-os/core/services/waggle/waggletest"
)

// withHost sends a request to srv with an explicit Host header, as a
// browser does for a page whose name was rebound to 127.0.0.1.
func withHost(t *testing.T, srv *waggletest.Server, method, path, host, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s (Host %s): %v", method, path, host, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, data
}

// TestDNSRebindingRefused: a request naming a host that is not the
// server's own gets 403 before any work — no stream, no turn, no token
// from /health — while the server's own names and configured names pass.
func TestDNSRebindingRefused(t *testing.T) {
	srv := waggletest.Start(t, waggletest.WithConfig(func(c *appConfig) { c.Gateway.AllowedHosts = []string{"waggle.test"} }))
	const want = `{"error":"Host not allowed: this server answers only to its own names (add others with --allowed-hosts)","code":"HOST_NOT_ALLOWED"}` + "\n"
	chat := `{"message":"hello from a rebound page","workspace":"default","session":"rebind"}`

	for _, req := range []struct{ method, path, body string }{
		{"POST", "/api/chat", chat},
		{"GET", "/health", ""},
		{"GET", "/api/history?workspace=default&session=rebind", ""},
		{"OPTIONS", "/api/chat", ""},
	} {
		st, h, body := withHost(t, srv, req.method, req.path, "evil.example:3333", req.body)
		if st != http.StatusForbidden || string(body) != want {
			t.Errorf("%s %s with Host evil.example:3333: %d %s", req.method, req.path, st, body)
		}
		if ct := h.Get("Content-Type"); ct != "application/json; charset=utf-8" {
			t.Errorf("%s %s: content type %q", req.method, req.path, ct)
		}
		if h.Get("X-Waggle-Turn-Id") != "" {
			t.Errorf("%s %s: a turn id was assigned", req.method, req.path)
		}
	}

	// The server's own names and the configured one are answered.
	port := srv.URL[strings.LastIndex(srv.URL, ":"):]
	for _, host := range []string{"localhost" + port, "127.0.0.1" + port, "[::1]" + port, "localhost", "waggle.test" + port} {
		st, _, body := withHost(t, srv, "GET", "/health", host, "")
		var health map[string]any
		if st != http.StatusOK || json.Unmarshal(body, &health) != nil || health["status"] != "ok" {
			t.Errorf("GET /health with Host %s: %d %s", host, st, body)
		}
	}

	// No turn ran for the refused chat: the session holds only the turn
	// that follows it.
	evs := srv.Chat(map[string]any{"message": "second", "workspace": "default", "session": "rebind"}).All(t)
	if last := evs[len(evs)-1]; last.Name != "done" {
		t.Fatalf("allowed chat ended with %s %s", last.Name, last.Data)
	}
	var hist struct {
		Messages []struct{ Role, Content string }
		Count    int
	}
	if st := srv.JSON("GET", "/api/history?workspace=default&session=rebind", nil, &hist); st != 200 {
		t.Fatalf("history: %d", st)
	}
	if hist.Count != 2 || len(hist.Messages) != 2 || hist.Messages[0].Content != "second" {
		t.Fatalf("history after a refused chat = %+v, want only the allowed turn", hist)
	}
}
