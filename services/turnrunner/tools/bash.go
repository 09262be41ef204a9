package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// pipeDrainGrace bounds how long output is still read after the command has
// exited and its process group was killed; only a process that escaped the
// group (setsid) can hold the pipe open that long.
const pipeDrainGrace = 2 * time.Second

// shellPath prefers bash and falls back to sh (minimal containers).
var shellPath = sync.OnceValue(func() string {
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "sh"
})

type bashTool struct{ cfg Config }

func (bashTool) Name() string { return "bash" }

func (t bashTool) Description() string {
	return fmt.Sprintf("Run a shell command with bash -c in the workspace directory and return its combined "+
		"stdout and stderr (at most %d bytes; the start and end are kept when longer). A command that exits "+
		"with a non-zero status still returns its output, followed by a line \"[exit code N]\". timeout is in "+
		"seconds (default %d, at most %d); on timeout the command and everything it started are killed. "+
		"Background processes do not outlive the command. Standard input is empty.",
		t.cfg.BashOutputLimit, int(t.cfg.BashTimeout.Seconds()), int(t.cfg.BashMaxTimeout.Seconds()))
}

func (bashTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"command":{"type":"string","description":"The shell command to run"},` +
		`"timeout":{"type":"number","exclusiveMinimum":0,"description":"Time limit in seconds"}` +
		`},"required":["command"]}`)
}

// bashInput is bash's arguments.
type bashInput struct {
	Command string    `json:"command"`
	Timeout *floatArg `json:"timeout,omitempty"`
}

func (in *bashInput) validate() error {
	if strings.TrimSpace(in.Command) == "" {
		return errors.New("command is required")
	}
	if in.Timeout != nil && *in.Timeout <= 0 {
		return errors.New("timeout must be a positive number of seconds")
	}
	return nil
}

func (t bashTool) Decode(input json.RawMessage) (Call, error) { return decodeCall(input, t.runInput) }

func (t bashTool) runInput(ctx context.Context, env Env, in *bashInput) (string, error) {
	timeout := t.cfg.BashTimeout
	if in.Timeout != nil {
		secs := math.Min(float64(*in.Timeout), t.cfg.BashMaxTimeout.Seconds())
		timeout = time.Duration(secs * float64(time.Second))
	}
	ws, err := openWorkspace(env) // validates and creates FilesDir
	if err != nil {
		return "", err
	}
	ws.Close()
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("command not run: %w", err)
	}

	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, waitErr, err := t.run(runCtx, env.FilesDir, in.Command)
	if err != nil {
		return "", err
	}

	switch {
	case ctx.Err() != nil:
		return "", fmt.Errorf("command cancelled: %w", ctx.Err())
	case runCtx.Err() != nil:
		msg := fmt.Sprintf("command timed out after %v and was killed", timeout)
		if out != "" {
			msg += "; output so far:\n" + out
		}
		return "", errors.New(msg)
	}
	var exitErr *exec.ExitError
	switch {
	case waitErr == nil:
		if out == "" {
			return "(no output)", nil
		}
		return out, nil
	case errors.As(waitErr, &exitErr):
		if out != "" && !strings.HasSuffix(out, "\n") {
			out += "\n"
		}
		if code := exitErr.ExitCode(); code >= 0 {
			return out + fmt.Sprintf("[exit code %d]", code), nil
		}
		return out + fmt.Sprintf("[terminated: %s]", exitErr.ProcessState), nil
	default:
		return "", fmt.Errorf("command failed: %v", waitErr)
	}
}

// run executes command and returns its capped output and Wait's error; err
// is set only when the shell could not be started.
//
// Output goes through a pipe the tool owns rather than exec's own copying:
// Wait then returns as soon as the shell exits, even if a background child
// still holds the pipe, and the child is killed with the process group
// instead of stalling the call.
func (t bashTool) run(ctx context.Context, dir, command string) (out string, waitErr, err error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return "", nil, fmt.Errorf("cannot run the command: %v", err)
	}
	defer pr.Close()

	cmd := exec.CommandContext(ctx, shellPath(), "-c", command)
	if t.cfg.BashSandbox != "" {
		cmd = exec.CommandContext(ctx, t.cfg.BashSandbox, sandboxArgs(dir, t.cfg.SandboxHide, command)...)
	}
	cmd.Dir = dir
	cmd.Env = childEnv()
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.WaitDelay = pipeDrainGrace
	setProcessGroup(cmd)
	startErr := cmd.Start()
	pw.Close() // the child has its copy; EOF must come when the last child closes it
	if startErr != nil {
		return "", nil, fmt.Errorf("cannot start the shell: %v", startErr)
	}

	buf := newCappedBuffer(t.cfg.BashOutputLimit)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(buf, pr)
	}()
	waitErr = cmd.Wait()
	killProcessGroup(cmd)
	timer := time.NewTimer(pipeDrainGrace)
	select {
	case <-copied:
		timer.Stop()
	case <-timer.C:
		pr.Close() // unblocks the copier
		<-copied
	}
	return buf.String(), waitErr, nil
}

// childEnv is the runner's environment minus Waggle's own settings, which
// include the LLM API key: a command the model writes must not be able to
// print it.
func childEnv() []string {
	env := os.Environ()
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "WAGGLE_") {
			out = append(out, kv)
		}
	}
	return out
}

// cappedBuffer keeps the first and last parts of a stream up to limit bytes
// in total and counts what it drops, so a huge output still shows both how
// it began and how it ended (where errors usually are).
type cappedBuffer struct {
	mu      sync.Mutex
	headCap int
	tailCap int
	head    []byte
	tail    []byte // may grow to 2*tailCap before being trimmed
	total   int64
}

func newCappedBuffer(limit int) *cappedBuffer {
	tailCap := limit / 4
	return &cappedBuffer{headCap: limit - tailCap, tailCap: tailCap}
}

// Write implements io.Writer; it never fails.
func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total += int64(len(p))
	rest := p
	if room := b.headCap - len(b.head); room > 0 {
		n := min(room, len(rest))
		b.head = append(b.head, rest[:n]...)
		rest = rest[n:]
	}
	if len(rest) > 0 && b.tailCap > 0 {
		b.tail = append(b.tail, rest...)
		if len(b.tail) > 2*b.tailCap {
			b.tail = append(b.tail[:0:0], b.tail[len(b.tail)-b.tailCap:]...)
		}
	}
	return len(p), nil
}

// String returns the kept output, with a note where bytes were dropped.
func (b *cappedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	tail := b.tail
	if len(tail) > b.tailCap {
		tail = tail[len(tail)-b.tailCap:]
	}
	kept := int64(len(b.head) + len(tail))
	if kept == b.total {
		return strings.ToValidUTF8(string(b.head)+string(tail), "\uFFFD")
	}
	head := strings.ToValidUTF8(string(b.head), "\uFFFD")
	tailText := strings.ToValidUTF8(string(tail), "\uFFFD")
	return fmt.Sprintf("%s\n\n[output truncated: %d of %d bytes omitted]\n\n%s", head, b.total-kept, b.total, tailText)
}

// sandboxArgs are bubblewrap's arguments for command in dir. Mount order
// matters: later mounts cover earlier ones, so the workspace is bound
// read-write after the directories that hide it.
func sandboxArgs(dir string, hide []string, command string) []string {
	return append(sandboxPrefix(dir, hide), shellPath(), "-c", command)
}

// sandboxPrefix is bubblewrap's arguments before the program to run in
// dir (bash's shell, or git for the git tools).
func sandboxPrefix(dir string, hide []string) []string {
	args := []string{"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"}
	for _, h := range append([]string{"/root", "/home"}, hide...) {
		if st, err := os.Stat(h); err == nil && st.IsDir() {
			args = append(args, "--tmpfs", h)
		}
	}
	return append(args, "--bind", dir, dir, "--chdir", dir,
		"--unshare-all", "--die-with-parent", "--new-session")
}
