package spa

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServe(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret.txt")
	for name, body := range map[string]string{
		"index.html": "<!doctype html>app", "assets/app-1.js": "js", "robots.txt": "robots",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(body), 0o644)
	}
	os.WriteFile(outside, []byte("secret"), 0o644)
	if err := os.Symlink(outside, filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := Check(dir); err != nil {
		t.Fatal(err)
	}
	if err := Check(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no index.html") {
		t.Fatalf("Check of an empty dir: %v", err)
	}
	h := New(dir)
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "next", http.StatusTeapot) })
	tests := []struct{ path, body string }{
		{"/", "<!doctype html>app"},
		{"/index.html", "<!doctype html>app"},
		{"/assets/app-1.js", "js"},
		{"/robots.txt", "robots"},
		{"/deep/link", "<!doctype html>app"},
		{"/assets/missing.js", "next\n"},
		{"/assets", "<!doctype html>app"},
		{"/api/x", "next\n"},
		{"/api", "next\n"},
		{"/v1/models", "next\n"},
		{"/health", "next\n"},
		{"/metrics", "next\n"},
		{"/ws", "next\n"},
		{"/link.txt", "<!doctype html>app"}, // a symlink out of the dir is not served
		{"/../" + filepath.Base(outside), "<!doctype html>app"},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		h.Serve(rec, httptest.NewRequest(http.MethodGet, "http://x"+tt.path, nil), next)
		if rec.Body.String() != tt.body {
			t.Errorf("GET %s: %d %q, want %q", tt.path, rec.Code, rec.Body.String(), tt.body)
		}
	}
}
