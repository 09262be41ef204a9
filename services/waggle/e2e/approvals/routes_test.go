package approvals

import (
	"net/http"
	"testing"

	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestRoutesOnEmptyStore checks the shapes and error bodies that need no
// chat turn.
func TestRoutesOnEmptyStore(t *testing.T) {
	srv := waggletest.Start(t)
	tests := []struct {
		method, path string
		body         any
		status       int
		want         string
	}{
		{http.MethodGet, "/api/approval/pending", nil, 200, `{"pending":[],"count":0}`},
		{http.MethodGet, "/api/approval/grants", nil, 200, `{"grants":[],"count":0}`},
		{http.MethodPost, "/api/approval/grants/clear", "", 200, `{"ok":true}`},
		{http.MethodDelete, "/api/approval/grants/nope", nil, 404, `{"error":"Grant not found"}`},
		{http.MethodPost, "/api/approval/nope", map[string]any{"approved": true}, 404, `{"error":"No pending approval with that ID"}`},
		{http.MethodPost, "/api/approval/nope", map[string]any{"approved": false, "always": true, "sourceWorkspaceId": nil}, 404,
			`{"error":"No pending approval with that ID"}`},
		{http.MethodPost, "/api/approval/nope", map[string]any{"approved": "yes"}, 400, `{"error":"approved must be a boolean"}`},
		{http.MethodPost, "/api/approval/nope", map[string]any{"approved": true, "always": "yes"}, 400, `{"error":"always must be a boolean"}`},
		{http.MethodPost, "/api/approval/nope", map[string]any{"approved": true, "sourceWorkspaceId": 3}, 400,
			`{"error":"sourceWorkspaceId must be a string"}`},
	}
	for _, tc := range tests {
		resp := srv.Do(tc.method, tc.path, tc.body)
		got := readBody(t, resp)
		if resp.StatusCode != tc.status || got != tc.want {
			t.Errorf("%s %s %v: %d %s, want %d %s", tc.method, tc.path, tc.body, resp.StatusCode, got, tc.status, tc.want)
		}
	}
}
