package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// git tool limits.
const (
	// gitTimeout bounds one git command.
	gitTimeout = 60 * time.Second
	// gitOutputLimit caps what one git command returns to the model; the
	// start and the end are kept.
	gitOutputLimit = 64 << 10
	// defaultGitLogCount and maxGitLogCount bound git_log's count.
	defaultGitLogCount = 10
	maxGitLogCount     = 200
	// maxCommitMessage bounds a commit message, in bytes.
	maxCommitMessage = 16 << 10
)

// errNotRepo is a workspace without its own .git directory.
var errNotRepo = errors.New("the workspace is not a git repository (it has no .git directory of its own)")

// gitOverrides are -c settings given to every git command. Command-line
// settings win over the repository's own .git/config, so a repository
// whose config (written by a model, or cloned from a stranger) names a
// hook directory, a file-system monitor, a pager or an editor runs none of
// them; signing, credential helpers and transports are off too.
var gitOverrides = []string{
	"core.hooksPath=/dev/null",
	"core.fsmonitor=false",
	"core.pager=cat",
	"core.editor=true",
	"core.askPass=",
	"core.sshCommand=false",
	"credential.helper=",
	"commit.gpgSign=false",
	"tag.gpgSign=false",
	"gpg.program=false",
	"gpg.ssh.program=false",
	"gpg.x509.program=false",
	"log.showSignature=false",
	"gc.auto=0",
	"maintenance.auto=false",
	"submodule.recurse=false",
	"protocol.allow=never",
	"color.ui=false",
	"advice.detachedHead=false",
}

// gitRunsPrograms are keys of a repository's own config that make git run
// a program the -c overrides cannot switch off by one fixed name (the
// driver names are the repository's choice), or pull in other files.
// Such a repository is refused outright.
func gitRunsPrograms(key string) bool {
	key = strings.ToLower(key)
	section, rest, _ := strings.Cut(key, ".")
	last := key[strings.LastIndex(key, ".")+1:]
	switch section {
	case "filter", "include", "includeif":
		return true
	case "diff":
		return strings.Contains(rest, ".") && (last == "command" || last == "textconv")
	case "merge":
		return strings.Contains(rest, ".") && last == "driver"
	case "core":
		return last == "alternaterefscommand" || last == "worktree"
	case "uploadpack", "receive", "sequence":
		return true
	}
	return false
}

// repo is the workspace's git repository, checked for one call.
type repo struct {
	workTree string
	gitDir   string
	home     string   // an empty directory given to git as HOME
	extraEnv []string // the committer, when the repository names none
	// sandbox, when set, is the bubblewrap binary git runs under (team
	// servers: Config.BashSandbox), with hide hidden as for bash — a
	// second wall around whatever git might run that the overrides and
	// the config check did not foresee.
	sandbox string
	hide    []string
}

// openRepo checks that env.FilesDir is a real directory holding a real
// .git directory (not a .git file or symlink pointing elsewhere, not a
// linked worktree or a repository borrowing objects from another), that
// its config runs no programs, and prepares an empty HOME. The caller
// calls close.
func openRepo(env Env, cfg Config) (*repo, error) {
	if env.FilesDir == "" || !filepath.IsAbs(env.FilesDir) {
		return nil, errNoFilesDir
	}
	fi, err := os.Lstat(env.FilesDir)
	if err != nil || !fi.IsDir() {
		// A symlinked or missing workspace is not one git may run in: the
		// directory checked must be the directory git works in.
		return nil, errNotRepo
	}
	gitDir := filepath.Join(env.FilesDir, ".git")
	gi, err := os.Lstat(gitDir)
	if err != nil || !gi.IsDir() {
		return nil, errNotRepo
	}
	// Parts of a .git directory that would make git read another
	// repository's objects or refs.
	for _, p := range []string{"commondir", "gitdir", "objects/info/alternates"} {
		if _, err := os.Lstat(filepath.Join(gitDir, p)); err == nil {
			return nil, fmt.Errorf("the workspace's .git directory points to another repository (%s); git tools refuse it", p)
		}
	}
	for _, p := range []string{"objects", "refs", "config", "HEAD", "index"} {
		if li, err := os.Lstat(filepath.Join(gitDir, p)); err == nil && li.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("the workspace's .git/%s is a symbolic link; git tools refuse it", p)
		}
	}
	home, err := os.MkdirTemp("", "waggle-git-home-")
	if err != nil {
		return nil, errors.New("git cannot be run: no temporary directory")
	}
	r := &repo{workTree: env.FilesDir, gitDir: gitDir, home: home, sandbox: cfg.BashSandbox, hide: cfg.SandboxHide}
	if err := r.checkConfig(); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *repo) close() { _ = os.RemoveAll(r.home) }

// checkConfig refuses a repository whose own config would run programs.
// Reading a config file with --file never follows its includes and runs
// nothing.
func (r *repo) checkConfig() error {
	cfg := filepath.Join(r.gitDir, "config")
	if _, err := os.Lstat(cfg); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	out, code, err := r.exec(context.Background(), nil, "config", "--file", cfg, "--name-only", "--list")
	if err != nil {
		return err
	}
	if code != 0 {
		return errors.New("the workspace's .git/config cannot be read")
	}
	for _, key := range strings.Split(out, "\n") {
		if key = strings.TrimSpace(key); key != "" && gitRunsPrograms(key) {
			return fmt.Errorf("the workspace's .git/config sets %s, which makes git run programs or read other files; git tools refuse this repository", key)
		}
	}
	return nil
}

// env is git's whole environment: nothing of the runner's (no GIT_*
// variable, no user or system config), the repository and work tree
// fixed, discovery stopped at the workspace, pathspecs literal.
func (r *repo) env() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	return append([]string{
		"PATH=" + path,
		"HOME=" + r.home,
		"XDG_CONFIG_HOME=" + r.home,
		"LANG=C", "LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_DIR=" + r.gitDir,
		"GIT_WORK_TREE=" + r.workTree,
		"GIT_CEILING_DIRECTORIES=" + filepath.Dir(r.workTree),
		"GIT_LITERAL_PATHSPECS=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_PAGER=cat", "PAGER=cat",
		"GIT_EDITOR=true",
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_PROTOCOL_FROM_USER=0",
	}, r.extraEnv...)
}

// exec runs git with args (after the fixed global options) and returns its
// capped combined output and exit code; err is set only when git could not
// run or was stopped.
func (r *repo) exec(ctx context.Context, stdin io.Reader, args ...string) (out string, code int, err error) {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	full := []string{"--no-pager", "--no-replace-objects"}
	for _, o := range gitOverrides {
		full = append(full, "-c", o)
	}
	full = append(full, args...)
	cmd := exec.CommandContext(ctx, gitBinary(), full...)
	if r.sandbox != "" {
		// HOME lies in the host's /tmp, which the sandbox replaces with an
		// empty tmpfs: git finds no home config there either.
		cmd = exec.CommandContext(ctx, r.sandbox, append(append(sandboxPrefix(r.workTree, r.hide), gitBinary()), full...)...)
	}
	cmd.Dir = r.workTree
	cmd.Env = r.env()
	cmd.Stdin = stdin
	buf := newCappedBuffer(gitOutputLimit)
	cmd.Stdout, cmd.Stderr = buf, buf
	cmd.WaitDelay = pipeDrainGrace
	runErr := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return "", 0, fmt.Errorf("git %s: %w", args[0], ctx.Err())
	case runErr == nil:
		return buf.String(), 0, nil
	case errors.As(runErr, &exitErr):
		return buf.String(), exitErr.ExitCode(), nil
	default:
		return "", 0, errors.New("git is not installed on this server")
	}
}

// run is exec for a tool result: a non-zero exit is an error carrying git's
// message, an empty success reads as empty.
func (r *repo) run(ctx context.Context, stdin io.Reader, empty string, args ...string) (string, error) {
	out, code, err := r.exec(ctx, stdin, args...)
	if err != nil {
		return "", err
	}
	out = strings.TrimRight(out, "\n")
	if code != 0 {
		if out == "" {
			out = fmt.Sprintf("exit code %d", code)
		}
		return "", fmt.Errorf("git %s failed: %s", args[0], out)
	}
	if out == "" {
		return empty, nil
	}
	return out, nil
}

// gitBinary is the git on PATH (exec resolves the bare name).
func gitBinary() string { return "git" }

// withRepo opens the workspace's repository for one call.
func withRepo(ctx context.Context, env Env, cfg Config, f func(ctx context.Context, r *repo) (string, error)) (string, error) {
	r, err := openRepo(env, cfg)
	if err != nil {
		return "", err
	}
	defer r.close()
	return f(ctx, r)
}

// gitPath checks a model-supplied path for a git command: inside the
// workspace (as every file tool's path) and never read as an option.
func gitPath(filesDir, p string) (string, error) {
	if strings.HasPrefix(strings.TrimSpace(p), "-") {
		return "", fmt.Errorf("path %q must not start with '-'", truncateUTF8(p, maxKeyShown))
	}
	rel, err := resolve(filesDir, p)
	if err != nil {
		return "", err
	}
	if rel == ".git" || strings.HasPrefix(rel, ".git/") {
		return "", errors.New("paths inside .git are not for git tools")
	}
	return rel, nil
}

// gitRefName checks a branch or revision name the model supplied: not an
// option, no whitespace or control characters, no revision syntax that
// reads files (":path"), within git's ref-name rules.
func gitRefName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%s is required", what)
	case strings.HasPrefix(name, "-"):
		return fmt.Errorf("%s must not start with '-'", what)
	case len(name) > 200:
		return fmt.Errorf("%s is too long", what)
	}
	for _, c := range name {
		if c <= ' ' || c == 0x7f || strings.ContainsRune(`~^:?*[\`, c) {
			return fmt.Errorf("%s %q is not a valid branch name", what, truncateUTF8(name, maxKeyShown))
		}
	}
	if strings.Contains(name, "..") || strings.Contains(name, "@{") || strings.HasSuffix(name, ".lock") ||
		strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".") || strings.Contains(name, "//") {
		return fmt.Errorf("%s %q is not a valid branch name", what, truncateUTF8(name, maxKeyShown))
	}
	return nil
}

// noArgs is the input of a tool without arguments.
type noArgs struct{}

// --- git_status ---

type gitStatusTool struct{ cfg Config }

func (gitStatusTool) Name() string { return "git_status" }

func (gitStatusTool) Description() string {
	return "Show the git status of the workspace repository: the current branch and the modified, staged and untracked files."
}

func (gitStatusTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{},"required":[]}`)
}

func (t gitStatusTool) Decode(input json.RawMessage) (Call, error) {
	return decodeCall(input, func(ctx context.Context, env Env, _ *noArgs) (string, error) {
		return withRepo(ctx, env, t.cfg, func(ctx context.Context, r *repo) (string, error) {
			return r.run(ctx, nil, "(clean)", "status", "--short", "--branch", "--untracked-files=normal", "--ignore-submodules=all")
		})
	})
}

// --- git_diff ---

type gitDiffTool struct{ cfg Config }

func (gitDiffTool) Name() string { return "git_diff" }

func (gitDiffTool) Description() string {
	return "Show the git diff of the workspace repository: unstaged changes, or the staged ones with staged=true; " +
		"file limits it to one path (relative to the workspace root)."
}

func (gitDiffTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"staged":{"type":"boolean","description":"Show staged changes instead of unstaged ones (default false)"},` +
		`"file":{"type":"string","description":"Only this file or directory, relative to the workspace root"}` +
		`},"required":[]}`)
}

type gitDiffInput struct {
	Staged *boolArg `json:"staged,omitempty"`
	File   string   `json:"file,omitempty"`
}

func (t gitDiffTool) Decode(input json.RawMessage) (Call, error) {
	return decodeCall(input, func(ctx context.Context, env Env, in *gitDiffInput) (string, error) {
		args := []string{"diff", "--no-color", "--no-ext-diff", "--no-textconv", "--ignore-submodules=all"}
		if in.Staged != nil && bool(*in.Staged) {
			args = append(args, "--cached")
		}
		args = append(args, "--")
		if strings.TrimSpace(in.File) != "" {
			rel, err := gitPath(env.FilesDir, in.File)
			if err != nil {
				return "", err
			}
			args = append(args, rel)
		}
		return withRepo(ctx, env, t.cfg, func(ctx context.Context, r *repo) (string, error) {
			return r.run(ctx, nil, "(no changes)", args...)
		})
	})
}

// --- git_log ---

type gitLogTool struct{ cfg Config }

func (gitLogTool) Name() string { return "git_log" }

func (gitLogTool) Description() string {
	return "Show the recent commits of the workspace repository's current branch: hash, date, author and subject."
}

func (gitLogTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"count":{"type":"integer","minimum":1,"maximum":200,"description":"Number of commits to show (default 10)"}` +
		`},"required":[]}`)
}

type gitLogInput struct {
	Count *intArg `json:"count,omitempty"`
}

func (in *gitLogInput) validate() error {
	if in.Count != nil && (*in.Count < 1 || *in.Count > maxGitLogCount) {
		return fmt.Errorf("count must be between 1 and %d", maxGitLogCount)
	}
	return nil
}

func (t gitLogTool) Decode(input json.RawMessage) (Call, error) {
	return decodeCall(input, func(ctx context.Context, env Env, in *gitLogInput) (string, error) {
		n := defaultGitLogCount
		if in.Count != nil {
			n = int(*in.Count)
		}
		return withRepo(ctx, env, t.cfg, func(ctx context.Context, r *repo) (string, error) {
			out, code, err := r.exec(ctx, nil, "log", "--no-color", "--no-ext-diff", "--no-textconv",
				fmt.Sprintf("--max-count=%d", n), "--format=%h %ad %an: %s", "--date=short", "--")
			if err != nil {
				return "", err
			}
			if code != 0 {
				if strings.Contains(out, "does not have any commits") {
					return "(no commits yet)", nil
				}
				return "", fmt.Errorf("git log failed: %s", strings.TrimSpace(out))
			}
			if out = strings.TrimRight(out, "\n"); out == "" {
				return "(no commits yet)", nil
			}
			return out, nil
		})
	})
}

// --- git_commit ---

type gitCommitTool struct{ cfg Config }

func (gitCommitTool) Name() string { return "git_commit" }

func (gitCommitTool) Description() string {
	return "Stage files and create a git commit in the workspace repository. files lists the paths to stage " +
		"(relative to the workspace root); without it every change is staged. Needs the user's approval."
}

func (gitCommitTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"message":{"type":"string","description":"The commit message"},` +
		`"files":{"type":"array","items":{"type":"string"},"description":"Paths to stage (default: all changes)"}` +
		`},"required":["message"]}`)
}

type gitCommitInput struct {
	Message string   `json:"message"`
	Files   []string `json:"files,omitempty"`
}

func (in *gitCommitInput) validate() error {
	if strings.TrimSpace(in.Message) == "" {
		return errors.New("message is required")
	}
	if len(in.Message) > maxCommitMessage {
		return fmt.Errorf("message is longer than %d bytes", maxCommitMessage)
	}
	for _, f := range in.Files {
		if strings.HasPrefix(strings.TrimSpace(f), "-") {
			return fmt.Errorf("path %q must not start with '-'", truncateUTF8(f, maxKeyShown))
		}
		if strings.TrimSpace(f) == "" {
			return errors.New("files must not contain an empty path")
		}
	}
	return nil
}

func (t gitCommitTool) Decode(input json.RawMessage) (Call, error) {
	return decodeCall(input, func(ctx context.Context, env Env, in *gitCommitInput) (string, error) {
		add := []string{"add", "--all", "--"}
		for _, f := range in.Files {
			rel, err := gitPath(env.FilesDir, f)
			if err != nil {
				return "", err
			}
			add = append(add, rel)
		}
		return withRepo(ctx, env, t.cfg, func(ctx context.Context, r *repo) (string, error) {
			if _, err := r.run(ctx, nil, "", add...); err != nil {
				return "", err
			}
			// The message goes through stdin, never as an argument: nothing
			// in it can be read as an option.
			r.setIdentity(ctx)
			return r.run(ctx, strings.NewReader(in.Message), "", "commit", "--no-verify", "--no-edit", "--cleanup=strip", "--file=-")
		})
	})
}

// setIdentity names a committer when the repository names none: git
// refuses to commit without one, and its HOME is empty.
func (r *repo) setIdentity(ctx context.Context) {
	for _, kv := range [][3]string{{"user.name", "NAME", "Waggle"}, {"user.email", "EMAIL", "waggle@localhost"}} {
		v, code, err := r.exec(ctx, nil, "config", "--get", kv[0])
		if err != nil || code != 0 || strings.TrimSpace(v) == "" {
			r.extraEnv = append(r.extraEnv, "GIT_AUTHOR_"+kv[1]+"="+kv[2], "GIT_COMMITTER_"+kv[1]+"="+kv[2])
		}
	}
}

// --- git_branch ---

type gitBranchTool struct{ cfg Config }

func (gitBranchTool) Name() string { return "git_branch" }

func (gitBranchTool) Description() string {
	return "List, create, switch or delete branches of the workspace repository. action is list, create, switch or " +
		"delete; name is required except for list; from is the starting point of a new branch (default: the current " +
		"commit). Delete refuses a branch that is not merged. Every action except list needs the user's approval."
}

func (gitBranchTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"action":{"type":"string","enum":["list","create","switch","delete"],"description":"Branch operation"},` +
		`"name":{"type":"string","description":"Branch name (create, switch, delete)"},` +
		`"from":{"type":"string","description":"Branch or commit a new branch starts from (default: current)"}` +
		`},"required":["action"]}`)
}

type gitBranchInput struct {
	Action string `json:"action"`
	Name   string `json:"name,omitempty"`
	From   string `json:"from,omitempty"`
}

func (in *gitBranchInput) validate() error {
	in.Action = strings.ToLower(strings.TrimSpace(in.Action))
	in.Name, in.From = strings.TrimSpace(in.Name), strings.TrimSpace(in.From)
	switch in.Action {
	case "list":
		if in.Name != "" || in.From != "" {
			return errors.New("list takes no name or from")
		}
		return nil
	case "create", "switch", "delete":
	default:
		return errors.New("action must be list, create, switch or delete")
	}
	if err := gitRefName("name", in.Name); err != nil {
		return err
	}
	if in.From != "" {
		if in.Action != "create" {
			return errors.New("from is only for create")
		}
		if err := gitRefName("from", in.From); err != nil {
			return err
		}
	}
	return nil
}

func (t gitBranchTool) Decode(input json.RawMessage) (Call, error) {
	return decodeCall(input, func(ctx context.Context, env Env, in *gitBranchInput) (string, error) {
		return withRepo(ctx, env, t.cfg, func(ctx context.Context, r *repo) (string, error) {
			switch in.Action {
			case "list":
				return r.run(ctx, nil, "(no branches yet)", "branch", "--list", "--no-color", "--format=%(HEAD) %(refname:short)")
			case "create":
				args := []string{"branch", "--no-track", "--end-of-options", in.Name}
				if in.From != "" {
					args = append(args, in.From)
				}
				if _, err := r.run(ctx, nil, "", args...); err != nil {
					return "", err
				}
				return "Created branch " + in.Name, nil
			case "switch":
				if _, err := r.run(ctx, nil, "", "switch", "--no-guess", "--end-of-options", in.Name); err != nil {
					return "", err
				}
				return "Switched to branch " + in.Name, nil
			default: // delete
				return r.run(ctx, nil, "Deleted branch "+in.Name, "branch", "--delete", "--end-of-options", in.Name)
			}
		})
	})
}
