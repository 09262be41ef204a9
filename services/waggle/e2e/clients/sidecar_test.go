package clients

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/services/waggle/waggletest"
)

// get fetches url and returns status, content type and body.
func get(t *testing.T, method, url string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(data)
}

// frontend writes a stand-in for the desktop app's built dist.
func frontend(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"index.html":              `<!doctype html><title>Waggle OS</title><div id="root"></div><script type="module" src="/assets/index-abc123.js"></script>`,
		"assets/index-abc123.js":  `console.log("waggle os")`,
		"assets/index-abc123.css": `body{margin:0}`,
		"favicon.svg":             `<svg xmlns="http://www.w3.org/2000/svg"/>`,
	}
	for name, body := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestDesktopSidecar runs `waggle serve` with the environment the Waggle
// desktop app gives its server: WAGGLE_PORT (with WAGGLE_HOST, as the
// original reads it), WAGGLE_DATA_DIR, WAGGLE_SKIP_LITELLM and the built
// frontend in WAGGLE_FRONTEND_DIR. The app is served at / with its assets
// and an index.html fallback; API paths keep their JSON 404s; the web
// chat moves to /chat/.
func TestDesktopSidecar(t *testing.T) {
	port := freePort(t)
	dist := frontend(t)
	srv := waggletest.StartProc(t, waggleBin, waggletest.ProcSidecar(port, t.TempDir()),
		waggletest.ProcEnv("WAGGLE_SKIP_LITELLM=1", "WAGGLE_FRONTEND_DIR="+dist, "WAGGLE_LOG_LEVEL=warn"))
	base := srv.URL

	index, _ := os.ReadFile(filepath.Join(dist, "index.html"))
	jsonNotFound := `{"error":"Not found"}` + "\n"
	tests := []struct {
		method, path string
		status       int
		typePrefix   string
		body         string // exact body; "" = see contains
		contains     string
	}{
		{"GET", "/", 200, "text/html", string(index), ""},
		{"GET", "/assets/index-abc123.js", 200, "text/javascript", `console.log("waggle os")`, ""},
		{"GET", "/assets/index-abc123.css", 200, "text/css", `body{margin:0}`, ""},
		{"GET", "/favicon.svg", 200, "image/svg+xml", "", "<svg"},
		// Client-side routes of the app: deep links load index.html.
		{"GET", "/workspaces/default/chat", 200, "text/html", string(index), ""},
		{"GET", "/settings", 200, "text/html", string(index), ""},
		{"HEAD", "/settings", 200, "text/html", "", ""},
		// Server paths never fall back to the app.
		{"GET", "/assets/missing.js", 404, "application/json", jsonNotFound, ""},
		{"GET", "/api/nope", 404, "application/json", jsonNotFound, ""},
		{"GET", "/v1/models", 404, "application/json", jsonNotFound, ""},
		{"GET", "/ws", 404, "application/json", jsonNotFound, ""},
		{"POST", "/settings", 404, "application/json", jsonNotFound, ""},
		{"GET", "/health", 200, "application/json", "", `"status":"ok"`},
		{"GET", "/api/workspaces", 200, "application/json", "", `"id":"default"`},
		{"GET", "/metrics", 200, "text/plain", "", "waggle_"},
		// Our web chat, beside the app.
		{"GET", "/chat/", 200, "text/html", "", `src="/chat/main.js"`},
		{"GET", "/chat/turn.js", 200, "text/javascript", "", "X-Waggle-Turn-Id"},
		{"GET", "/chat/nope.js", 404, "application/json", jsonNotFound, ""},
		// The file server stays inside the directory.
		{"GET", "/../../etc/passwd", 200, "text/html", string(index), ""},
		{"GET", "/%2e%2e/%2e%2e/etc/passwd", 200, "text/html", string(index), ""},
	}
	for _, tt := range tests {
		status, ctype, body := get(t, tt.method, base+tt.path)
		if status != tt.status || !strings.HasPrefix(ctype, tt.typePrefix) {
			t.Errorf("%s %s: %d %q, want %d %s…; body %.200q", tt.method, tt.path, status, ctype, tt.status, tt.typePrefix, body)
			continue
		}
		if tt.body != "" && body != tt.body {
			t.Errorf("%s %s: body %.200q, want %.200q", tt.method, tt.path, body, tt.body)
		}
		if tt.contains != "" && !strings.Contains(body, tt.contains) {
			t.Errorf("%s %s: body %.200q does not contain %q", tt.method, tt.path, body, tt.contains)
		}
	}
	// /chat redirects to the web chat's directory.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(base + "/chat")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/chat/" {
		t.Errorf("/chat: %d → %q", resp.StatusCode, resp.Header.Get("Location"))
	}

	// A second server on the same port says so in the original's words.
	second := exec.Command(waggleBin, "serve")
	second.Env = baseEnv(t, "WAGGLE_PORT="+strconv.Itoa(port), "WAGGLE_DATA_DIR="+t.TempDir(),
		"WAGGLE_LLM_URL="+unreachableLLM(t), "WAGGLE_LOG_LEVEL=error")
	out, err := second.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("second server on port %d: %v\n%s", port, err, out)
	}
	want := "Port " + strconv.Itoa(port) + " is already in use. Another Waggle instance may be running.\n" +
		"To fix: close the other instance, or set WAGGLE_PORT=<port> to use a different port."
	if !strings.Contains(string(out), want) {
		t.Fatalf("second server output does not contain the original's message:\n%s", out)
	}

	srv.Stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Wait(ctx); err != nil {
		t.Fatalf("waggle serve exit: %v\n%s", err, srv.Output())
	}
}

// TestWebChatAtRoot: without a frontend dir, / is the web chat and the
// SPA fallback is off (unknown paths are the API's JSON 404).
func TestWebChatAtRoot(t *testing.T) {
	port := freePort(t)
	srv := waggletest.StartProc(t, waggleBin, waggletest.ProcSidecar(port, t.TempDir()), waggletest.ProcEnv("WAGGLE_LOG_LEVEL=warn"))
	base := srv.URL
	for _, path := range []string{"/", "/chat/"} {
		status, ctype, body := get(t, "GET", base+path)
		if status != 200 || !strings.HasPrefix(ctype, "text/html") || !strings.Contains(body, `src="/chat/main.js"`) {
			t.Errorf("GET %s: %d %q %.100q", path, status, ctype, body)
		}
	}
	for _, path := range []string{"/settings", "/assets/x.js", "/favicon.ico"} {
		status, _, body := get(t, "GET", base+path)
		var e struct{ Error string }
		if status != 404 || json.Unmarshal([]byte(body), &e) != nil || e.Error != "Not found" {
			t.Errorf("GET %s: %d %q", path, status, body)
		}
	}
}

// TestFrontendDirWithoutIndex: a frontend dir that is not a built app is a
// clear startup error, not a server that answers 404 everywhere.
func TestFrontendDirWithoutIndex(t *testing.T) {
	cmd := exec.Command(waggleBin, "serve", "--frontend-dir", t.TempDir())
	cmd.Env = baseEnv(t, "WAGGLE_PORT="+strconv.Itoa(freePort(t)), "WAGGLE_DATA_DIR="+t.TempDir(),
		"WAGGLE_LLM_URL="+unreachableLLM(t), "WAGGLE_LOG_LEVEL=error")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 || !strings.Contains(string(out), "no index.html") {
		t.Fatalf("serve with an empty frontend dir: %v\n%s", err, out)
	}
}
