package pgstore

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waggle-os/core/services/sessionstore/groups"
	"github.com/waggle-os/core/services/sessionstore/groups/groupstest"
)

// groupNames is GET /api/agent-groups' names, in order.
func (e *env) groupNames(t *testing.T) string {
	t.Helper()
	var out []struct {
		Name string `json:"name"`
	}
	if st := e.srv.JSON(http.MethodGet, "/api/agent-groups", nil, &out); st != 200 {
		t.Fatalf("list groups: %d", st)
	}
	var names []string
	for _, g := range out {
		names = append(names, g.Name)
	}
	return strings.Join(names, ",")
}

// fileGroups is the data dir's agent-groups.json as text ("" when none).
func fileGroups(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, groups.FileName))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(data)
}

// TestGroupsOfNoTeamStayOutOfPostgres: with team workspaces in PostgreSQL
// and personal ones in the data dir, a team's agent group is kept in
// PostgreSQL (it survives losing the data dir) and a group of no team in
// the data dir's agent-groups.json (losing the data dir loses it).
func TestGroupsOfNoTeamStayOutOfPostgres(t *testing.T) {
	e := start(t, "")
	for _, body := range []map[string]any{
		{"name": "team-crew", "strategy": "sequential", "teamId": "team-1"},
		{"name": "my-crew", "strategy": "parallel"},
	} {
		if st := e.srv.JSON(http.MethodPost, "/api/agent-groups", body, nil); st != 201 {
			t.Fatalf("create group %v: %d", body, st)
		}
	}
	if got := e.groupNames(t); got != "team-crew,my-crew" {
		t.Errorf("groups %q", got)
	}
	if f := fileGroups(t, e.dataDir); !strings.Contains(f, "my-crew") || strings.Contains(f, "team-crew") {
		t.Errorf("agent-groups.json = %q, want my-crew only", f)
	}
	e.stopStore(t)
	e.startStore(t, "", t.TempDir())
	if got := e.groupNames(t); got != "team-crew" {
		t.Errorf("groups after losing the data dir %q, want team-crew (a group of no team was in PostgreSQL?)", got)
	}
}

// TestGroupsOfNoTeamMoveOutOfPostgres: a group of no team an older
// version kept in PostgreSQL (written here as it did, by groupstest.Legacy) is moved to the data dir when the store starts: it is
// listed, the file holds it, and a store on a fresh data dir no longer
// finds it.
func TestGroupsOfNoTeamMoveOutOfPostgres(t *testing.T) {
	e := start(t, "")
	e.stopStore(t)
	old := groupstest.Legacy(t, e.pgURL)
	for _, body := range []string{`{"name":"team-crew","strategy":"sequential","teamId":"team-1"}`, `{"name":"old-crew","strategy":"sequential"}`} {
		if _, err := old.Create(groupstest.Fields(t, body)); err != nil {
			t.Fatal(err)
		}
	}
	dir := e.dataDir
	e.startStore(t, "", dir)
	if got := e.groupNames(t); got != "team-crew,old-crew" {
		t.Errorf("groups after the move %q", got)
	}
	var inFile []json.RawMessage
	if err := json.Unmarshal([]byte(fileGroups(t, dir)), &inFile); err != nil || len(inFile) != 1 || !strings.Contains(string(inFile[0]), "old-crew") {
		t.Errorf("agent-groups.json after the move: %s %v", inFile, err)
	}
	e.stopStore(t)
	e.startStore(t, "", t.TempDir())
	if got := e.groupNames(t); got != "team-crew" {
		t.Errorf("groups on a fresh data dir %q: the group of no team is still in PostgreSQL", got)
	}
}
