package groups_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/groups"
	"github.com/waggle-os/core/services/sessionstore/groups/groupstest"
)

func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// clock gives each group a later createdAt.
func clock() func() time.Time {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	return func() time.Time { at = at.Add(time.Second); return at }
}

// rowNames is the name of every group row in PostgreSQL, in order.
func rowNames(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT doc->>'name' FROM agent_groups ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(names, ",")
}

// fileNames is the name of every group of the file, in order.
func fileNames(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, groups.FileName))
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	var gs []protocol.AgentGroup
	if err := json.Unmarshal(data, &gs); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range gs {
		names = append(names, g.Name)
	}
	return strings.Join(names, ",")
}

func listNames(t *testing.T, s *groups.Roster) string {
	t.Helper()
	gs, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range gs {
		names = append(names, g.Name)
	}
	return strings.Join(names, ",")
}

func create(t *testing.T, s *groups.Roster, name, team string) protocol.AgentGroup {
	t.Helper()
	body := fmt.Sprintf(`{"name":%q,"strategy":"sequential"}`, name)
	if team != "" {
		body = fmt.Sprintf(`{"name":%q,"strategy":"sequential","teamId":%q}`, name, team)
	}
	g, err := s.Create(groupstest.Fields(t, body))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestSplitKeepsGroupsOfNoTeamOutOfPostgres: split, a team's group is a
// row of PostgreSQL and a group of no team is in the file, never in
// PostgreSQL; the listing has both in creation order, and each is read,
// changed and deleted where it is.
func TestSplitKeepsGroupsOfNoTeamOutOfPostgres(t *testing.T) {
	pool := newPool(t)
	dir := t.TempDir()
	cfg := groups.Config{DataDir: dir, Pool: pool, Split: true, Now: clock()}
	s := open(t, cfg)
	acme := create(t, s, "acme-crew", "acme")
	mine := create(t, s, "my-crew", "")
	create(t, s, "acme-later", "acme")
	if got := rowNames(t, pool); got != "acme-crew,acme-later" {
		t.Errorf("PostgreSQL rows %q, want only acme's groups", got)
	}
	if got := fileNames(t, dir); got != "my-crew" {
		t.Errorf("file groups %q, want my-crew", got)
	}
	s = open(t, cfg)
	if got := listNames(t, s); got != "acme-crew,my-crew,acme-later" {
		t.Errorf("listing %q, want creation order", got)
	}
	for _, g := range []protocol.AgentGroup{acme, mine} {
		if got, err := s.Get(g.ID); err != nil || got.Name != g.Name {
			t.Errorf("get %s: %+v %v", g.Name, got, err)
		}
		if _, err := s.Update(g.ID, groupstest.Fields(t, `{"description":"renamed"}`)); err != nil {
			t.Errorf("update %s: %v", g.Name, err)
		}
	}
	if got, _ := s.Get(mine.ID); got.Description == nil || *got.Description != "renamed" || got.TeamID != "" {
		t.Errorf("my-crew after the update: %+v", got)
	}
	if err := s.Delete(mine.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(mine.ID); protocol.KindOf(err) != protocol.NotFound {
		t.Errorf("second delete: %v, want 404", err)
	}
	if got := listNames(t, open(t, cfg)); got != "acme-crew,acme-later" {
		t.Errorf("listing after the delete %q", got)
	}
}

// TestGroupsOfNoTeamMoveOutOfPostgres: the groups of no team an older
// version kept in PostgreSQL move into the file at start and their rows
// go; a team's stay. A crash before the rows were deleted (a row put back)
// writes the same group again, never a second copy.
func TestGroupsOfNoTeamMoveOutOfPostgres(t *testing.T) {
	pool := newPool(t)
	now := clock()
	old := open(t, groups.Config{Pool: pool, Now: now})
	create(t, old, "acme-crew", "acme")
	mine := create(t, old, "my-crew", "")
	dir := t.TempDir()
	cfg := groups.Config{DataDir: dir, Pool: pool, Split: true, Now: now}
	check := func(when string) {
		t.Helper()
		s := open(t, cfg)
		if got := listNames(t, s); got != "acme-crew,my-crew" {
			t.Errorf("%s: listing %q", when, got)
		}
		if got := rowNames(t, pool); got != "acme-crew" {
			t.Errorf("%s: PostgreSQL rows %q, want acme-crew", when, got)
		}
		if got := fileNames(t, dir); got != "my-crew" {
			t.Errorf("%s: file groups %q, want my-crew", when, got)
		}
	}
	check("after the move")
	check("after a second start")
	doc, err := json.Marshal(mine)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `INSERT INTO agent_groups (id, doc) VALUES ($1, $2)`, mine.ID, doc); err != nil {
		t.Fatal(err)
	}
	check("after a crash before the row was deleted")
}

// TestGroupsMadeInOneMillisecondListInOrder: createdAt has millisecond
// precision and orders the listing across the file and PostgreSQL; groups
// made within one millisecond (a frozen clock here) still list in the
// order they were made, whichever side keeps them.
func TestGroupsMadeInOneMillisecondListInOrder(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	cfg := groups.Config{DataDir: t.TempDir(), Pool: newPool(t), Split: true, Now: func() time.Time { return at }}
	s := open(t, cfg)
	create(t, s, "team-first", "acme")
	create(t, s, "mine-second", "")
	create(t, s, "team-third", "acme")
	if got := listNames(t, open(t, cfg)); got != "team-first,mine-second,team-third" {
		t.Errorf("listing %q, want creation order", got)
	}
}
