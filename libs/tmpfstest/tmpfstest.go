// Package tmpfstest mounts small tmpfs file systems for tests that need a
// disk that really fills up (ENOSPC from the kernel, not a fake).
package tmpfstest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Mount mounts a tmpfs of size (e.g. "4m") on a fresh directory and
// unmounts it when the test ends. Where mounting is impossible (not root,
// not Linux, no mount(8)) the test is skipped with a loud reason, except
// under CI=true, where it fails: CI runs as root and must run these.
func Mount(tb testing.TB, size string) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("SKIPPED: cannot mount a %s tmpfs for a disk-full test (needs root on Linux): %v: %s", size, err, out)
		if os.Getenv("CI") == "true" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	tb.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			tb.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// Fill writes zeros to a file in dir until the file system is full and
// returns the file's path (remove it to free the space).
func Fill(tb testing.TB, dir string) string {
	tb.Helper()
	path := filepath.Join(dir, "fill")
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 16<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	// Bytes a partial write left are on the file system too; nothing else
	// to do: the next writer finds it full.
	return path
}
