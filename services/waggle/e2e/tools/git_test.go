package tools

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/waggle-os/core/services/waggle/waggletest"
)

// gitWorkspace makes workspace ws's files directory of p a git repository
// with one commit (made by the test's own git) and returns the directory.
func gitWorkspace(t *testing.T, p *waggletest.Proc, ws string) string {
	t.Helper()
	dir := filepath.Join(p.DataDir, "workspaces", ws, "files")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "plan.md"), "# Plan\n\n- ship it\n")
	testGit(t, dir, "init", "--quiet", "--initial-branch=main")
	testGit(t, dir, "add", "plan.md")
	testGit(t, dir, "commit", "--quiet", "-m", "the plan")
	return dir
}

// testGit runs git in dir as the test, with an identity of its own.
func testGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Tess", "-c", "user.email=tess@example.com"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestGitStatusDiffCommit: in a workspace that is a git repository the
// model reads the status and the diff without an approval (each shown as
// its step), and its commit waits for the user's approval, then lands in
// the repository with the model's message.
func TestGitStatusDiffCommit(t *testing.T) {
	llm := callerModel(t)
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL()))
	dir := gitWorkspace(t, p, "repo")
	writeFile(t, filepath.Join(dir, "plan.md"), "# Plan\n\n- ship it\n- celebrate\n")

	evs := runChat(t, p, "repo", "git_status", map[string]any{})
	if s := waggletest.Steps(evs); !slices.Contains(s, "Checking git status...") {
		t.Errorf("steps %q lack the git_status step", s)
	}
	for _, name := range []string{"git_status", "git_diff", "git_log", "git_commit", "git_branch"} {
		if !slices.Contains(offeredTools(llm), name) {
			t.Errorf("%s not offered to the model", name)
		}
	}
	// No config.json here: no search provider, so no web_search.
	if slices.Contains(offeredTools(llm), "web_search") {
		t.Error("web_search offered without a configured provider")
	}
	runChat(t, p, "repo", "git_diff", map[string]any{"file": "plan.md"})
	res := toolResults(llm)
	if len(res) != 2 || !strings.Contains(res[0], "## main") || !strings.Contains(res[0], " M plan.md") {
		t.Fatalf("git_status result: %q", res)
	}
	if !strings.Contains(res[1], "+- celebrate") {
		t.Fatalf("git_diff result lacks the added line: %q", res[1])
	}

	st := waggletest.NewStream(p.Do(t, "POST", "/api/chat", callChat("repo", "git_commit", map[string]any{"message": "Add the celebration"})))
	defer st.Close()
	before := testGit(t, dir, "rev-parse", "HEAD")
	a, _ := approveNextChecked(t, p, st, dir, before)
	if !strings.Contains(string(a.Input), "Add the celebration") {
		t.Errorf("approval shows %s, want the commit message", a.Input)
	}
	log := testGit(t, dir, "log", "--format=%an|%s")
	if !strings.HasPrefix(log, "Waggle|Add the celebration\nTess|the plan") {
		t.Errorf("repository log after the approved commit:\n%s", log)
	}
	if out := testGit(t, dir, "status", "--porcelain"); strings.TrimSpace(out) != "" {
		t.Errorf("work tree not clean after the commit:\n%s", out)
	}
}

// approveNextChecked is approveNext that first checks nothing was
// committed while the approval was pending.
func approveNextChecked(t *testing.T, p *waggletest.Proc, st *waggletest.Stream, dir, head string) (approval, []waggletest.Event) {
	t.Helper()
	evs := st.Until(t, "approval_required", "done", "error")
	if evs[len(evs)-1].Name != "approval_required" {
		t.Fatalf("git_commit ran without asking: steps %q", waggletest.Steps(evs))
	}
	if now := testGit(t, dir, "rev-parse", "HEAD"); now != head {
		t.Fatalf("a commit was made before the approval")
	}
	var a approval
	evs[len(evs)-1].Decode(t, &a)
	if a.ToolName != "git_commit" {
		t.Fatalf("approval asked for %s", a.ToolName)
	}
	resp := p.Do(t, "POST", "/api/approval/"+a.RequestID, map[string]any{"approved": true})
	resp.Body.Close()
	rest := st.All(t)
	if end := rest[len(rest)-1]; end.Name != "done" {
		t.Fatalf("turn ended with %s", end.Name)
	}
	return a, append(evs, rest...)
}

// TestGitHostileArguments: a model that slips an option into a branch
// name or a path, or names a repository outside the workspace through a
// .git file, gets an error result and nothing changes.
func TestGitHostileArguments(t *testing.T) {
	llm := callerModel(t)
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL()))
	dir := gitWorkspace(t, p, "repo")
	branches := testGit(t, dir, "branch", "--list")

	runChat(t, p, "repo", "git_branch", map[string]any{"action": "create", "name": "--help"})
	runChat(t, p, "repo", "git_diff", map[string]any{"file": "--output=../../pwned"})
	res := toolResults(llm)
	if len(res) != 2 || !strings.Contains(res[0], "must not start with '-'") || !strings.Contains(res[1], "must not start with '-'") {
		t.Fatalf("results of the hostile calls: %q", res)
	}
	if now := testGit(t, dir, "branch", "--list"); now != branches {
		t.Errorf("branches changed: %q → %q", branches, now)
	}

	// Workspace "other" holds only a .git file pointing at repo's
	// repository: git tools refuse it rather than follow it.
	other := filepath.Join(p.DataDir, "workspaces", "other", "files")
	if err := os.MkdirAll(other, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(other, ".git"), "gitdir: "+filepath.Join(dir, ".git")+"\n")
	runChat(t, p, "other", "git_log", map[string]any{})
	res = toolResults(llm)
	if last := res[len(res)-1]; !strings.Contains(last, "not a git repository") || strings.Contains(last, "the plan") {
		t.Fatalf("git_log through a .git file: %q", last)
	}
}
