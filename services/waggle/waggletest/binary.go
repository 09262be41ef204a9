package waggletest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RunWithBinary is the TestMain of tests that run waggle as OS processes:
// it builds the waggle command into a temporary directory, sets *bin to its
// path, runs the tests and removes the directory. It returns the code for
// os.Exit: m.Run's, or 1 when the build fails.
func RunWithBinary(m *testing.M, bin *string) int {
	dir, err := os.MkdirTemp("", "waggle-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	*bin = filepath.Join(dir, "waggle")
	build := exec.Command("go", "build", "-o", *bin, "github.com/waggle-os/core/services/waggle/cmd/waggle")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build waggle:", err)
		return 1
	}
	return m.Run()
}
