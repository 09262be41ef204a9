package waggletest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/embednats"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/app"
)

// Proc is a `waggle serve` running as its own OS process, for black-box
// tests that must see exactly what a user's process does (flags, the
// environment, file modes, listeners).
type Proc struct {
	URL     string // http://<addr>
	Addr    string
	DataDir string
	Name    string // for messages (ProcName; default "waggle serve")
	cmd     *exec.Cmd
	out     *procOutput
	exited  chan struct{}
	err     error
}

// ProcOption adjusts a process before it starts.
type ProcOption func(*procSpec)

type procSpec struct {
	args []string
	env  []string
	addr string
	dir  string
	wd   string
	// fromEnv: no --addr or --data-dir flag (see ProcSidecar).
	fromEnv bool
	name    string
	// kill: SIGKILL at cleanup instead of an interrupt and a wait.
	kill bool
}

// ProcArgs adds command-line flags of `waggle serve`.
func ProcArgs(args ...string) ProcOption {
	return func(s *procSpec) { s.args = append(s.args, args...) }
}

// ProcEnv adds KEY=VALUE environment entries.
func ProcEnv(kv ...string) ProcOption {
	return func(s *procSpec) { s.env = append(s.env, kv...) }
}

// ProcAddr sets the listen address (default: a free loopback port).
func ProcAddr(addr string) ProcOption { return func(s *procSpec) { s.addr = addr } }

// ProcDataDir sets the data dir (default: a fresh temp dir). A relative
// one is passed as given, relative to ProcWorkDir.
func ProcDataDir(dir string) ProcOption { return func(s *procSpec) { s.dir = dir } }

// ProcName names the process in the test's messages.
func ProcName(name string) ProcOption { return func(s *procSpec) { s.name = name } }

// ProcKillAtCleanup kills the process (SIGKILL) when the test ends instead
// of interrupting it and waiting for a clean stop: for multi-process tests
// whose processes' shutdown is not what they test.
func ProcKillAtCleanup() ProcOption { return func(s *procSpec) { s.kill = true } }

// ProcWorkDir sets the process's working directory (default: the test's).
func ProcWorkDir(dir string) ProcOption { return func(s *procSpec) { s.wd = dir } }

// ProcSidecar starts the process as the desktop app starts its server: no
// --addr or --data-dir flag, but WAGGLE_HOST=127.0.0.1, WAGGLE_PORT=port
// and WAGGLE_DATA_DIR=dataDir in its environment.
func ProcSidecar(port int, dataDir string) ProcOption {
	return func(s *procSpec) {
		s.fromEnv = true
		s.addr = fmt.Sprintf("127.0.0.1:%d", port)
		s.dir = dataDir
		s.env = append(s.env, "WAGGLE_HOST=127.0.0.1", fmt.Sprintf("WAGGLE_PORT=%d", port), "WAGGLE_DATA_DIR="+dataDir)
	}
}

// StartProc runs `bin serve` with a clean environment (no WAGGLE_* from
// the developer's shell), a fresh data dir, a free loopback address and an
// unreachable model server (echo mode) unless opts say otherwise, and waits
// until /health answers 200. The process is interrupted at cleanup.
func StartProc(t testing.TB, bin string, opts ...ProcOption) *Proc {
	t.Helper()
	spec := procSpec{}
	for _, o := range opts {
		o(&spec)
	}
	if spec.addr == "" {
		spec.addr = FreeAddr(t)
	}
	if spec.dir == "" {
		spec.dir = t.TempDir()
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "WAGGLE_LLM_URL=" + unreachableURL(t)}
	env = append(env, spec.env...)
	args := []string{"serve"}
	if !spec.fromEnv {
		args = append(args, "--addr", spec.addr, "--data-dir", spec.dir)
	}
	args = append(args, spec.args...)
	dataDir := spec.dir
	if !filepath.IsAbs(dataDir) {
		dataDir = filepath.Join(spec.wd, dataDir)
	}
	if spec.name == "" {
		spec.name = "waggle serve"
	}
	p := &Proc{URL: "http://" + spec.addr, Addr: spec.addr, DataDir: dataDir, Name: spec.name, out: &procOutput{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env
	p.cmd.Dir = spec.wd
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		if spec.kill {
			p.Kill()
		} else {
			p.Stop(t)
		}
	})
	client := &http.Client{Timeout: 2 * time.Second}
	waitfor.Within(60*time.Second).Every(50*time.Millisecond).NoError(t, p.URL+"/health healthy", func() error {
		select {
		case <-p.exited:
			t.Fatalf("%s exited while starting (%v):\n%s", p.Name, p.err, p.Output())
		default:
		}
		resp, err := client.Get(p.URL + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
	return p
}

// Pid is the process's id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// DialNATS connects to the process's embedded NATS listener at addr (its
// --nats-listen) as the operator does, with the key in its data dir; the
// connection is closed when the test ends.
func (p *Proc) DialNATS(t testing.TB, addr string) *nats.Conn {
	t.Helper()
	auth, err := embednats.ClientOption(app.NATSCredentials(p.DataDir))
	if err != nil {
		t.Fatalf("waggletest: NATS credentials: %v", err)
	}
	nc, err := nats.Connect("nats://"+addr, auth)
	if err != nil {
		t.Fatalf("waggletest: dial NATS %s: %v", addr, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Wait waits for the process to exit and returns its exit error.
func (p *Proc) Wait(ctx context.Context) error {
	select {
	case <-p.exited:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Signal sends sig to the process (SIGTERM, as a service manager's stop).
func (p *Proc) Signal(sig os.Signal) { _ = p.cmd.Process.Signal(sig) }

// Kill kills the process (SIGKILL, a crash) and waits until it is gone.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Exited is closed when the process has exited; Err then says how.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Err is the process's exit error, valid once Exited is closed.
func (p *Proc) Err() error {
	<-p.exited
	return p.err
}

// Alive reports whether the process still runs.
func (p *Proc) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Output is what the process has printed so far (stdout and stderr).
func (p *Proc) Output() string { return p.out.String() }

// Stop interrupts the process and waits for it to exit (killing it after
// 20 s, which fails t).
func (p *Proc) Stop(t testing.TB) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("%s did not stop on SIGINT:\n%s", p.Name, p.Output())
	}
}

// Do sends a request to the process (see Request).
func (p *Proc) Do(t testing.TB, method, path string, body any, headers ...string) *http.Response {
	t.Helper()
	return Request(t, method, p.URL+path, body, headers...)
}

// procOutput collects a process's output safely across goroutines.
type procOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *procOutput) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(b)
}

func (o *procOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Clone(o.buf.String())
}
