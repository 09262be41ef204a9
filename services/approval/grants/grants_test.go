package grants

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/pgtest"
)

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

func open(t *testing.T, dir string, now func() time.Time) *Store {
	t.Helper()
	s, err := Open(Config{DataDir: dir, Now: now})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// storage is one place grants are kept, opened as often as a test likes.
type storage struct {
	// open opens a store on this storage with clock now.
	open func(t *testing.T, now func() time.Time) *Store
	// stored is the raw stored content, to check what a write left behind.
	stored func(t *testing.T) string
}

// implementations runs fn once per storage: the file under a data
// directory and a PostgreSQL database.
func implementations(t *testing.T, fn func(t *testing.T, st storage)) {
	t.Run("files", func(t *testing.T) {
		dir := t.TempDir()
		fn(t, storage{
			open:   func(t *testing.T, now func() time.Time) *Store { return open(t, dir, now) },
			stored: func(t *testing.T) string { return readFile(t, dir) },
		})
	})
	t.Run("postgres", func(t *testing.T) {
		pool, err := pgxpool.New(context.Background(), pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		fn(t, storage{
			open: func(t *testing.T, now func() time.Time) *Store {
				t.Helper()
				s, err := Open(Config{Pool: pool, Now: now})
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				if s.Path() != "" {
					t.Fatalf("PostgreSQL store has a file path %q", s.Path())
				}
				return s
			},
			stored: func(t *testing.T) string {
				t.Helper()
				var all string
				err := pool.QueryRow(context.Background(),
					`SELECT coalesce(string_agg(tool_name || ' ' || target_key, E'\n' ORDER BY seq), '') FROM approval_grants`).Scan(&all)
				if err != nil {
					t.Fatal(err)
				}
				return all
			},
		})
	})
}

func mustGrant(t *testing.T, s *Store, tool string, args map[string]any, source *string) Grant {
	t.Helper()
	g, err := s.Grant(tool, args, source)
	if err != nil {
		t.Fatalf("Grant(%s): %v", tool, err)
	}
	return g
}

func writeFile(t *testing.T, dir, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err == nil {
		t.Fatal("empty DataDir must be rejected")
	}
	if _, err := Open(Config{}); err == nil {
		t.Fatal("Open with empty DataDir must fail")
	}
	if err := (Config{DataDir: t.TempDir()}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestRoundTripAcrossReopen(t *testing.T) {
	implementations(t, testRoundTripAcrossReopen)
}

func testRoundTripAcrossReopen(t *testing.T, st storage) {
	clk := &clock{t: time.Date(2026, 4, 11, 9, 30, 15, 123456789, time.FixedZone("CEST", 2*3600))}
	s := st.open(t, clk.Now)
	if got := s.List(); len(got) != 0 {
		t.Fatalf("new store lists %v", got)
	}
	g1 := mustGrant(t, s, "write_file", map[string]any{"path": "src/a.go"}, nil)
	clk.Add(time.Second)
	g2 := mustGrant(t, s, "read_other_workspace", map[string]any{"target_workspace_id": "beta"}, ptr("alpha"))
	clk.Add(time.Second)
	g3 := mustGrant(t, s, "bash", map[string]any{"command": "npm test"}, ptr("alpha"))

	want := Grant{ToolName: "write_file", TargetKey: "src/a.go", Description: "Write to src/a.go", GrantedAt: "2026-04-11T07:30:15.123Z"}
	want.ID = g1.ID
	if !reflectEqual(g1, want) {
		t.Fatalf("first grant = %+v, want %+v", g1, want)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(g1.ID) {
		t.Fatalf("id %q is not a v4 UUID", g1.ID)
	}
	if g2.Description != `Read workspace "beta" from "alpha"` || g3.Description != "Execute bash on *" || g3.TargetKey != "*" {
		t.Fatalf("descriptions/keys: %+v %+v", g2, g3)
	}

	re := st.open(t, clk.Now)
	got := re.List()
	wantList := []Grant{g3, g2, g1} // newest first
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

func reflectEqual(a, b Grant) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func TestFileFormat(t *testing.T) {
	dir := t.TempDir()
	clk := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	s := open(t, dir, clk.Now)
	g := mustGrant(t, s, "write_file", map[string]any{"path": "<a&b>.txt"}, nil)
	want := `{
  "version": 1,
  "grants": [
    {
      "id": "` + g.ID + `",
      "toolName": "write_file",
      "targetKey": "<a&b>.txt",
      "sourceWorkspaceId": null,
      "description": "Write to <a&b>.txt",
      "grantedAt": "2026-01-02T03:04:05.000Z",
      "expiresAt": null
    }
  ]
}`
	if got := readFile(t, dir); got != want {
		t.Fatalf("file:\n%s\nwant:\n%s", got, want)
	}
	if err := s.Clear(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, dir); got != "{\n  \"version\": 1,\n  \"grants\": []\n}" {
		t.Fatalf("cleared file: %q", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temp files left behind: %v", entries)
	}
}

// A damaged grant file never costs a grant silently: a file cut short
// serves every complete grant before the cut, any other unusable file
// starts empty; either way the file is untouched until the next write and
// a copy of it is kept aside (<file>.damaged-<hash>) before that write.
func TestDamagedFileIsSalvagedAndKept(t *testing.T) {
	valid := `{"id":"g1","toolName":"bash","targetKey":"*","sourceWorkspaceId":null,"description":"Execute bash on *","grantedAt":"2026-01-01T00:00:00.000Z","expiresAt":null}`
	second := `{"id":"g2","toolName":"git_push","targetKey":"*","sourceWorkspaceId":null,"description":"Push","grantedAt":"2026-01-01T00:00:00.000Z","expiresAt":null}`
	tests := []struct {
		name, content string
		served        []string // tools of the grants still served
	}{
		{"cut after a grant", `{"version":1,"grants":[` + valid, []string{"bash"}},
		{"cut inside the second grant", `{"version":1,"grants":[` + valid + `,` + second[:40], []string{"bash"}},
		{"cut after the comma", "{\n  \"version\": 1,\n  \"grants\": [\n    " + valid + ",\n    " + second + ",", []string{"bash", "git_push"}},
		{"cut before the grants", `{"version":1,"gra`, nil},
		{"wrong version", `{"version":2,"grants":[` + valid + `]}`, nil},
		{"version as string", `{"version":"1","grants":[` + valid + `]}`, nil},
		{"no version", `{"grants":[` + valid + `]}`, nil},
		{"grants not an array", `{"version":1,"grants":{}}`, nil},
		{"not an object", `[1,2]`, nil},
		{"garbage", "\x00\x00\xff not json", nil},
		{"empty file", ``, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, tc.content)
			s := open(t, dir, nil)
			var tools []string
			for _, g := range s.List() {
				tools = append(tools, g.ToolName)
			}
			if !slices.Equal(tools, tc.served) {
				t.Fatalf("served %v, want %v", tools, tc.served)
			}
			if got := readFile(t, dir); got != tc.content {
				t.Fatalf("file changed before any write: %q", got)
			}
			copies, _ := filepath.Glob(filepath.Join(dir, FileName+".damaged-*"))
			if tc.content == "" {
				if len(copies) != 0 {
					t.Fatalf("an empty file was copied aside: %v", copies)
				}
			} else {
				if len(copies) != 1 {
					t.Fatalf("copies of the damaged file: %v", copies)
				}
				if data, _ := os.ReadFile(copies[0]); string(data) != tc.content {
					t.Fatalf("copy holds %q", data)
				}
			}
			mustGrant(t, s, "web_fetch", nil, nil)
			re := open(t, dir, nil)
			tools = nil
			for _, g := range re.List() {
				tools = append(tools, g.ToolName)
			}
			want := append(slices.Clone(tc.served), "web_fetch")
			slices.Sort(want)
			slices.Sort(tools)
			if !slices.Equal(tools, want) {
				t.Fatalf("after write: %v, want %v", tools, want)
			}
			if again, _ := filepath.Glob(filepath.Join(dir, FileName+".damaged-*")); len(again) != len(copies) {
				t.Fatalf("copies after the write: %v", again)
			}
		})
	}
}

func TestUnreadableFileIsAnError(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, FileName), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{DataDir: dir}); err == nil {
		t.Fatal("Open must fail when the grant file cannot be read")
	}
}

func TestEntriesLackingFieldsAreDropped(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, `{"version":1,"grants":[
	  {"id":"ok1","toolName":"bash","targetKey":"*","description":"d","grantedAt":"2026-01-01T00:00:00.000Z"},
	  {"id":"noTool","targetKey":"*","description":"d","grantedAt":"2026-01-01T00:00:00.000Z"},
	  {"id":"numKey","toolName":"bash","targetKey":1,"description":"d","grantedAt":"2026-01-01T00:00:00.000Z"},
	  {"id":"noDesc","toolName":"bash","targetKey":"*","grantedAt":"2026-01-01T00:00:00.000Z"},
	  {"id":"noTime","toolName":"bash","targetKey":"*","description":"d"},
	  {"toolName":"bash","targetKey":"*","description":"d","grantedAt":"2026-01-01T00:00:00.000Z"},
	  "junk", null, 7,
	  {"id":"ok2","toolName":"write_file","targetKey":"a","sourceWorkspaceId":"ws","description":"d","grantedAt":"2026-01-02T00:00:00.000Z","expiresAt":null}
	]}`)
	s := open(t, dir, nil)
	var ids []string
	for _, g := range s.List() {
		ids = append(ids, g.ID)
	}
	if !slices.Equal(ids, []string{"ok2", "ok1"}) {
		t.Fatalf("kept %v, want [ok2 ok1]", ids)
	}
	if g, ok := s.Has("write_file", map[string]any{"path": "a"}, "ws"); !ok || *g.SourceWorkspaceID != "ws" {
		t.Fatalf("scoped entry from file: %+v %v", g, ok)
	}
}

func TestGrantReplacesEqual(t *testing.T) {
	implementations(t, testGrantReplacesEqual)
}

func testGrantReplacesEqual(t *testing.T, st storage) {
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := st.open(t, clk.Now)
	first := mustGrant(t, s, "write_file", map[string]any{"path": "a"}, ptr("ws1"))
	clk.Add(time.Minute)
	second := mustGrant(t, s, "write_file", map[string]any{"file_path": " a "}, ptr("ws1")) // same key
	mustGrant(t, s, "write_file", map[string]any{"path": "a"}, ptr("ws2"))                  // other scope
	mustGrant(t, s, "write_file", map[string]any{"path": "a"}, nil)                         // global is another scope
	mustGrant(t, s, "edit_file", map[string]any{"path": "a"}, ptr("ws1"))                   // other tool
	mustGrant(t, s, "write_file", map[string]any{"path": "b"}, ptr("ws1"))                  // other key

	list := st.open(t, clk.Now).List()
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

func TestHasMatching(t *testing.T) {
	implementations(t, testHasMatching)
}

func testHasMatching(t *testing.T, st storage) {
	s := st.open(t, nil)
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

func TestRevokeAndClearPersist(t *testing.T) {
	implementations(t, testRevokeAndClearPersist)
}

func testRevokeAndClearPersist(t *testing.T, st storage) {
	s := st.open(t, nil)
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
	re := st.open(t, nil)
	if got := re.List(); len(got) != 1 || got[0].ID != b.ID {
		t.Fatalf("after revoke and reopen: %+v", got)
	}
	if _, ok := re.Has("write_file", map[string]any{"path": "a"}, "default"); ok {
		t.Fatal("revoked grant still matches after reopen")
	}

	if err := s.Clear(); err != nil {
		t.Fatal(err)
	}
	if got := st.open(t, nil).List(); len(got) != 0 {
		t.Fatalf("after clear and reopen: %+v", got)
	}
}

func TestConcurrentGrantsLoseNothing(t *testing.T) {
	implementations(t, testConcurrentGrantsLoseNothing)
}

func testConcurrentGrantsLoseNothing(t *testing.T, st storage) {
	s := st.open(t, nil)
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
	got := st.open(t, nil).List()
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

func TestListNewestFirst(t *testing.T) {
	implementations(t, testListNewestFirst)
}

func testListNewestFirst(t *testing.T, st storage) {
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := st.open(t, clk.Now)
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

func TestExpiredGrantsArePruned(t *testing.T) {
	implementations(t, testExpiredGrantsArePruned)
}

func testExpiredGrantsArePruned(t *testing.T, st storage) {
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := st.open(t, clk.Now)
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
	if _, ok := st.open(t, clk.Now).Has("git_commit", nil, "default"); ok {
		t.Fatal("expired grant matched after reopen")
	}
	// The next write removes it from the file.
	mustGrant(t, s, "git_pr", nil, nil)
	if strings.Contains(st.stored(t), "git_commit") {
		t.Fatal("expired grant still in the file after a write")
	}
}

func TestWriteFailureIsReturnedAndNothingChanges(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	s := open(t, dir, nil) // directory does not exist yet: created on write
	kept := mustGrant(t, s, "write_file", map[string]any{"path": "a"}, nil)
	before := readFile(t, dir)

	// Make the data directory unusable in a way that also stops root: a
	// regular file where the directory was.
	moved := filepath.Join(root, "moved")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a dir"), 0o644); err != nil {
		t.Fatal(err)
	}

	if _, err := s.Grant("write_file", map[string]any{"path": "b"}, nil); err == nil {
		t.Fatal("Grant succeeded although the file could not be written")
	} else if errors.Is(err, ErrNotDurable) {
		t.Fatalf("failure before the rename reported as ErrNotDurable: %v", err)
	}
	if _, ok := s.Has("write_file", map[string]any{"path": "b"}, "default"); ok {
		t.Fatal("a grant that was not written is in effect")
	}
	if ok, err := s.Revoke(kept.ID); ok || err == nil {
		t.Fatalf("Revoke with unwritable file = %v, %v", ok, err)
	}
	if err := s.Clear(); err == nil {
		t.Fatal("Clear with unwritable file succeeded")
	}
	if _, ok := s.Has("write_file", map[string]any{"path": "a"}, "default"); !ok {
		t.Fatal("failed Revoke/Clear removed the grant anyway")
	}

	// Once the directory is back, writing works and the old file was intact.
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(moved, dir); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, dir); got != before {
		t.Fatal("file changed by failed writes")
	}
	mustGrant(t, s, "write_file", map[string]any{"path": "c"}, nil)
	if got := len(open(t, dir, nil).List()); got != 2 {
		t.Fatalf("%d grants after recovery, want 2", got)
	}
}

func TestReloadPicksUpOtherWriter(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir, nil)
	b := open(t, dir, nil)
	g := mustGrant(t, a, "git_merge", nil, ptr("ws"))
	if _, ok := b.Has("git_merge", nil, "ws"); ok {
		t.Fatal("b saw a's grant before reloading")
	}
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
	if err := os.Remove(a.Path()); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(); err != nil || len(b.List()) != 0 {
		t.Fatalf("Reload of a deleted file: %v, %v", err, b.List())
	}
}

func TestReturnedGrantsAreCopies(t *testing.T) {
	implementations(t, testReturnedGrantsAreCopies)
}

func testReturnedGrantsAreCopies(t *testing.T, st storage) {
	s := st.open(t, nil)
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
