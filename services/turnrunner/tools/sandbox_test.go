package tools

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBashSandbox: under bubblewrap a command writes only in its workspace,
// cannot read the data dir's other workspaces, and has no network.
func TestBashSandbox(t *testing.T) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("bwrap is not installed: .ci/run installs bubblewrap")
		}
		t.Skip("bwrap not installed (apt-get install bubblewrap)")
	}
	data := t.TempDir()
	ws := filepath.Join(data, "workspaces", "a", "files")
	other := filepath.Join(data, "workspaces", "b", "files")
	for _, d := range []string{ws, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(other, "secret.txt"), []byte("other team"), 0o644)
	outside := filepath.Join(t.TempDir(), "outside.txt")

	cfg := DefaultConfig()
	cfg.BashSandbox, cfg.SandboxHide = bwrap, []string{data}
	tool := bashTool{cfg: cfg.withDefaults()}
	run := func(cmd string) string {
		in, _ := json.Marshal(map[string]any{"command": cmd})
		out, err := runTool(context.Background(), tool, Env{FilesDir: ws}, in)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return out
	}
	if out := run("echo inside > in.txt && cat in.txt"); !strings.Contains(out, "inside") {
		t.Fatalf("write in the workspace: %q", out)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "in.txt")); err != nil || string(b) != "inside\n" {
		t.Fatalf("file in workspace: %q %v", b, err)
	}
	run("echo x > " + outside)
	if _, err := os.Stat(outside); err == nil {
		t.Fatal("a sandboxed command wrote outside its workspace")
	}
	if out := run("cat " + filepath.Join(other, "secret.txt")); strings.Contains(out, "other team") {
		t.Fatalf("a sandboxed command read another workspace: %q", out)
	}
	// /proc is the sandbox's own: its network namespace has only loopback.
	if out := run("cat /proc/net/dev"); strings.Contains(out, "eth") || !strings.Contains(out, "lo:") {
		t.Fatalf("network visible in the sandbox: %q", out)
	}
}
