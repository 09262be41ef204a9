package waggletest

import (
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
)

// NATSProc is a `waggle nats` server running as its own OS process, which
// a test kills, stops and starts again on the same store (a node of a
// cluster, or the one NATS of a distributed Waggle). Its output is
// appended to one log file across restarts.
type NATSProc struct {
	t    testing.TB
	bin  string
	args []string
	// Log is the file the server's output goes to.
	Log string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// NewNATSProc returns an unstarted `bin nats args…` logging to log. At the
// test's end the server is killed and, if the test failed, the tail of its
// log is logged as name.
func NewNATSProc(t testing.TB, bin, name, log string, args ...string) *NATSProc {
	n := &NATSProc{t: t, bin: bin, args: append([]string{"nats"}, args...), Log: log}
	t.Cleanup(func() {
		n.Signal(syscall.SIGKILL)
		n.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(log)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("--- %s log (tail) ---\n%s", name, b)
		}
	})
	return n
}

// Start starts the server (again); the caller waits for it to be ready
// as its test defines ready.
func (n *NATSProc) Start() {
	n.t.Helper()
	logf, err := os.OpenFile(n.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		n.t.Fatal(err)
	}
	cmd := exec.Command(n.bin, n.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		n.t.Fatalf("start %v: %v", n.args, err)
	}
	exited := make(chan struct{})
	n.mu.Lock()
	n.cmd, n.exited = cmd, exited
	n.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logf.Close()
		n.mu.Lock()
		n.err = err
		n.mu.Unlock()
		close(exited)
	}()
}

// Alive reports whether the server was started and still runs.
func (n *NATSProc) Alive() bool {
	n.mu.Lock()
	exited := n.exited
	n.mu.Unlock()
	if exited == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// Signal sends sig to the running server, if any.
func (n *NATSProc) Signal(sig os.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && n.cmd.Process != nil {
		_ = n.cmd.Process.Signal(sig)
	}
}

// Exited is closed when the current process has exited (nil before the
// first Start).
func (n *NATSProc) Exited() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.exited
}

// Wait waits until the current process, if any, has exited and returns its
// exit error.
func (n *NATSProc) Wait() error {
	if exited := n.Exited(); exited != nil {
		<-exited
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.err
}

// Kill kills the server (SIGKILL, a crash) and waits until it is gone.
func (n *NATSProc) Kill() {
	n.Signal(syscall.SIGKILL)
	n.Wait()
}
