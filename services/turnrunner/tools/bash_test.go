//go:build unix

package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/waitfor"
)

func TestBashBasics(t *testing.T) {
	env := newEnv(t)
	if got := mustCall(t, env, "bash", map[string]any{"command": "pwd -P"}); strings.TrimSpace(got) != resolvedDir(t, env.FilesDir) {
		t.Errorf("cwd = %q, want FilesDir %q", got, env.FilesDir)
	}
	if got := mustCall(t, env, "bash", map[string]any{"command": "echo out; echo err >&2"}); got != "out\nerr\n" {
		t.Errorf("combined output = %q", got)
	}
	if got := mustCall(t, env, "bash", map[string]any{"command": "true"}); got != "(no output)" {
		t.Errorf("silent command = %q", got)
	}
	got := mustCall(t, env, "bash", map[string]any{"command": "echo failing; exit 3"})
	if got != "failing\n[exit code 3]" {
		t.Errorf("non-zero exit = %q", got)
	}
	if got := mustCall(t, env, "bash", map[string]any{"command": "exit 1"}); got != "[exit code 1]" {
		t.Errorf("silent non-zero exit = %q", got)
	}
	// Files written by the shell are the ones the file tools see.
	mustCall(t, env, "bash", map[string]any{"command": "mkdir -p out && printf 'hi' > out/a.txt"})
	if got := mustCall(t, env, "read_file", map[string]any{"path": "out/a.txt"}); got != "hi" {
		t.Errorf("file written by bash = %q", got)
	}
	if _, err := call(t, env, "bash", map[string]any{"command": "  "}); err == nil {
		t.Error("empty command accepted")
	}
}

func TestBashHidesWaggleEnv(t *testing.T) {
	t.Setenv("WAGGLE_LLM_API_KEY", "sk-secret")
	t.Setenv("OTHER_VAR", "visible")
	got := mustCall(t, newEnv(t), "bash", map[string]any{"command": "echo \"[$WAGGLE_LLM_API_KEY][$OTHER_VAR]\""})
	if got != "[][visible]\n" {
		t.Errorf("env seen by command = %q", got)
	}
}

func TestBashOutputCap(t *testing.T) {
	env := newEnv(t)
	cfg := DefaultConfig()
	cfg.BashOutputLimit = 1000
	got, err := callWith(t, cfg, env, "bash", map[string]any{"command": "echo START; head -c 100000 /dev/zero | tr '\\0' x; echo; echo END"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "START\n") || !strings.HasSuffix(got, "END\n") {
		t.Errorf("capped output lost its start or end: %q…%q", got[:20], got[len(got)-20:])
	}
	if !strings.Contains(got, "[output truncated:") {
		t.Error("no truncation note")
	}
	if len(got) > 1000+100 {
		t.Errorf("capped output is %d bytes, limit 1000", len(got))
	}
}

func TestBashTimeoutKillsProcessGroup(t *testing.T) {
	env := newEnv(t)
	cfg := DefaultConfig()
	cfg.BashTimeout = 300 * time.Millisecond
	start := time.Now()
	// The background sleep is a second process in the group; it must die too.
	_, err := callWith(t, cfg, env, "bash", map[string]any{"command": "sleep 60 & echo $! > child.pid; echo started; wait"})
	if err == nil || !strings.Contains(err.Error(), "timed out") || !strings.Contains(err.Error(), "started") {
		t.Fatalf("err = %v, want timeout with partial output", err)
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("timeout took %v", elapsed)
	}
	assertDead(t, readPID(t, filepath.Join(env.FilesDir, "child.pid")))

	// The model may ask for a longer timeout than the default.
	if got, err := callWith(t, cfg, env, "bash", map[string]any{"command": "sleep 0.5; echo ok", "timeout": 5}); err != nil || got != "ok\n" {
		t.Errorf("timeout override: (%q, %v)", got, err)
	}
}

func TestBashBackgroundChildDoesNotOutliveCommand(t *testing.T) {
	env := newEnv(t)
	start := time.Now()
	got := mustCall(t, env, "bash", map[string]any{"command": "sleep 60 & echo $! > child.pid; echo done"})
	if got != "done\n" {
		t.Errorf("output = %q", got)
	}
	if elapsed := time.Since(start); elapsed > pipeDrainGrace {
		t.Errorf("call waited %v for a background child holding the pipe", elapsed)
	}
	assertDead(t, readPID(t, filepath.Join(env.FilesDir, "child.pid")))
}

func TestBashContextCancel(t *testing.T) {
	env := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := callCtx(t, ctx, DefaultConfig(), env, "bash", map[string]any{"command": "sleep 60 & echo $! > child.pid; wait"})
		done <- result{out, err}
	}()
	pidFile := filepath.Join(env.FilesDir, "child.pid")
	waitfor.True(t, "child.pid written", func() bool { b, err := os.ReadFile(pidFile); return err == nil && strings.HasSuffix(string(b), "\n") })
	cancel()
	select {
	case r := <-done:
		if !errors.Is(r.err, context.Canceled) {
			t.Errorf("cancelled call = (%q, %v), want context.Canceled", r.out, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("bash did not return after ctx cancel")
	}
	assertDead(t, readPID(t, pidFile))
}

func TestCappedBuffer(t *testing.T) {
	b := newCappedBuffer(8)
	_, _ = b.Write([]byte("abc"))
	_, _ = b.Write([]byte("def"))
	if got := b.String(); got != "abcdef" {
		t.Errorf("under the cap = %q", got)
	}
	_, _ = b.Write([]byte("ghijklmnop"))
	got := b.String()
	if !strings.HasPrefix(got, "abcdef") || !strings.HasSuffix(got, "op") || !strings.Contains(got, "8 of 16 bytes omitted") {
		t.Errorf("over the cap = %q", got)
	}
}

func resolvedDir(t *testing.T, dir string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func readPID(t *testing.T, p string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, p)))
	if err != nil {
		t.Fatalf("pid file: %v", err)
	}
	return pid
}

// assertDead waits briefly for pid to be gone (or a zombie awaiting its
// reaper, which is dead for every purpose here).
func assertDead(t *testing.T, pid int) {
	t.Helper()
	gone := func() bool {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return errors.Is(err, os.ErrNotExist)
		}
		_, rest, _ := strings.Cut(string(stat), ") ")
		return strings.HasPrefix(rest, "Z")
	}
	// A survivor is not left running after the failure.
	t.Cleanup(func() {
		if t.Failed() && !gone() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	waitfor.Within(5*time.Second).True(t, fmt.Sprintf("child process %d gone", pid), gone)
}
