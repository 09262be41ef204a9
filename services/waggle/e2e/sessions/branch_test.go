package sessions

import (
	"net/http"
	"os"
	"testing"

	"github.com/waggle-os/core/services/waggle/waggletest"
)

// branchInfo is a listing entry with the branch it records.
type branchInfo struct {
	ID           string `json:"id"`
	MessageCount int    `json:"messageCount"`
	BranchOf     *struct {
		Session string `json:"session"`
		At      int    `json:"at"`
	} `json:"branchOf"`
}

type history struct {
	Messages []struct {
		Role, Content, TurnID string
	}
	Tools []struct {
		TurnID, Name string
	}
}

// TestBranch: editing the second user message of a session branches it:
// the branch holds the messages before it (with their turn's tool
// events) and names its source; the source is unchanged; the branch is
// listed with branchOf and survives like any session. Bad indexes and
// unknown sessions are refused before anything is written.
func TestBranch(t *testing.T) {
	srv := waggletest.Start(t)
	tool := `{"type":"tool","turnId":"t1","callId":"c1","name":"read_file","input":{"path":"a.txt"},"result":"A","isError":false,"status":"success","timestamp":"2026-03-09T10:00:00.500Z"}`
	turn := func(role, content, turnID string) string {
		return `{"role":"` + role + `","content":"` + content + `","timestamp":"2026-03-09T10:00:00.000Z","turnId":"` + turnID + `"}`
	}
	writeSession(t, srv, "default", "src",
		`{"type":"meta","title":"Plan","created":"2026-03-09T09:00:00.000Z"}`,
		turn("user", "first question", "t1"), tool, turn("assistant", "first answer", "t1"),
		turn("user", "second question", "t2"), turn("assistant", "second answer", "t2"))
	before, err := os.ReadFile(sessionPath(srv, "default", "src"))
	if err != nil {
		t.Fatal(err)
	}

	var b branchInfo
	if st := srv.JSON(http.MethodPost, "/api/workspaces/default/sessions/src/branch", map[string]any{"at": 2}, &b); st != http.StatusCreated {
		t.Fatalf("branch: %d %+v", st, b)
	}
	if b.ID == "" || b.ID == "src" || b.BranchOf == nil || b.BranchOf.Session != "src" || b.BranchOf.At != 2 || b.MessageCount != 2 {
		t.Fatalf("branch reply %+v", b)
	}
	var h history
	if st := srv.JSON(http.MethodGet, "/api/history?workspace=default&session="+b.ID, nil, &h); st != 200 {
		t.Fatalf("branch history: %d", st)
	}
	if len(h.Messages) != 2 || h.Messages[0].Content != "first question" || h.Messages[1].Content != "first answer" || h.Messages[1].TurnID != "t1" {
		t.Fatalf("branch messages %+v", h.Messages)
	}
	if len(h.Tools) != 1 || h.Tools[0].Name != "read_file" || h.Tools[0].TurnID != "t1" {
		t.Fatalf("branch tools %+v", h.Tools)
	}
	if after, _ := os.ReadFile(sessionPath(srv, "default", "src")); string(after) != string(before) {
		t.Fatalf("the source changed:\n%s", after)
	}

	// A message sent to the branch is the branch's; the listing tells
	// which session is a branch of which (after a rename too: the meta
	// line keeps branchOf).
	st := srv.Chat(map[string]any{"message": "second question, edited", "workspace": "default", "session": b.ID})
	st.All(t)
	st.Close()
	if code := srv.JSON(http.MethodPatch, "/api/sessions/"+b.ID+"?workspace=default", map[string]any{"title": "Plan B"}, nil); code != 200 {
		t.Fatalf("rename branch: %d", code)
	}
	var listed []branchInfo
	if code := srv.JSON(http.MethodGet, "/api/workspaces/default/sessions", nil, &listed); code != 200 || len(listed) != 2 {
		t.Fatalf("list: %d %+v", code, listed)
	}
	for _, s := range listed {
		switch s.ID {
		case "src":
			if s.BranchOf != nil || s.MessageCount != 4 {
				t.Fatalf("source listed as %+v", s)
			}
		case b.ID:
			if s.BranchOf == nil || s.BranchOf.Session != "src" || s.BranchOf.At != 2 || s.MessageCount != 4 {
				t.Fatalf("branch listed as %+v", s)
			}
		default:
			t.Fatalf("unexpected session %+v", s)
		}
	}
	if code := srv.JSON(http.MethodGet, "/api/history?workspace=default&session="+b.ID, nil, &h); code != 200 || len(h.Messages) != 4 || h.Messages[2].Content != "second question, edited" {
		t.Fatalf("branch after a turn: %d %+v", code, h.Messages)
	}

	// Refused before anything is written.
	for _, tc := range []struct {
		path string
		body any
		want string
		code int
	}{
		{"/api/workspaces/default/sessions/src/branch", map[string]any{"at": 1}, "", 400},   // an assistant message
		{"/api/workspaces/default/sessions/src/branch", map[string]any{"at": 4}, "", 400},   // past the end
		{"/api/workspaces/default/sessions/src/branch", map[string]any{"at": -1}, "", 400},  // negative
		{"/api/workspaces/default/sessions/src/branch", map[string]any{"at": "2"}, "", 400}, // not a number
		{"/api/workspaces/default/sessions/src/branch", map[string]any{}, "", 400},
		{"/api/workspaces/default/sessions/src/branch", map[string]any{"at": 0, "title": "x"}, "", 400},
		{"/api/workspaces/default/sessions/missing/branch", map[string]any{"at": 0}, `{"error":"Session not found"}`, 404},
		{"/api/workspaces/nope/sessions/src/branch", map[string]any{"at": 0}, "", 404},
		{"/api/workspaces/default/sessions/..%2Fsrc/branch", map[string]any{"at": 0}, "", 400},
	} {
		code, _, body := raw(t, srv, http.MethodPost, tc.path, tc.body)
		if code != tc.code || tc.want != "" && body != tc.want+"\n" && body != tc.want {
			t.Errorf("POST %s %v = %d %s, want %d %s", tc.path, tc.body, code, body, tc.code, tc.want)
		}
	}
	if code := srv.JSON(http.MethodGet, "/api/workspaces/default/sessions", nil, &listed); code != 200 || len(listed) != 2 {
		t.Fatalf("a refused branch wrote a session: %+v", listed)
	}
}
