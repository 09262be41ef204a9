package grants

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func ptr(s string) *string { return &s }

func open(t *testing.T, dir string, now func() time.Time) *Store {
	t.Helper()
	s, err := Open(Config{DataDir: dir, Now: now})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
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

func TestFileFormat(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) })
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

// A file store serves what it last loaded: another writer's grant shows
// only after Reload, and Reload of a deleted file empties it. (That Reload
// picks up grants and revocations is grantstest's, on both backends.)
func TestReloadPicksUpOtherWriter(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir, nil)
	b := open(t, dir, nil)
	mustGrant(t, a, "git_merge", nil, ptr("ws"))
	if _, ok := b.Has("git_merge", nil, "ws"); ok {
		t.Fatal("b saw a's grant before reloading")
	}
	if err := b.Reload(); err != nil || len(b.List()) != 1 {
		t.Fatalf("Reload after a's grant: %v, %v", err, b.List())
	}
	if err := os.Remove(a.Path()); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(); err != nil || len(b.List()) != 0 {
		t.Fatalf("Reload of a deleted file: %v, %v", err, b.List())
	}
}
