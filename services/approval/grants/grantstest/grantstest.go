// Package grantstest is the one conformance suite both grant backends pass:
// the same tests run against the grant file and PostgreSQL, so the two
// answer alike (matching, replacement, ordering, expiry, persistence).
// Run it from a backend's tests with a constructor giving fresh, empty
// storage per call.
package grantstest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waggle-os/core/services/approval/grants"
)

// Backend is one place grants are kept, opened as often as a test likes.
type Backend struct {
	// Open opens a store on this storage with clock now (nil: the real
	// clock), failing t when it cannot.
	Open func(t *testing.T, now func() time.Time) *grants.Store
	// Stored is the raw stored content, to check what a write left behind
	// (the suite looks for tool names in it).
	Stored func(t *testing.T) string
}

// Run runs every conformance test, each on a fresh, empty Backend made by
// newBackend.
func Run(t *testing.T, newBackend func(t *testing.T) Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, st Backend)
	}{
		{"RoundTripAcrossReopen", testRoundTripAcrossReopen},
		{"GrantReplacesEqual", testGrantReplacesEqual},
		{"HasMatching", testHasMatching},
		{"RevokeAndClearPersist", testRevokeAndClearPersist},
		{"ConcurrentGrantsLoseNothing", testConcurrentGrantsLoseNothing},
		{"ListNewestFirst", testListNewestFirst},
		{"ExpiredGrantsArePruned", testExpiredGrantsArePruned},
		{"ReturnedGrantsAreCopies", testReturnedGrantsAreCopies},
		{"ReloadSeesOtherWriter", testReloadSeesOtherWriter},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newBackend(t))
		})
	}
}

func ptr(s string) *string { return &s }

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func mustGrant(t *testing.T, s *grants.Store, tool string, args map[string]any, source *string) grants.Grant {
	t.Helper()
	g, err := s.Grant(tool, args, source)
	if err != nil {
		t.Fatalf("Grant(%s): %v", tool, err)
	}
	return g
}

func testRoundTripAcrossReopen(t *testing.T, st Backend) {
	clk := &clock{t: time.Date(2026, 4, 11, 9, 30, 15, 123456789, time.FixedZone("CEST", 2*3600))}
	s := st.Open(t, clk.Now)
	if got := s.List(); len(got) != 0 {
		t.Fatalf("new store lists %v", got)
	}
	g1 := mustGrant(t, s, "write_file", map[string]any{"path": "src/a.go"}, nil)
	clk.Add(time.Second)
	g2 := mustGrant(t, s, "read_other_workspace", map[string]any{"target_workspace_id": "beta"}, ptr("alpha"))
	clk.Add(time.Second)
	g3 := mustGrant(t, s, "bash", map[string]any{"command": "npm test"}, ptr("alpha"))

	want := grants.Grant{ToolName: "write_file", TargetKey: "src/a.go", Description: "Write to src/a.go", GrantedAt: "2026-04-11T07:30:15.123Z"}
	want.ID = g1.ID
	if !reflectEqual(g1, want) {
		t.Fatalf("first grant = %+v, want %+v", g1, want)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(g1.ID) {
		t.Fatalf("id %q is not a v4 UUID", g1.ID)
	}
	if g2.Description != `Read workspace "beta" from "alpha"` || g3.Description != "Run the command: npm test" || g3.TargetKey != "npm test" {
		t.Fatalf("descriptions/keys: %+v %+v", g2, g3)
	}

	re := st.Open(t, clk.Now)
	got := re.List()
	wantList := []grants.Grant{g3, g2, g1} // newest first
	if len(got) != len(wantList) {
		t.Fatalf("after reopen: %d grants, want %d", len(got), len(wantList))
	}
	for i := range got {
		if !reflectEqual(got[i], wantList[i]) {
			t.Fatalf("after reopen [%d] = %+v, want %+v", i, got[i], wantList[i])
		}
	}
	if _, ok := re.Has("write_file", map[string]any{"path": "src/a.go"}, "default"); !ok {
		t.Fatal("reopened store lost the write_file grant")
	}
}

func reflectEqual(a, b grants.Grant) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func testGrantReplacesEqual(t *testing.T, st Backend) {
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := st.Open(t, clk.Now)
	first := mustGrant(t, s, "write_file", map[string]any{"path": "a"}, ptr("ws1"))
	clk.Add(time.Minute)
	second := mustGrant(t, s, "write_file", map[string]any{"file_path": " a "}, ptr("ws1")) // same key
	mustGrant(t, s, "write_file", map[string]any{"path": "a"}, ptr("ws2"))                  // other scope
	mustGrant(t, s, "write_file", map[string]any{"path": "a"}, nil)                         // global is another scope
	mustGrant(t, s, "edit_file", map[string]any{"path": "a"}, ptr("ws1"))                   // other tool
	mustGrant(t, s, "write_file", map[string]any{"path": "b"}, ptr("ws1"))                  // other key

	list := st.Open(t, clk.Now).List()
	if len(list) != 5 {
		t.Fatalf("%d grants after reopen, want 5: %+v", len(list), list)
	}
	for _, g := range list {
		if g.ID == first.ID {
			t.Fatal("replaced grant still stored")
		}
	}
	var scoped []string
	for _, g := range list {
		if g.ToolName == "write_file" && g.TargetKey == "a" && g.SourceWorkspaceID != nil && *g.SourceWorkspaceID == "ws1" {
			scoped = append(scoped, g.ID)
		}
	}
	if !slices.Equal(scoped, []string{second.ID}) {
		t.Fatalf("write_file/a/ws1 grants %v, want only the replacement %s", scoped, second.ID)
	}
	if second.GrantedAt != "2026-01-01T00:01:00.000Z" {
		t.Fatalf("replacement grantedAt %s", second.GrantedAt)
	}
}

func testHasMatching(t *testing.T, st Backend) {
	s := st.Open(t, nil)
	mustGrant(t, s, "write_file", map[string]any{"path": "notes.md"}, nil)
	mustGrant(t, s, "read_other_workspace", map[string]any{"target_workspace_id": "beta"}, ptr("alpha"))
	mustGrant(t, s, "git_push", map[string]any{"branch": "main"}, ptr("alpha"))
	mustGrant(t, s, "edit_file", map[string]any{}, nil) // key "*"

	tests := []struct {
		name      string
		tool      string
		args      map[string]any
		workspace string
		want      bool
	}{
		{"null scope in default", "write_file", map[string]any{"path": "notes.md"}, "default", true},
		{"null scope in any workspace", "write_file", map[string]any{"path": "notes.md"}, "team-x", true},
		{"null scope via file_path", "write_file", map[string]any{"file_path": "notes.md"}, "w", true},
		{"other path not matched", "write_file", map[string]any{"path": "other.md"}, "default", false},
		{"other tool same path", "edit_file", map[string]any{"path": "notes.md"}, "default", false},
		{"* is not a wildcard", "edit_file", map[string]any{"path": "x.md"}, "default", false},
		{"* matches a call without a path", "edit_file", map[string]any{"path": "  "}, "default", true},
		{"scoped in its workspace", "read_other_workspace", map[string]any{"target_workspace_id": "beta"}, "alpha", true},
		{"scoped elsewhere", "read_other_workspace", map[string]any{"target_workspace_id": "beta"}, "gamma", false},
		{"scoped other target", "read_other_workspace", map[string]any{"target_workspace_id": "delta"}, "alpha", false},
		{"scoped grant does not match empty workspace", "read_other_workspace", map[string]any{"target_workspace_id": "beta"}, "", false},
		{"git_push any branch in its workspace", "git_push", map[string]any{"branch": "dev"}, "alpha", true},
		{"git_push elsewhere", "git_push", map[string]any{"branch": "dev"}, "default", false},
		{"ungranted tool", "git_commit", nil, "alpha", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, ok := s.Has(tc.tool, tc.args, tc.workspace)
			if ok != tc.want {
				t.Fatalf("Has = %v, want %v", ok, tc.want)
			}
			if ok && g.ToolName != tc.tool {
				t.Fatalf("matched grant of %s", g.ToolName)
			}
		})
	}
}

func testRevokeAndClearPersist(t *testing.T, st Backend) {
	s := st.Open(t, nil)
	a := mustGrant(t, s, "write_file", map[string]any{"path": "a"}, nil)
	b := mustGrant(t, s, "write_file", map[string]any{"path": "b"}, nil)

	if ok, err := s.Revoke("no-such-id"); ok || err != nil {
		t.Fatalf("Revoke(unknown) = %v, %v", ok, err)
	}
	if ok, err := s.Revoke(a.ID); !ok || err != nil {
		t.Fatalf("Revoke = %v, %v", ok, err)
	}
	if ok, _ := s.Revoke(a.ID); ok {
		t.Fatal("second Revoke of the same id succeeded")
	}
	re := st.Open(t, nil)
	if got := re.List(); len(got) != 1 || got[0].ID != b.ID {
		t.Fatalf("after revoke and reopen: %+v", got)
	}
	if _, ok := re.Has("write_file", map[string]any{"path": "a"}, "default"); ok {
		t.Fatal("revoked grant still matches after reopen")
	}

	if err := s.Clear(); err != nil {
		t.Fatal(err)
	}
	if got := st.Open(t, nil).List(); len(got) != 0 {
		t.Fatalf("after clear and reopen: %+v", got)
	}
}

func testConcurrentGrantsLoseNothing(t *testing.T, st Backend) {
	s := st.Open(t, nil)
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if _, err := s.Grant("write_file", map[string]any{"path": fmt.Sprintf("f%d", i)}, nil); err != nil {
				errs <- err
			}
			s.Has("write_file", map[string]any{"path": "f0"}, "default")
			s.List()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := st.Open(t, nil).List()
	if len(got) != n {
		t.Fatalf("%d grants after reopen, want %d", len(got), n)
	}
	keys := map[string]bool{}
	for _, g := range got {
		keys[g.TargetKey] = true
	}
	if len(keys) != n {
		t.Fatalf("%d distinct targets, want %d", len(keys), n)
	}
}

func testListNewestFirst(t *testing.T, st Backend) {
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := st.Open(t, clk.Now)
	for _, p := range []string{"a", "b", "c"} {
		mustGrant(t, s, "write_file", map[string]any{"path": p}, nil)
		clk.Add(time.Millisecond)
	}
	var keys []string
	for _, g := range s.List() {
		keys = append(keys, g.TargetKey)
	}
	if !slices.Equal(keys, []string{"c", "b", "a"}) {
		t.Fatalf("order %v", keys)
	}
}

func testExpiredGrantsArePruned(t *testing.T, st Backend) {
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := st.Open(t, clk.Now)
	g, err := s.GrantFor("git_commit", nil, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if g.ExpiresAt == nil || *g.ExpiresAt != "2026-01-01T01:00:00.000Z" {
		t.Fatalf("expiresAt = %v", g.ExpiresAt)
	}
	mustGrant(t, s, "git_push", nil, nil)
	if _, ok := s.Has("git_commit", nil, "default"); !ok {
		t.Fatal("live grant not matched")
	}
	clk.Add(2 * time.Hour)
	if _, ok := s.Has("git_commit", nil, "default"); ok {
		t.Fatal("expired grant matched")
	}
	if got := s.List(); len(got) != 1 || got[0].ToolName != "git_push" {
		t.Fatalf("List after expiry: %+v", got)
	}
	// A reopened store drops it too, even before any write.
	if _, ok := st.Open(t, clk.Now).Has("git_commit", nil, "default"); ok {
		t.Fatal("expired grant matched after reopen")
	}
	// The next write removes it from the file.
	mustGrant(t, s, "git_pr", nil, nil)
	if strings.Contains(st.Stored(t), "git_commit") {
		t.Fatal("expired grant still in the file after a write")
	}
}

func testReturnedGrantsAreCopies(t *testing.T, st Backend) {
	s := st.Open(t, nil)
	src := "alpha"
	g := mustGrant(t, s, "git_pr", nil, &src)
	src = "beta" // the caller's variable must not move the grant
	*g.SourceWorkspaceID = "beta"
	for _, l := range s.List() {
		*l.SourceWorkspaceID = "beta"
	}
	if _, ok := s.Has("git_pr", nil, "alpha"); !ok {
		t.Fatal("grant scope changed through a returned pointer")
	}
	if _, ok := s.Has("git_pr", nil, "beta"); ok {
		t.Fatal("grant scope changed through a returned pointer")
	}
}

// A second store on the same storage (another process) sees a grant and
// its revocation once it reloads.
func testReloadSeesOtherWriter(t *testing.T, st Backend) {
	a, b := st.Open(t, nil), st.Open(t, nil)
	g := mustGrant(t, a, "git_merge", nil, ptr("ws"))
	if err := b.Reload(); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.Has("git_merge", nil, "ws"); !ok || got.ID != g.ID {
		t.Fatalf("after Reload: %+v %v", got, ok)
	}
	if _, err := a.Revoke(g.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Has("git_merge", nil, "ws"); ok {
		t.Fatal("revocation not picked up by Reload")
	}
}
