package tools

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitRepo makes env.FilesDir a git repository with one committed file,
// using the test's own git (with an identity of its own).
func gitRepo(t *testing.T) Env {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not installed (.ci/run installs it)")
	}
	env := newEnv(t)
	writeTree(t, env.FilesDir, map[string]string{"README.md": "hello\n"})
	gitT(t, env.FilesDir, "init", "--quiet", "--initial-branch=main")
	gitT(t, env.FilesDir, "add", "README.md")
	gitT(t, env.FilesDir, "commit", "--quiet", "-m", "first")
	return env
}

// gitT runs git in dir as the test (not the tool) and returns its output.
func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Tester", "-c", "user.email=t@example.com"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func TestGitStatusDiffCommitLog(t *testing.T) {
	env := gitRepo(t)
	writeTree(t, env.FilesDir, map[string]string{"README.md": "hello\nworld\n", "notes.txt": "new\n"})

	st := mustCall(t, env, "git_status", map[string]any{})
	for _, want := range []string{"## main", " M README.md", "?? notes.txt"} {
		if !strings.Contains(st, want) {
			t.Errorf("git_status lacks %q:\n%s", want, st)
		}
	}
	diff := mustCall(t, env, "git_diff", map[string]any{"file": "README.md"})
	if !strings.Contains(diff, "+world") {
		t.Errorf("git_diff lacks the added line:\n%s", diff)
	}
	if got := mustCall(t, env, "git_diff", map[string]any{"staged": true}); got != "(no changes)" {
		t.Errorf("staged diff before staging = %q", got)
	}
	out := mustCall(t, env, "git_commit", map[string]any{"message": "--amend add notes", "files": []string{"notes.txt"}})
	if !strings.Contains(out, "--amend add notes") {
		t.Errorf("git_commit output: %s", out)
	}
	log := mustCall(t, env, "git_log", map[string]any{"count": 5})
	lines := strings.Split(log, "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "Waggle: --amend add notes") || !strings.Contains(lines[1], "Tester: first") {
		t.Errorf("git_log = %q: want the new commit by Waggle above the first", log)
	}
	// Only notes.txt was staged: README.md is still modified.
	if st := mustCall(t, env, "git_status", nil); !strings.Contains(st, " M README.md") || strings.Contains(st, "notes.txt") {
		t.Errorf("status after committing notes.txt:\n%s", st)
	}
}

func TestGitBranch(t *testing.T) {
	env := gitRepo(t)
	mustCall(t, env, "git_branch", map[string]any{"action": "create", "name": "feature/x"})
	mustCall(t, env, "git_branch", map[string]any{"action": "switch", "name": "feature/x"})
	list := mustCall(t, env, "git_branch", map[string]any{"action": "list"})
	if !strings.Contains(list, "* feature/x") || !strings.Contains(list, "  main") {
		t.Errorf("branch list:\n%s", list)
	}
	for _, bad := range []map[string]any{
		{"action": "create", "name": "--force"},
		{"action": "create", "name": "x", "from": "-D"},
		{"action": "create", "name": "a..b"},
		{"action": "switch", "name": "HEAD:README.md"},
		{"action": "list", "name": "x"},
		{"action": "rename", "name": "x"},
	} {
		if out, err := call(t, env, "git_branch", bad); err == nil {
			t.Errorf("git_branch %v ran: %s", bad, out)
		}
	}
}

// TestGitRefusesOptionsAndEscapes: a hostile model's arguments never
// become git options and never name a path outside the workspace.
func TestGitRefusesOptionsAndEscapes(t *testing.T) {
	env := gitRepo(t)
	for _, c := range []struct {
		tool string
		in   map[string]any
	}{
		{"git_diff", map[string]any{"file": "--output=/tmp/pwned"}},
		{"git_diff", map[string]any{"file": "../../etc/passwd"}},
		{"git_commit", map[string]any{"message": "m", "files": []string{"--chmod=+x"}}},
		{"git_commit", map[string]any{"message": "m", "files": []string{".git/config"}}},
		{"git_commit", map[string]any{"message": " "}},
	} {
		if out, err := call(t, env, c.tool, c.in); err == nil {
			t.Errorf("%s %v ran: %s", c.tool, c.in, out)
		}
	}
}

// TestGitNeverLeavesTheWorkspace: a workspace that is not itself a
// repository is not looked up in its parents, and a .git file pointing to
// another repository is refused.
func TestGitNeverLeavesTheWorkspace(t *testing.T) {
	outer := gitRepo(t)
	inner := Env{FilesDir: filepath.Join(outer.FilesDir, "sub"), Workspace: "ws2"}
	writeTree(t, inner.FilesDir, map[string]string{"a.txt": "a\n"})
	if out, err := call(t, inner, "git_status", nil); err == nil || !strings.Contains(err.Error(), "not a git repository") {
		t.Errorf("git_status in a plain subdirectory of a repository = %q, %v", out, err)
	}
	if err := os.WriteFile(filepath.Join(inner.FilesDir, ".git"), []byte("gitdir: "+filepath.Join(outer.FilesDir, ".git")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := call(t, inner, "git_log", nil); err == nil {
		t.Errorf("git_log followed a .git file: %s", out)
	}
	// A runner started with GIT_DIR set (by a user's shell) does not hand
	// it to the tool's git.
	t.Setenv("GIT_DIR", filepath.Join(outer.FilesDir, ".git"))
	t.Setenv("GIT_WORK_TREE", outer.FilesDir)
	if out, err := call(t, inner, "git_status", nil); err == nil {
		t.Errorf("git_status used the runner's GIT_DIR: %s", out)
	}
}

// TestGitRunsNoRepositoryPrograms: hooks, a hooks path and a file-system
// monitor named by the repository's config do not run; a config with a
// filter driver is refused before git runs.
func TestGitRunsNoRepositoryPrograms(t *testing.T) {
	env := gitRepo(t)
	marker := filepath.Join(t.TempDir(), "ran")
	script := "#!/bin/sh\necho ran >> " + marker + "\n"
	hooks := filepath.Join(env.FilesDir, ".git", "hooks")
	for _, h := range []string{"pre-commit", "commit-msg", "post-commit"} {
		if err := os.WriteFile(filepath.Join(hooks, h), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	prog := filepath.Join(t.TempDir(), "prog.sh")
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	gitT(t, env.FilesDir, "config", "core.fsmonitor", prog)
	gitT(t, env.FilesDir, "config", "core.pager", prog)
	writeTree(t, env.FilesDir, map[string]string{"b.txt": "b\n"})
	mustCall(t, env, "git_status", nil)
	mustCall(t, env, "git_commit", map[string]any{"message": "add b"})
	mustCall(t, env, "git_log", nil)
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("a repository program ran: %s", readFile(t, marker))
	}

	gitT(t, env.FilesDir, "config", "filter.evil.clean", prog)
	if out, err := call(t, env, "git_status", nil); err == nil || !strings.Contains(err.Error(), "filter.evil.clean") {
		t.Errorf("git_status with a filter driver = %q, %v", out, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("the filter ran: %s", readFile(t, marker))
	}
}

func TestGitOutputIsLimited(t *testing.T) {
	env := gitRepo(t)
	writeTree(t, env.FilesDir, map[string]string{"README.md": strings.Repeat("a long line of text\n", 20000)})
	diff := mustCall(t, env, "git_diff", nil)
	if len(diff) > gitOutputLimit+200 || !strings.Contains(diff, "[output truncated") {
		t.Errorf("diff of %d bytes, want at most about %d with a truncation note", len(diff), gitOutputLimit)
	}
}

// TestGitSandboxed: on a team server (BashSandbox set) git runs under
// bubblewrap and still reads and commits in the workspace; a commit
// there cannot touch another workspace of the data dir.
func TestGitSandboxed(t *testing.T) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("bwrap is not installed: .ci/run installs bubblewrap")
		}
		t.Skip("bwrap not installed (apt-get install bubblewrap)")
	}
	data := t.TempDir()
	env := Env{FilesDir: filepath.Join(data, "workspaces", "a", "files"), Workspace: "a"}
	other := filepath.Join(data, "workspaces", "b", "files")
	writeTree(t, env.FilesDir, map[string]string{"README.md": "hello\n"})
	writeTree(t, other, map[string]string{"secret.txt": "other team\n"})
	gitT(t, env.FilesDir, "init", "--quiet", "--initial-branch=main")
	cfg := Config{BashSandbox: bwrap, SandboxHide: []string{data}}
	if _, err := callWith(t, cfg, env, "git_commit", map[string]any{"message": "first"}); err != nil {
		t.Fatalf("sandboxed git_commit: %v", err)
	}
	st, err := callWith(t, cfg, env, "git_log", nil)
	if err != nil || !strings.Contains(st, "Waggle: first") {
		t.Fatalf("sandboxed git_log = %q, %v", st, err)
	}
	// The files directory must be a repository of its own: pointing
	// the workspace at the other one's path through a symlink is refused.
	if err := os.Symlink(other, filepath.Join(data, "link")); err != nil {
		t.Fatal(err)
	}
	if out, err := callWith(t, cfg, Env{FilesDir: filepath.Join(data, "link")}, "git_status", nil); err == nil {
		t.Errorf("git_status through a symlinked workspace: %q", out)
	}
}
