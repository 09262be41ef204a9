package private

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	info, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode().Perm()
}

// An old data dir (0755, files 0644, an executable 0755, a directory
// 0555) loses group and other access; the owner keeps what it had, and a
// symlink's target outside is left alone.
func TestTightenTakesAwayGroupAndOtherAccess(t *testing.T) {
	root := filepath.Join(t.TempDir(), "data")
	outside := filepath.Join(t.TempDir(), "outside")
	for _, d := range []string{root, filepath.Join(root, "ws"), filepath.Join(root, "ro")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]fs.FileMode{"config.json": 0o644, "ws/s.jsonl": 0o666, "ws/tool": 0o755, "ok": 0o600}
	for name, m := range files {
		if err := os.WriteFile(filepath.Join(root, name), nil, m); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(root, name), m); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(outside, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "ro"), 0o555); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(outside, 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := Tighten(root)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]fs.FileMode{"": 0o700, "ws": 0o700, "ro": 0o700, "config.json": 0o600, "ws/s.jsonl": 0o600, "ws/tool": 0o700, "ok": 0o600}
	for name, m := range want {
		if got := mode(t, filepath.Join(root, name)); got != m {
			t.Errorf("%s: %v, want %v", name, got, m)
		}
	}
	if n != 6 {
		t.Errorf("changed %d entries, want 6", n)
	}
	if got := mode(t, outside); got != 0o644 {
		t.Errorf("the symlink's target outside the data dir became %v", got)
	}
}

func TestMkdirAllMakesAnExistingDirPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	if err := MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, dir); got != DirMode {
		t.Errorf("new dir %v", got)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, dir); got != DirMode {
		t.Errorf("existing dir %v", got)
	}
}
