package benchsuite

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Topology is how the server under test is laid out in OS processes.
type Topology string

// Topologies.
const (
	// Single is `waggle serve` with every target in one process.
	Single Topology = "single"
	// Distributed is three processes on loopback: the stores with the
	// embedded NATS server listening on TCP, a turn runner and a gateway
	// that reach it as NATS clients.
	Distributed Topology = "distributed"
)

// ServerSpec describes one server under test.
type ServerSpec struct {
	// Binary is the waggle binary (or a command that accepts the arguments
	// of `waggle serve` after Prefix).
	Binary string
	// Prefix comes before the serve flags, e.g. ["serve"].
	Prefix []string
	// Topology is Single or Distributed.
	Topology Topology
	// Dir is a fresh directory for data dirs and logs.
	Dir string
	// LLMURL is the model server; empty means an unreachable port (echo mode).
	LLMURL string
	// EchoDelay is --echo-delay.
	EchoDelay time.Duration
	// Extra flags for every process (e.g. --disconnect-grace).
	Extra []string
	// Prepare runs on the session store's data dir before the processes
	// start (to seed session files).
	Prepare func(dataDir string) error
}

// Server is a running server under test: one or more waggle processes.
type Server struct {
	// URL is the gateway's base URL.
	URL string
	// Procs are the processes, the gateway last.
	Procs []*Proc
	// StoreDir is the data dir of the session-store process.
	StoreDir string
	// StartToHealthy is the time from starting the first process to the
	// gateway's first 200 from /health.
	StartToHealthy time.Duration
}

// Proc is one child process.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  string
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// RSS reads the resident set size of the process from /proc in bytes.
func (p *Proc) RSS() (int64, error) { return RSSOf(p.Pid()) }

// RSSOf returns VmRSS of pid in bytes.
func RSSOf(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("benchsuite: rss of %d: %w", pid, err)
	}
	return parseVmRSS(data)
}

func parseVmRSS(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("benchsuite: odd VmRSS line %q", sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("benchsuite: VmRSS: %w", err)
		}
		return kb * 1024, nil
	}
	return 0, errors.New("benchsuite: no VmRSS line")
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// stop asks for a graceful shutdown and kills the process if it does not
// exit within grace.
func (p *Proc) stop(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("benchsuite: %s did not stop within %s (killed; log %s)", p.Name, grace, p.log)
	}
}

func startProc(name, logPath, bin string, args []string) (*Proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("benchsuite: log for %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("benchsuite: start %s: %w", name, err)
	}
	p := &Proc{Name: name, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// freeAddr returns a loopback address with a port nothing listens on now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr, nil
}

// StartServer starts the processes of spec and waits until the gateway
// answers /health (polled every 2 ms, so the start time is measured to
// within that).
func StartServer(ctx context.Context, spec ServerSpec) (*Server, error) {
	llm := spec.LLMURL
	if llm == "" {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		llm = "http://" + addr + "/v1"
	}
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	common := append([]string{
		"--llm-url", llm, "--echo-delay", spec.EchoDelay.String(),
		"--log-level", "warn", "--log-format", "json", "--shutdown-timeout", "5s",
		"--max-message-length", "0",
	}, spec.Extra...)
	s := &Server{URL: "http://" + httpAddr}
	start := func(name string, args ...string) error {
		dataDir := filepath.Join(spec.Dir, name)
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return err
		}
		if name == "single" || name == "stores" {
			s.StoreDir = dataDir
			if spec.Prepare != nil {
				if err := spec.Prepare(dataDir); err != nil {
					return fmt.Errorf("benchsuite: prepare data dir: %w", err)
				}
			}
		}
		full := append(append(append([]string{}, spec.Prefix...), "--data-dir", dataDir), common...)
		full = append(full, args...)
		p, err := startProc(name, filepath.Join(spec.Dir, name+".log"), spec.Binary, full)
		if err != nil {
			return err
		}
		s.Procs = append(s.Procs, p)
		return nil
	}
	fail := func(err error) (*Server, error) {
		s.Stop()
		return nil, err
	}
	t0 := time.Now()
	switch spec.Topology {
	case Single, "":
		if err := start("single", "--addr", httpAddr); err != nil {
			return fail(err)
		}
	case Distributed:
		natsAddr, err := freeAddr()
		if err != nil {
			return fail(err)
		}
		natsURL := "nats://" + natsAddr
		if err := start("stores", "--targets", "session-store,approval,command", "--nats-listen", natsAddr, "--addr", "127.0.0.1:0"); err != nil {
			return fail(err)
		}
		if err := waitTCP(ctx, natsAddr, s.Procs[0]); err != nil {
			return fail(err)
		}
		// The others present the stores' NATS credentials, made at its start.
		nkey := filepath.Join(s.StoreDir, "nats.nk")
		if err := start("runner", "--targets", "turn-runner", "--nats-url", natsURL, "--nats-nkey", nkey, "--addr", "127.0.0.1:0"); err != nil {
			return fail(err)
		}
		if err := start("gateway", "--targets", "gateway", "--nats-url", natsURL, "--nats-nkey", nkey, "--addr", httpAddr); err != nil {
			return fail(err)
		}
	default:
		return fail(fmt.Errorf("benchsuite: unknown topology %q", spec.Topology))
	}
	if err := s.waitHealthy(ctx); err != nil {
		return fail(err)
	}
	s.StartToHealthy = time.Since(t0)
	return s, nil
}

func waitTCP(ctx context.Context, addr string, p *Proc) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("benchsuite: %s exited during start (log %s)", p.Name, p.log)
		case <-ctx.Done():
			return fmt.Errorf("benchsuite: %s never listened on %s (log %s)", p.Name, addr, p.log)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *Server) waitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		for _, p := range s.Procs {
			select {
			case <-p.done:
				return fmt.Errorf("benchsuite: %s exited during start: %v (log %s)", p.Name, p.err, p.log)
			default:
			}
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/health", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("benchsuite: server at %s never became healthy", s.URL)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// RSS is the summed resident set size of the server's processes in bytes.
func (s *Server) RSS() (int64, error) {
	var total int64
	for _, p := range s.Procs {
		n, err := p.RSS()
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// Stop stops the processes, the gateway first and the NATS host last.
func (s *Server) Stop() error {
	var errs []error
	for i := len(s.Procs) - 1; i >= 0; i-- {
		errs = append(errs, s.Procs[i].stop(20*time.Second))
	}
	return errors.Join(errs...)
}

// kill ends the processes at once (SIGKILL) and waits for them.
func (s *Server) kill() {
	for _, p := range s.Procs {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
