package firsthour

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/services/waggle/waggletest"
)

// serveFails runs `waggle serve args...`, which must refuse to start:
// it returns the process's output once it exited non-zero.
func serveFails(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, waggleBin, append([]string{"serve"}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir(), "WAGGLE_LLM_URL=http://" + waggletest.FreeAddr(t) + "/v1"}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || ctx.Err() != nil {
		t.Fatalf("waggle serve %v did not refuse to start (err %v):\n%s", args, err, out)
	}
	return string(out)
}

// TestSecondServeOnTheSameDataDir: a second `waggle serve` on a data dir
// another live one holds refuses to start with one line naming the
// holder's pid, instead of sharing its NATS store and waiting forever.
func TestSecondServeOnTheSameDataDir(t *testing.T) {
	first := waggletest.StartProc(t, waggleBin)
	out := serveFails(t, "--addr", waggletest.FreeAddr(t), "--data-dir", first.DataDir)
	want := "is in use by another waggle serve (pid " + strconv.Itoa(first.Pid()) + ")"
	if !strings.Contains(out, want) {
		t.Fatalf("second serve said:\n%s\nwant a line containing %q", out, want)
	}
	// The first one is unharmed.
	if resp := first.Do(t, "GET", "/health", nil); resp.StatusCode != 200 {
		t.Fatalf("first server's health after the refused second: %d", resp.StatusCode)
	}
	// Once the first stops, the data dir is free again.
	first.Stop(t)
	waggletest.StartProc(t, waggleBin, waggletest.ProcDataDir(first.DataDir))
}

// TestTeamServerWithoutPostgres: --auth=required keeps users and tokens
// in PostgreSQL; without --postgres-url the server refuses to start
// instead of answering every authenticated request 503.
func TestTeamServerWithoutPostgres(t *testing.T) {
	out := serveFails(t, "--addr", waggletest.FreeAddr(t), "--data-dir", t.TempDir(), "--auth", "required")
	if !strings.Contains(out, "--auth=required needs --postgres-url") {
		t.Fatalf("serve said:\n%s", out)
	}
}

// TestInvalidConfigJSON: a config.json with a missing comma stops the
// start with the file, line and column, instead of being reported as a
// warning at the first turn.
func TestInvalidConfigJSON(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte("{\n  \"defaultModel\": \"llama3.2\"\n  \"fallbackModel\": \"qwen2.5\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := serveFails(t, "--addr", waggletest.FreeAddr(t), "--data-dir", dir)
	want := filepath.Join(dir, "config.json") + " is invalid: line 3, column 3: invalid character"
	if !strings.Contains(out, want) {
		t.Fatalf("serve said:\n%s\nwant %q", out, want)
	}
}
