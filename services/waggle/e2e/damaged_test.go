package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestStartsOnDamagedFiles plants the three kinds of damage a crash or a
// careless hand leaves (a session line that is not JSON, a grant file cut
// short, a workspace.json that is garbage) and checks the server starts,
// each affected API answers as documented, and nothing else is affected.
func TestStartsOnDamagedFiles(t *testing.T) {
	data := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(data, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("workspaces/default/sessions/s1.jsonl", `{"type":"meta","title":null,"created":"2026-01-01T00:00:00.000Z"}
{"role":"user","content":"first","timestamp":"2026-01-01T00:00:01.000Z"}
#### garbage a disk tool left ####
{"role":"assistant","content":"second","timestamp":"2026-01-01T00:00:02.000Z"}
`)
	write("approval-grants.json", `{
  "version": 1,
  "grants": [
    {"id":"g1","toolName":"bash","targetKey":"*","sourceWorkspaceId":null,"description":"Execute bash on *","grantedAt":"2026-01-01T00:00:00.000Z","expiresAt":null},
    {"id":"g2","toolName":"web_fe`)
	write("workspaces/broken/workspace.json", "\x00\x00{not json")

	srv := waggletest.Start(t, waggletest.WithDataDir(data))

	var hist struct{ Messages []struct{ Content string } }
	if code := srv.JSON(http.MethodGet, "/api/history?workspace=default&session=s1", nil, &hist); code != 200 ||
		len(hist.Messages) != 2 || hist.Messages[0].Content != "first" || hist.Messages[1].Content != "second" {
		t.Fatalf("history of a session with a damaged line: %d %+v", code, hist)
	}
	var grants struct {
		Grants []struct{ ID, ToolName string }
	}
	if code := srv.JSON(http.MethodGet, "/api/approval/grants", nil, &grants); code != 200 || len(grants.Grants) != 1 || grants.Grants[0].ID != "g1" {
		t.Fatalf("grants from a file cut short: %d %+v", code, grants)
	}
	var e struct{ Error, Code string }
	if code := srv.JSON(http.MethodGet, "/api/workspaces/broken", nil, &e); code != 500 || e.Code != "WORKSPACE_DAMAGED" || !strings.Contains(e.Error, "workspace.json") {
		t.Fatalf("damaged workspace: %d %+v", code, e)
	}
	var list []struct{ ID string }
	if code := srv.JSON(http.MethodGet, "/api/workspaces", nil, &list); code != 200 || len(list) != 1 || list[0].ID != "default" {
		t.Fatalf("workspace list: %d %+v", code, list)
	}
	// Chats work, in the damaged session and beside it.
	for _, session := range []string{"s1", "s2"} {
		if evs := srv.Chat(map[string]any{"message": "still works", "session": session}).All(t); lastName(evs) != "done" {
			t.Fatalf("chat in %s: %v", session, waggletest.Names(evs))
		}
	}
	if b, _ := os.ReadFile(filepath.Join(data, "workspaces/default/sessions/s1.jsonl")); !strings.Contains(string(b), "\n#### garbage a disk tool left ####\n") {
		t.Fatal("the damaged line was dropped by an append")
	}
	if b, _ := os.ReadFile(filepath.Join(data, "workspaces/broken/workspace.json")); string(b) != "\x00\x00{not json" {
		t.Fatal("the damaged workspace.json was rewritten")
	}
}
