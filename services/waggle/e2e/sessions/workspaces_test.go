package sessions

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/waggle-os/core/services/waggle/waggletest"
)

func TestWorkspacesCRUD(t *testing.T) {
	srv := waggletest.Start(t)

	var all []map[string]any
	if st := srv.JSON("GET", "/api/workspaces", nil, &all); st != 200 || len(all) != 1 || all[0]["id"] != "default" || all[0]["name"] != "Default Workspace" {
		t.Fatalf("fresh list: %d %v", st, all)
	}

	var ws map[string]any
	if st := srv.JSON("POST", "/api/workspaces", map[string]any{"name": "Session Test WS", "group": "Test", "theme": "dark"}, &ws); st != 201 {
		t.Fatalf("create: %d %v", st, ws)
	}
	if ws["id"] != "session-test-ws" || ws["name"] != "Session Test WS" || ws["group"] != "Test" || ws["theme"] != "dark" || ws["created"] == nil {
		t.Fatalf("created body: %v", ws)
	}
	var dup map[string]any
	srv.JSON("POST", "/api/workspaces", map[string]any{"name": "Session  test ws!"}, &dup)
	if dup["id"] != "session-test-ws-2" {
		t.Fatalf("collision id: %v", dup["id"])
	}

	var patched map[string]any
	if st := srv.JSON("PATCH", "/api/workspaces/session-test-ws", map[string]any{"model": "claude-x", "id": "hijack", "created": "never"}, &patched); st != 200 {
		t.Fatalf("patch: %d", st)
	}
	if patched["id"] != "session-test-ws" || patched["model"] != "claude-x" || patched["group"] != "Test" || patched["theme"] != "dark" || patched["created"] != ws["created"] {
		t.Fatalf("patched: %v", patched)
	}
	var got map[string]any
	if st := srv.JSON("GET", "/api/workspaces/session-test-ws", nil, &got); st != 200 || got["model"] != "claude-x" || got["theme"] != "dark" {
		t.Fatalf("get after patch: %d %v", st, got)
	}
	if st := srv.JSON("GET", "/api/workspaces", nil, &all); st != 200 || len(all) != 3 {
		t.Fatalf("list: %d %d", st, len(all))
	}

	// Deleting removes the directory, sessions included.
	s := createSession(t, srv, "session-test-ws", map[string]any{"title": "doomed"})
	expect(t, srv, "DELETE", "/api/workspaces/session-test-ws", nil, 200, `{"deleted":true}`)
	if _, err := os.Stat(filepath.Join(srv.DataDir, "workspaces", "session-test-ws")); !os.IsNotExist(err) {
		t.Fatalf("workspace dir still there: %v", err)
	}
	expect(t, srv, "GET", "/api/workspaces/session-test-ws", nil, 404, `{"error":"Workspace not found"}`)
	expect(t, srv, "DELETE", "/api/sessions/"+s.ID, nil, 404, `{"error":"Session not found"}`)

	// The default workspace comes back after a restart if it was deleted.
	expect(t, srv, "DELETE", "/api/workspaces/default", nil, 200, `{"deleted":true}`)
	srv.Restart()
	var def map[string]any
	if st := srv.JSON("GET", "/api/workspaces/default", nil, &def); st != 200 || def["name"] != "Default Workspace" {
		t.Fatalf("default after restart: %d %v", st, def)
	}
}

func TestWorkspaceErrors(t *testing.T) {
	srv := waggletest.Start(t)
	createWorkspace(t, srv, "Exists")
	tests := []struct {
		method, path string
		body         any
		status       int
		want         string
	}{
		{"POST", "/api/workspaces", map[string]any{}, 400, `{"error":"name is required"}`},
		{"POST", "/api/workspaces", nil, 400, `{"error":"name is required"}`},
		{"POST", "/api/workspaces", "", 400, `{"error":"name is required"}`},
		{"POST", "/api/workspaces", map[string]any{"name": "  "}, 400, `{"error":"name is required"}`},
		{"POST", "/api/workspaces", map[string]any{"name": 42}, 400, `{"error":"name is required"}`},
		{"POST", "/api/workspaces", map[string]any{"name": "x", "model": 1}, 400, `{"error":"model must be a string"}`},
		{"POST", "/api/workspaces", map[string]any{"name": "x", "budget": "big"}, 400, `{"error":"budget must be a non-negative number"}`},
		{"POST", "/api/workspaces", "{bad json", 400, `{"statusCode":400,"code":"FST_ERR_CTP_INVALID_JSON_BODY","error":"Bad Request","message":"Body is not valid JSON but content-type is set to 'application/json'"}`},
		{"GET", "/api/workspaces/missing", nil, 404, `{"error":"Workspace not found"}`},
		{"PATCH", "/api/workspaces/missing", map[string]any{"model": "m"}, 404, `{"error":"Workspace not found"}`},
		{"PATCH", "/api/workspaces/exists", map[string]any{"name": ""}, 400, `{"error":"name is required"}`},
		{"DELETE", "/api/workspaces/missing", nil, 404, `{"error":"Workspace not found"}`},
		{"GET", "/api/workspaces/foo.bar", nil, 400, `{"statusCode":400,"error":"Bad Request","message":"Invalid id: contains illegal characters"}`},
		{"PATCH", "/api/workspaces/a%20b", map[string]any{"name": "x"}, 400, `{"statusCode":400,"error":"Bad Request","message":"Invalid id: contains illegal characters"}`},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			expect(t, srv, tt.method, tt.path, tt.body, tt.status, tt.want)
		})
	}
	if st, _, _ := raw(t, srv, http.MethodGet, "/api/workspaces/exists", nil); st != 200 {
		t.Fatalf("exists: %d", st)
	}
}
