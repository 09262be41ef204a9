package desktop

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

type fileEntry struct {
	Name, Path, Type string
	Size             int64
}

// TestFilesWrittenByTheAgentAreBrowsable: a file the agent wrote with
// write_file is listed and downloaded through the files routes, and the
// app's own uploads, folders, moves, copies and deletes land in the same
// directory.
func TestFilesWrittenByTheAgentAreBrowsable(t *testing.T) {
	llm := newLLM(t, llmtest.WithResponses(
		llmtest.Response{Steps: llmtest.ToolCall(0, "call_w", "write_file", `{"path":"reports/q1.md","content":"# Q1\nrevenue up"}`, 2)},
		llmtest.Reply("Written."),
	))
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()))
	st := srv.Chat(map[string]any{"message": "write the report", "workspace": "desk", "session": "s1", "autonomy": map[string]any{"level": "yolo"}})
	if names := waggletest.Names(st.All(t)); names[len(names)-1] != "done" {
		t.Fatalf("turn %v", names)
	}
	st.Close()

	var root []fileEntry
	if code := srv.JSON("GET", "/api/workspaces/desk/files/list?path=/", nil, &root); code != http.StatusOK || len(root) != 1 || root[0].Name != "reports" || root[0].Type != "directory" {
		t.Fatalf("list /: %d %+v", code, root)
	}
	var reports []fileEntry
	if code := srv.JSON("GET", "/api/workspaces/desk/files/list?path=/reports", nil, &reports); code != http.StatusOK || len(reports) != 1 || reports[0].Path != "/reports/q1.md" || reports[0].Size != int64(len("# Q1\nrevenue up")) {
		t.Fatalf("list /reports: %d %+v", code, reports)
	}
	resp := srv.Do("GET", "/api/workspaces/desk/files/download?path=/reports/q1.md", nil)
	if b := body(t, resp); resp.StatusCode != http.StatusOK || b != "# Q1\nrevenue up" || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("download: %d %q %v", resp.StatusCode, b, resp.Header)
	}

	upload := map[string]any{"path": "/inbox", "name": "page.html", "data": base64.StdEncoding.EncodeToString([]byte("<script>alert(1)</script>"))}
	var e fileEntry
	if code := srv.JSON("POST", "/api/workspaces/desk/files/upload", upload, &e); code != http.StatusCreated || e.Path != "/inbox/page.html" {
		t.Fatalf("upload: %d %+v", code, e)
	}
	// A stored page is served as an attachment in a sandbox, never as
	// the server's own page.
	resp = srv.Do("GET", "/api/workspaces/desk/files/download?path=inbox/page.html", nil)
	body(t, resp)
	if resp.Header.Get("Content-Security-Policy") != "sandbox" || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("html download headers %v", resp.Header)
	}
	for _, step := range []struct {
		route string
		body  map[string]any
		want  int
	}{
		{"mkdir", map[string]any{"path": "/archive/2026"}, http.StatusCreated},
		{"copy", map[string]any{"from": "/reports", "to": "/archive/2026/reports"}, http.StatusOK},
		{"move", map[string]any{"from": "/inbox/page.html", "to": "/archive/page.html"}, http.StatusOK},
		{"move", map[string]any{"from": "/reports", "to": "/archive/page.html"}, http.StatusConflict},
		{"delete", map[string]any{"path": "/reports"}, http.StatusNoContent},
		{"delete", map[string]any{"path": "/reports"}, http.StatusNotFound},
	} {
		if code := srv.JSON("POST", "/api/workspaces/desk/files/"+step.route, step.body, nil); code != step.want {
			t.Errorf("%s %v: %d, want %d", step.route, step.body, code, step.want)
		}
	}
	dir := filepath.Join(srv.DataDir, "workspaces", "desk", "files")
	for rel, want := range map[string]bool{"archive/2026/reports/q1.md": true, "archive/page.html": true, "reports": false, "inbox/page.html": false} {
		_, err := os.Stat(filepath.Join(dir, rel))
		if (err == nil) != want {
			t.Errorf("%s exists=%v, want %v", rel, err == nil, want)
		}
	}
}

// TestFilePathEscapesAreRefused: "..", an absolute path and a symlink out
// of the workspace reach nothing outside it, for reads and writes.
func TestFilePathEscapesAreRefused(t *testing.T) {
	srv := waggletest.Start(t)
	outside := t.TempDir()
	secretPath := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secretPath, []byte("top secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(srv.DataDir, "workspaces", "desk", "files")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../../../config.json", "/../secret.txt", secretPath, "link/secret.txt", "link"} {
		resp := srv.Do("GET", "/api/workspaces/desk/files/download?path="+p, nil)
		if b := body(t, resp); resp.StatusCode == http.StatusOK || strings.Contains(b, "top secret") {
			t.Errorf("download %s: %d %s", p, resp.StatusCode, b)
		}
		resp = srv.Do("GET", "/api/workspaces/desk/files/list?path="+p, nil)
		if b := body(t, resp); strings.Contains(b, `"name":"secret.txt"`) || strings.Contains(b, "top secret") {
			t.Errorf("list %s: %d %s", p, resp.StatusCode, b)
		}
	}
	upload := func(path string) int {
		return srv.JSON("POST", "/api/workspaces/desk/files/upload",
			map[string]any{"path": path, "name": "evil.txt", "data": base64.StdEncoding.EncodeToString([]byte("x"))}, nil)
	}
	for _, p := range []string{"../..", "link", outside} {
		code := upload(p)
		if _, err := os.Stat(filepath.Join(outside, "evil.txt")); err == nil {
			t.Fatalf("upload to %s wrote outside the workspace (%d)", p, code)
		}
	}
	if code := upload("../.."); code != http.StatusBadRequest {
		t.Errorf("upload to ../..: %d, want 400", code)
	}
	if code := srv.JSON("POST", "/api/workspaces/desk/files/move", map[string]any{"from": "link/secret.txt", "to": "stolen.txt"}, nil); code == http.StatusOK {
		t.Error("moved a file through a symlink")
	}
	if _, err := os.Stat(secretPath); err != nil {
		t.Fatalf("the outside file is gone: %v", err)
	}
	if code := srv.JSON("POST", "/api/workspaces/desk/files/delete", map[string]any{"path": "link/secret.txt"}, nil); code == http.StatusNoContent {
		t.Error("deleted through a symlink")
	}
	if _, err := os.Stat(secretPath); err != nil {
		t.Fatalf("the outside file is gone: %v", err)
	}
	if code := srv.JSON("GET", "/api/workspaces/..%2Fx/files/list", nil, nil); code != http.StatusBadRequest && code != http.StatusNotFound {
		t.Errorf("an unsafe workspace id: %d", code)
	}
}

// countingReader counts what the client has sent of a request body.
type countingReader struct {
	r    io.Reader
	sent atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.sent.Add(int64(n))
	return n, err
}

// TestUploadSizeLimit: an upload over 5 MiB is the original's 413 "File
// exceeds 5MB limit". A body announced as too large is refused before
// the server reads it (the client has sent a sliver when the answer
// comes); one sent chunked is cut off at the limit; a file of exactly
// 5 MiB is written, and nothing of the refused ones is.
func TestUploadSizeLimit(t *testing.T) {
	srv := waggletest.Start(t)
	const url = "/api/workspaces/desk/files/upload"
	tooLarge := func(resp *http.Response) {
		t.Helper()
		if b := body(t, resp); resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(b, `"File exceeds 5MB limit"`) {
			t.Fatalf("status %d body %s", resp.StatusCode, b)
		}
	}

	// Announced: 200 MiB that the client would send only as the server
	// reads them (a pipe that the test feeds 64 KiB, then holds).
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write(bytes.Repeat([]byte(" "), 64<<10)) }()
	sent := &countingReader{r: pr}
	req, err := http.NewRequest("POST", srv.URL+url, sent)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 200 << 20
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("announced upload: %v", err)
	}
	tooLarge(resp)
	if n := sent.sent.Load(); n > 64<<10 {
		t.Fatalf("the client sent %d bytes before the answer", n)
	}

	// Chunked: no length announced, the body is read up to the limit.
	big := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), 8<<20))
	chunked := io.MultiReader(strings.NewReader(`{"path":"/inbox","name":"big.bin","data":"`), strings.NewReader(big), strings.NewReader(`"}`))
	req, err = http.NewRequest("POST", srv.URL+url, chunked)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatalf("chunked upload: %v", err)
	}
	tooLarge(resp)

	// In JSON, one byte over the limit, then exactly the limit.
	upload := func(name string, size int) *http.Response {
		return srv.Do("POST", url, map[string]any{"path": "/inbox", "name": name,
			"data": base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("y"), size))})
	}
	tooLarge(upload("over.bin", 5<<20+1))
	if resp := upload("limit.bin", 5<<20); resp.StatusCode != http.StatusCreated {
		t.Fatalf("a 5 MiB upload: %d %s", resp.StatusCode, body(t, resp))
	}
	var inbox []fileEntry
	if code := srv.JSON("GET", "/api/workspaces/desk/files/list?path=/inbox", nil, &inbox); code != http.StatusOK || len(inbox) != 1 || inbox[0].Name != "limit.bin" || inbox[0].Size != 5<<20 {
		t.Fatalf("inbox after the uploads: %d %+v", code, inbox)
	}
}
