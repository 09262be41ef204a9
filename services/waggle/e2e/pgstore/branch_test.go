package pgstore

import (
	"net/http"
	"testing"

	"github.com/waggle-os/core/services/sessionstore"
)

// TestBranchInPostgres: a branch of a session stored in PostgreSQL is
// made there, lists with its branchOf after the store restarts with a
// fresh data dir, and holds only the messages before the edit.
func TestBranchInPostgres(t *testing.T) {
	e := start(t, sessionstore.StorePostgres)
	e.chat(t, "", "s1", "first question")
	e.chat(t, "", "s1", "second question")
	var b struct {
		ID       string
		BranchOf struct {
			Session string
			At      int
		}
	}
	if st := e.srv.JSON(http.MethodPost, "/api/workspaces/default/sessions/s1/branch", map[string]any{"at": 2}, &b); st != http.StatusCreated || b.BranchOf.Session != "s1" || b.BranchOf.At != 2 {
		t.Fatalf("branch: %d %+v", st, b)
	}
	e.chat(t, "default", b.ID, "second question, edited")
	e.stopStore(t)
	e.startStore(t, sessionstore.StorePostgres, t.TempDir())

	var listed []struct {
		ID           string
		MessageCount int
		BranchOf     *struct {
			Session string
			At      int
		}
	}
	if st := e.srv.JSON(http.MethodGet, "/api/workspaces/default/sessions", nil, &listed); st != 200 || len(listed) != 2 {
		t.Fatalf("listing: %d %+v", st, listed)
	}
	for _, s := range listed {
		if (s.ID == b.ID) != (s.BranchOf != nil) || s.MessageCount != 4 {
			t.Fatalf("listed %+v (branch %s)", s, b.ID)
		}
	}
	var h struct {
		Messages []struct{ Role, Content string }
	}
	if st := e.srv.JSON(http.MethodGet, "/api/history?workspace=default&session="+b.ID, nil, &h); st != 200 || len(h.Messages) != 4 ||
		h.Messages[0].Content != "first question" || h.Messages[2].Content != "second question, edited" {
		t.Fatalf("branch history: %d %+v", st, h.Messages)
	}
}
