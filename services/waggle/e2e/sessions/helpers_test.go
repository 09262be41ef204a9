package sessions

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/services/waggle/waggletest"
)

// info is SessionInfo as a client decodes it.
type info struct {
	ID           string  `json:"id"`
	Title        any     `json:"title"`
	Summary      *string `json:"summary"`
	MessageCount int     `json:"messageCount"`
	LastActive   string  `json:"lastActive"`
	Created      string  `json:"created"`
}

type searchResult struct {
	SessionID  string `json:"sessionId"`
	Title      any    `json:"title"`
	MatchCount int    `json:"matchCount"`
	Snippets   []struct {
		Text string `json:"text"`
		Role string `json:"role"`
	} `json:"snippets"`
	LastActive string `json:"lastActive"`
}

// raw sends a request and returns status, content type and body.
func raw(t *testing.T, srv *waggletest.Server, method, path string, body any) (int, string, string) {
	t.Helper()
	resp := srv.Do(method, path, body)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// expect checks a JSON response's status and exact (compacted) body.
func expect(t *testing.T, srv *waggletest.Server, method, path string, body any, status int, want string) {
	t.Helper()
	got, _, b := raw(t, srv, method, path, body)
	if got != status || strings.TrimSpace(b) != want {
		t.Errorf("%s %s = %d %s, want %d %s", method, path, got, strings.TrimSpace(b), status, want)
	}
}

func createWorkspace(t *testing.T, srv *waggletest.Server, name string) string {
	t.Helper()
	var out map[string]any
	if st := srv.JSON(http.MethodPost, "/api/workspaces", map[string]any{"name": name}, &out); st != http.StatusCreated {
		t.Fatalf("create workspace %q: %d %v", name, st, out)
	}
	return out["id"].(string)
}

func createSession(t *testing.T, srv *waggletest.Server, ws string, body any) info {
	t.Helper()
	var out info
	if st := srv.JSON(http.MethodPost, "/api/workspaces/"+ws+"/sessions", body, &out); st != http.StatusCreated {
		t.Fatalf("create session in %s: %d", ws, st)
	}
	return out
}

func list(t *testing.T, srv *waggletest.Server, ws, query string) []info {
	t.Helper()
	var out []info
	if st := srv.JSON(http.MethodGet, "/api/workspaces/"+ws+"/sessions"+query, nil, &out); st != 200 {
		t.Fatalf("list %s: %d", ws, st)
	}
	return out
}

func find(infos []info, id string) *info {
	for i := range infos {
		if infos[i].ID == id {
			return &infos[i]
		}
	}
	return nil
}

func sessionPath(srv *waggletest.Server, ws, id string) string {
	return filepath.Join(srv.DataDir, "workspaces", ws, "sessions", id+".jsonl")
}

// writeSession writes a session file directly, as an older version or
// another tool would have.
func writeSession(t *testing.T, srv *waggletest.Server, ws, id string, lines ...string) {
	t.Helper()
	p := sessionPath(srv, ws, id)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendLines(t *testing.T, path string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		t.Fatal(err)
	}
}

func touch(t *testing.T, path string, at time.Time) {
	t.Helper()
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

func msg(role, content string) string {
	b, _ := json.Marshal(map[string]string{"role": role, "content": content, "timestamp": "2026-03-09T10:00:00.000Z"})
	return string(b)
}

// fileLines returns a file's non-empty lines decoded.
func fileLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// q2 is the six-message session of the original workspace-api test.
var q2 = []string{
	msg("user", "Help me plan the Q2 marketing campaign"),
	msg("assistant", "I can help with that. Let me search for context about your marketing goals."),
	msg("user", "We decided to focus on social media this quarter"),
	msg("assistant", "Good decision. Social media aligns well with your budget constraints."),
	msg("user", "Can you draft an outline?"),
	msg("assistant", "Here is a draft marketing plan outline with 5 key initiatives."),
}
