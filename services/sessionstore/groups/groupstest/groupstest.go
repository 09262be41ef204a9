// Package groupstest is the one conformance suite both agent-group
// backends pass: the same tests run against the groups file and
// PostgreSQL, so the two answer alike. Run it from a backend's tests with a
// constructor giving fresh, empty storage per call.
package groupstest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/groups"
)

// Backend is one place groups are kept.
type Backend struct {
	// Open opens a store on this storage, as often as a test likes (a
	// restarted store process), failing t when it cannot.
	Open func(t *testing.T) *groups.Roster
}

// Run runs every conformance test, each on a fresh, empty Backend made by
// newBackend.
func Run(t *testing.T, newBackend func(t *testing.T) Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, st Backend)
	}{
		{"CRUD", testCRUD},
		{"ConcurrentCreatesKeepEveryGroup", testConcurrentCreates},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newBackend(t))
		})
	}
}

// Fields decodes a JSON object as the gateway hands a request body to
// Store.Create and Update (and to groups.Parse), failing t when it is not
// one.
func Fields(t *testing.T, body string) map[string]json.RawMessage {
	t.Helper()
	var f map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &f); err != nil {
		t.Fatal(err)
	}
	return f
}

func testCRUD(t *testing.T, st Backend) {
	s := st.Open(t)
	if gs, err := s.List(); err != nil || gs == nil || len(gs) != 0 {
		t.Fatalf("List on no file = %v, %v", gs, err)
	}
	g, err := s.Create(Fields(t, `{"name":"team","strategy":"sequential","members":[{"agentId":"a"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !protocol.ValidID(g.ID) || g.CreatedAt == "" {
		t.Fatalf("created %+v", g)
	}
	second, err := s.Create(Fields(t, `{"name":"second","strategy":"parallel","description":"d"}`))
	if err != nil {
		t.Fatal(err)
	}
	up, err := s.Update(g.ID, Fields(t, `{"name":"renamed"}`))
	if err != nil || up.Name != "renamed" || up.Strategy != "sequential" || len(up.Members) != 1 {
		t.Fatalf("update = %+v, %v", up, err)
	}
	if _, err := s.Update(g.ID, Fields(t, `{"strategy":"random"}`)); protocol.KindOf(err) != protocol.Invalid {
		t.Fatalf("invalid update = %v, want 400", err)
	}
	s = st.Open(t)
	if got, _ := s.Get(g.ID); got.Name != "renamed" || got.Strategy != "sequential" || got.CreatedAt != g.CreatedAt {
		t.Fatalf("get after update and restart = %+v", got)
	}
	if gs, _ := s.List(); len(gs) != 2 || gs[0].ID != g.ID || gs[1].ID != second.ID || *gs[1].Description != "d" {
		t.Fatalf("list not in creation order: %+v", gs)
	}
	if err := s.Delete(second.ID); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		func() error { _, err := s.Get("nope"); return err }(),
		func() error { _, err := s.Update("nope", Fields(t, `{}`)); return err }(),
		s.Delete("nope"),
	} {
		if e := protocol.AsError(err); e == nil || e.Kind != protocol.NotFound || e.Message != "Group not found" {
			t.Errorf("unknown id: %v", err)
		}
	}
	if err := s.Delete(g.ID); err != nil {
		t.Fatal(err)
	}
	if gs, _ := s.List(); len(gs) != 0 {
		t.Fatalf("after delete %+v", gs)
	}
}

func testConcurrentCreates(t *testing.T, st Backend) {
	s := st.Open(t)
	const n = 40
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"name":"g%d","strategy":"parallel"}`, i)
			if _, err := s.Create(Fields(t, body)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if gs, _ := s.List(); len(gs) != n {
		t.Fatalf("%d groups, want %d", len(gs), n)
	}
}

// Legacy opens the roster as versions before the split kept it on a team
// server — every group in the PostgreSQL at url, those of no team
// included — so black-box tests can leave what an older version left.
func Legacy(t *testing.T, url string) *groups.Roster {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := groups.New(groups.Config{Pool: pool}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
