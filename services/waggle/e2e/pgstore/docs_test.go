package pgstore

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// identityName is the name of the identity of the mind q selects ("" for
// none configured).
func (e *env) identityName(t *testing.T, q string) string {
	t.Helper()
	var out struct {
		Name *string `json:"name"`
	}
	if st := e.srv.JSON(http.MethodGet, "/api/identity"+q, nil, &out); st != 200 {
		t.Fatalf("identity %s: %d", q, st)
	}
	if out.Name == nil {
		return ""
	}
	return *out.Name
}

func (e *env) profileName(t *testing.T) string {
	t.Helper()
	var p struct {
		Name string `json:"name"`
	}
	if st := e.srv.JSON(http.MethodGet, "/api/profile", nil, &p); st != 200 {
		t.Fatalf("profile: %d", st)
	}
	return p.Name
}

func (e *env) personaIDs(t *testing.T) []string {
	t.Helper()
	var out struct {
		Personas []struct {
			ID string `json:"id"`
		} `json:"personas"`
	}
	if st := e.srv.JSON(http.MethodGet, "/api/personas", nil, &out); st != 200 {
		t.Fatalf("personas: %d", st)
	}
	var ids []string
	for _, p := range out.Personas {
		ids = append(ids, p.ID)
	}
	return ids
}

// TestPersonalDocumentsStayOutOfPostgres: with team workspaces in
// PostgreSQL and personal ones in JSONL, the user documents follow the
// minds' rule: a team workspace's identity is in PostgreSQL (it survives
// losing the data dir, and no file is written for it), a personal
// workspace's identity, the profile and the custom personas are in the
// data dir and never in PostgreSQL (losing the data dir loses them).
func TestPersonalDocumentsStayOutOfPostgres(t *testing.T) {
	e := start(t, "")
	team := e.createWorkspace(t, map[string]any{"name": "Alpha", "teamId": "team-1"})
	personal := e.createWorkspace(t, map[string]any{"name": "Alpha"})
	for ws, name := range map[string]string{team: "Team Bee", personal: "Personal Bee"} {
		if st := e.srv.JSON(http.MethodPost, "/api/identity", map[string]any{"workspace": ws, "name": name, "role": "assistant"}, nil); st != 200 {
			t.Fatalf("set identity of %s: %d", ws, st)
		}
	}
	if st := e.srv.JSON(http.MethodPut, "/api/profile", map[string]any{"name": "Ada Personal"}, nil); st != 200 {
		t.Fatalf("put profile: %d", st)
	}
	if st := e.srv.JSON(http.MethodPost, "/api/personas", map[string]any{"id": "my-helper", "name": "My Helper", "systemPrompt": "Help me."}, nil); st != 201 {
		t.Fatalf("create persona: %d", st)
	}
	for _, f := range []string{filepath.Join("workspaces", personal, "identity.json"), "profile.json", "personas.json"} {
		if !exists(filepath.Join(e.dataDir, f)) {
			t.Errorf("%s is not in the data dir", f)
		}
	}
	if exists(filepath.Join(e.dataDir, "workspaces", team)) {
		t.Error("the team workspace's identity has a file in the data dir")
	}

	// The data dir is lost: the team workspace's identity is all there;
	// the personal documents went with the files, never in PostgreSQL.
	e.stopStore(t)
	e.startStore(t, "", t.TempDir())
	if got := e.identityName(t, "?workspace="+team); got != "Team Bee" {
		t.Errorf("team identity after losing the data dir = %q", got)
	}
	if again := e.createWorkspace(t, map[string]any{"name": "Alpha"}); again != personal {
		t.Fatalf("recreated personal workspace id = %s, want %s", again, personal)
	}
	if got := e.identityName(t, "?workspace="+personal); got != "" {
		t.Errorf("a personal workspace's identity was in PostgreSQL: %q", got)
	}
	if got := e.profileName(t); got == "Ada Personal" {
		t.Error("the profile was in PostgreSQL")
	}
	if contains(e.personaIDs(t), "my-helper") {
		t.Error("a custom persona was in PostgreSQL")
	}
}

// TestPersonalDocumentsMoveOutOfPostgres: personal documents an older
// version kept in PostgreSQL (here written by a store with every
// workspace in PostgreSQL, which keeps them in the same table) are moved
// to the data dir when the store starts with team workspaces only in
// PostgreSQL: they are found, their files are written, and their rows are
// gone (a store on a fresh data dir no longer finds them).
func TestPersonalDocumentsMoveOutOfPostgres(t *testing.T) {
	e := start(t, sessionstore.StorePostgres)
	if st := e.srv.JSON(http.MethodPut, "/api/profile", map[string]any{"name": "Ada Moved"}, nil); st != 200 {
		t.Fatalf("put profile: %d", st)
	}
	if st := e.srv.JSON(http.MethodPost, "/api/personas", map[string]any{"id": "moved-helper", "name": "Moved Helper", "systemPrompt": "Help me."}, nil); st != 201 {
		t.Fatalf("create persona: %d", st)
	}
	e.stopStore(t)
	dir := t.TempDir()
	e.startStore(t, "", dir)
	if got := e.profileName(t); got != "Ada Moved" {
		t.Fatalf("profile after the move = %q", got)
	}
	if !contains(e.personaIDs(t), "moved-helper") {
		t.Fatal("the custom persona was not moved")
	}
	for _, f := range []string{"profile.json", "personas.json"} {
		if !exists(filepath.Join(dir, f)) {
			t.Errorf("%s was not written to the data dir", f)
		}
	}
	// Again, idempotent: the files stay and are read.
	e.stopStore(t)
	e.startStore(t, "", dir)
	if got := e.profileName(t); got != "Ada Moved" {
		t.Fatalf("profile after a second start = %q", got)
	}
	e.stopStore(t)
	e.startStore(t, "", t.TempDir())
	if got := e.profileName(t); got == "Ada Moved" {
		t.Error("the profile is still in PostgreSQL after the move")
	}
}

// TestPersonalWorkflowsStayOutOfPostgres: the tool sequences and captured
// workflows of a personal workspace are kept in its directory, a team
// workspace's in PostgreSQL (it keeps them when the data dir is lost).
func TestPersonalWorkflowsStayOutOfPostgres(t *testing.T) {
	e := start(t, "")
	team := e.createWorkspace(t, map[string]any{"name": "Alpha", "teamId": "team-1"})
	personal := e.createWorkspace(t, map[string]any{"name": "Alpha"})
	nc := e.srv.DialNATS()
	defer nc.Close()
	tools := []string{"read_file", "search_files", "write_file"}
	captured := func(ws string) int {
		return len(waggletest.Operate(t, nc, protocol.ListWorkflows, protocol.WorkspaceRequest{Workspace: ws}).Workflows)
	}
	for _, ws := range []string{team, personal} {
		for i := range 3 {
			waggletest.Operate(t, nc, protocol.ObserveWorkflow, protocol.WorkflowObserveRequest{Workspace: ws, Session: fmt.Sprint("s", i), Tools: tools})
		}
		if n := captured(ws); n != 1 {
			t.Fatalf("%s: %d captured workflows, want 1", ws, n)
		}
	}
	if !exists(filepath.Join(e.dataDir, "workspaces", personal, "workflows.json")) {
		t.Error("the personal workspace's workflows are not in its directory")
	}
	if exists(filepath.Join(e.dataDir, "workspaces", team)) {
		t.Error("the team workspace has files in the data dir")
	}
	e.stopStore(t)
	e.startStore(t, "", t.TempDir())
	if n := captured(team); n != 1 {
		t.Errorf("team workflows after losing the data dir: %d, want 1", n)
	}
	if again := e.createWorkspace(t, map[string]any{"name": "Alpha"}); again != personal {
		t.Fatalf("recreated personal workspace id = %s", again)
	}
	if n := captured(personal); n != 0 {
		t.Errorf("a personal workspace's workflows were in PostgreSQL: %d", n)
	}
}
