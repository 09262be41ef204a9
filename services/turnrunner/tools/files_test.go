package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteReadEdit(t *testing.T) {
	env := newEnv(t)
	out := mustCall(t, env, "write_file", map[string]any{"path": "notes/day1/todo.md", "content": "alpha\nbeta\n"})
	if out != "Wrote 11 bytes to notes/day1/todo.md" {
		t.Errorf("write_file = %q", out)
	}
	if got := readFile(t, filepath.Join(env.FilesDir, "notes/day1/todo.md")); got != "alpha\nbeta\n" {
		t.Errorf("file content = %q", got)
	}
	if got := mustCall(t, env, "read_file", map[string]any{"path": "notes/day1/todo.md"}); got != "alpha\nbeta\n" {
		t.Errorf("read_file = %q", got)
	}
	// A leading slash is the workspace root, not the host root.
	if got := mustCall(t, env, "read_file", map[string]any{"path": "/notes/day1/todo.md"}); got != "alpha\nbeta\n" {
		t.Errorf("read_file with leading / = %q", got)
	}
	// So is an absolute path inside FilesDir.
	abs := filepath.Join(env.FilesDir, "notes/day1/todo.md")
	if got := mustCall(t, env, "read_file", map[string]any{"path": abs}); got != "alpha\nbeta\n" {
		t.Errorf("read_file with absolute in-workspace path = %q", got)
	}

	out = mustCall(t, env, "edit_file", map[string]any{"path": "notes/day1/todo.md", "old_string": "beta", "new_string": "gamma"})
	if out != "Edited notes/day1/todo.md: replaced 1 occurrence" {
		t.Errorf("edit_file = %q", out)
	}
	if got := readFile(t, abs); got != "alpha\ngamma\n" {
		t.Errorf("after edit = %q", got)
	}
}

func TestEditFileMatches(t *testing.T) {
	env := newEnv(t)
	writeTree(t, env.FilesDir, map[string]string{"a.txt": "x = 1\nx = 1\ny = 2\n"})

	_, err := call(t, env, "edit_file", map[string]any{"path": "a.txt", "old_string": "z = 3", "new_string": "z = 4"})
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("zero matches: err = %v, want not found", err)
	}
	_, err = call(t, env, "edit_file", map[string]any{"path": "a.txt", "old_string": "x = 1", "new_string": "x = 9"})
	if err == nil || !strings.Contains(err.Error(), "2 times") {
		t.Errorf("two matches: err = %v, want it to name the count", err)
	}
	if got := readFile(t, filepath.Join(env.FilesDir, "a.txt")); got != "x = 1\nx = 1\ny = 2\n" {
		t.Errorf("failed edit changed the file: %q", got)
	}
	out := mustCall(t, env, "edit_file", map[string]any{"path": "a.txt", "old_string": "x = 1", "new_string": "x = 9", "replace_all": true})
	if !strings.Contains(out, "replaced 2 occurrences") {
		t.Errorf("replace_all = %q", out)
	}
	if got := readFile(t, filepath.Join(env.FilesDir, "a.txt")); got != "x = 9\nx = 9\ny = 2\n" {
		t.Errorf("after replace_all = %q", got)
	}
	if _, err := call(t, env, "edit_file", map[string]any{"path": "missing.txt", "old_string": "a", "new_string": "b"}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("edit of missing file: err = %v", err)
	}
}

func TestReadFileWindowAndLimits(t *testing.T) {
	env := newEnv(t)
	var b strings.Builder
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&b, "line %03d\n", i) // 9 bytes per line
	}
	writeTree(t, env.FilesDir, map[string]string{"big.txt": b.String(), "empty.txt": "", "bin.dat": "ab\x00cd"})

	got := mustCall(t, env, "read_file", map[string]any{"path": "big.txt", "offset": 10, "limit": 3})
	if !strings.HasPrefix(got, "line 010\nline 011\nline 012\n") || !strings.Contains(got, "offset=13") {
		t.Errorf("offset/limit window = %q", got)
	}
	// Numbers given as strings are accepted.
	if got := mustCall(t, env, "read_file", map[string]any{"path": "big.txt", "offset": "99"}); got != "line 099\nline 100\n" {
		t.Errorf("tail read = %q", got)
	}
	if got := mustCall(t, env, "read_file", map[string]any{"path": "big.txt", "offset": 500}); !strings.Contains(got, "past the end") {
		t.Errorf("offset past end = %q", got)
	}

	cfg := DefaultConfig()
	cfg.ReadLimit = 50
	got, err := callWith(t, cfg, env, "read_file", map[string]any{"path": "big.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "line 001\n") || !strings.Contains(got, "[truncated") || !strings.Contains(got, "offset=6") {
		t.Errorf("capped read = %q", got)
	}
	if body, _, _ := strings.Cut(got, "\n\n["); len(body) > 50 {
		t.Errorf("capped read returned %d bytes of content, limit 50", len(body))
	}

	if got := mustCall(t, env, "read_file", map[string]any{"path": "empty.txt"}); got != "(empty file)" {
		t.Errorf("empty file = %q", got)
	}
	if _, err := call(t, env, "read_file", map[string]any{"path": "bin.dat"}); err == nil || !strings.Contains(err.Error(), "binary") {
		t.Errorf("binary file: err = %v", err)
	}
	if _, err := call(t, env, "read_file", map[string]any{"path": "nope.txt"}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: err = %v", err)
	}
	if _, err := call(t, env, "read_file", map[string]any{}); err == nil {
		t.Error("read_file without path succeeded")
	}
}

func TestFilesDirCreatedOnFirstUse(t *testing.T) {
	env := newEnv(t)
	if _, err := os.Stat(env.FilesDir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("precondition: FilesDir exists already")
	}
	if got := mustCall(t, env, "list_files", map[string]any{}); got != "(empty directory)" {
		t.Errorf("list_files on fresh workspace = %q", got)
	}
	if _, err := call(t, Env{FilesDir: "relative/dir"}, "list_files", map[string]any{}); err == nil {
		t.Error("relative FilesDir accepted")
	}
}

// TestConfinement checks every file tool refuses paths that leave FilesDir
// and leaves the outside untouched.
func TestConfinement(t *testing.T) {
	base := t.TempDir()
	env := Env{FilesDir: filepath.Join(base, "files"), Workspace: "w"}
	outside := filepath.Join(base, "outside")
	writeTree(t, outside, map[string]string{"secret.txt": "TOP SECRET\n"})
	writeTree(t, env.FilesDir, map[string]string{"ok.txt": "fine\n"})
	links := map[string]string{
		"rel-file": "../outside/secret.txt",
		"abs-file": filepath.Join(outside, "secret.txt"),
		"rel-dir":  "../outside",
		"abs-dir":  outside,
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(env.FilesDir, name)); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		tool  string
		input map[string]any
	}{
		{"read_file", map[string]any{"path": "../outside/secret.txt"}},
		{"read_file", map[string]any{"path": "sub/../../outside/secret.txt"}},
		{"read_file", map[string]any{"path": "rel-file"}},
		{"read_file", map[string]any{"path": "abs-file"}},
		{"read_file", map[string]any{"path": "rel-dir/secret.txt"}},
		{"read_file", map[string]any{"path": "abs-dir/secret.txt"}},
		{"write_file", map[string]any{"path": "../outside/new.txt", "content": "x"}},
		{"write_file", map[string]any{"path": "rel-dir/new.txt", "content": "x"}},
		{"write_file", map[string]any{"path": "abs-dir/sub/new.txt", "content": "x"}},
		{"write_file", map[string]any{"path": "rel-file", "content": "overwritten"}},
		{"edit_file", map[string]any{"path": "rel-file", "old_string": "TOP", "new_string": "NO"}},
		{"edit_file", map[string]any{"path": "rel-dir/secret.txt", "old_string": "TOP", "new_string": "NO"}},
		{"list_files", map[string]any{"path": ".."}},
		{"list_files", map[string]any{"path": "rel-dir"}},
		{"list_files", map[string]any{"path": "abs-dir", "recursive": true}},
		{"search_files", map[string]any{"pattern": "*", "path": "rel-dir"}},
		{"search_content", map[string]any{"pattern": "SECRET", "path": "rel-dir"}},
		{"search_content", map[string]any{"pattern": "SECRET", "path": "../outside"}},
		{"generate_docx", map[string]any{"path": "rel-dir/report", "content": "x"}},
		{"generate_docx", map[string]any{"path": "../report.docx", "content": "x"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %v", tt.tool, tt.input["path"]), func(t *testing.T) {
			out, err := call(t, env, tt.tool, tt.input)
			if !errors.Is(err, ErrEscape) {
				t.Fatalf("got (%q, %v), want ErrEscape", out, err)
			}
			if strings.Contains(err.Error(), base) {
				t.Errorf("error %q reveals a host path", err)
			}
		})
	}

	// Nothing outside changed, nothing new appeared next to files/.
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 || readFile(t, filepath.Join(outside, "secret.txt")) != "TOP SECRET\n" {
		t.Errorf("outside dir changed: %d entries", len(entries))
	}
	if top, _ := os.ReadDir(base); len(top) != 2 {
		t.Errorf("base dir has %d entries, want files and outside only", len(top))
	}

	// Searching the whole workspace does not follow links out of it.
	if out := mustCall(t, env, "search_content", map[string]any{"pattern": "SECRET"}); strings.Contains(out, "SECRET") {
		t.Errorf("search_content over the workspace leaked outside content: %q", out)
	}

	// An absolute host path names a file under FilesDir, never the host's.
	out, err := call(t, env, "read_file", map[string]any{"path": "/etc/passwd"})
	if err == nil || strings.Contains(out, "root:") || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read /etc/passwd = (%q, %v), want not-exist inside the workspace", out, err)
	}
	mustCall(t, env, "write_file", map[string]any{"path": "/etc/waggle-test.conf", "content": "x"})
	if _, err := os.Stat(filepath.Join(env.FilesDir, "etc", "waggle-test.conf")); err != nil {
		t.Errorf("write to /etc/... did not land inside the workspace: %v", err)
	}
	if _, err := os.Stat("/etc/waggle-test.conf"); err == nil {
		t.Error("write_file created a file in the host's /etc")
	}
}

func TestReadFileLongLineAndBadInput(t *testing.T) {
	env := newEnv(t)
	writeTree(t, env.FilesDir, map[string]string{"one.txt": strings.Repeat("é", 40) + "\nnext\n"})
	cfg := DefaultConfig()
	cfg.ReadLimit = 11 // cuts inside a two-byte rune
	got, err := callWith(t, cfg, env, "read_file", map[string]any{"path": "one.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "ééééé\n\n[truncated: line 1 is longer") {
		t.Errorf("long line = %q", got)
	}

	tool, _ := NewRegistry(Config{}).Get("write_file")
	if _, err := runTool(t.Context(), tool, env, []byte(`{"path": 5}`)); err == nil || !strings.Contains(err.Error(), "cannot unmarshal number") {
		t.Errorf("wrongly typed input: err = %v", err)
	}
	if _, err := call(t, env, "write_file", map[string]any{"path": "a.txt"}); err == nil {
		t.Error("write_file without content succeeded")
	}
	if _, err := call(t, env, "write_file", map[string]any{"path": "/", "content": "x"}); err == nil {
		t.Error("write_file to the workspace root succeeded")
	}
}
