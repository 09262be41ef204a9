package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// startLocal creates a cluster in a temp dir with the local initdb and runs
// postgres as a child that gets SIGQUIT (immediate shutdown) when the test
// process dies.
func startLocal() (string, error) {
	c, err := newLocalCluster()
	if err != nil {
		return "", err
	}
	if err := c.start(); err != nil {
		return "", err
	}
	return c.url("postgres"), nil
}

// localCluster is a cluster made with the local initdb, its server run as
// a child of the test process on a fixed loopback port, so it can be
// stopped and started again where its clients expect it.
type localCluster struct {
	postgres string
	dir      string // owns the data dir, the socket and the log
	port     int
	cred     *syscall.Credential // the postgres user when running as root
	cmd      *exec.Cmd
	exited   chan error
}

// newLocalCluster runs initdb in a new temp dir and picks a free port.
func newLocalCluster() (*localCluster, error) {
	initdb, err := findBin("initdb")
	if err != nil {
		return nil, err
	}
	if real, err := filepath.EvalSymlinks(initdb); err == nil {
		initdb = real
	}
	c := &localCluster{postgres: filepath.Join(filepath.Dir(initdb), "postgres")}
	sweepStale()
	if c.dir, err = os.MkdirTemp("", "waggle-pgtest-"); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root.
		uid, gid, err := postgresUser()
		if err != nil {
			return nil, err
		}
		if err := os.Chmod(c.dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.Chown(c.dir, uid, gid); err != nil {
			return nil, err
		}
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	cmd := exec.Command(initdb, "-D", c.data(), "-U", "waggle", "--auth=trust", "-E", "UTF8", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	cmd.Dir = c.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, tail(out))
	}
	if c.port, err = freePort(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *localCluster) data() string { return filepath.Join(c.dir, "data") }

func (c *localCluster) url(db string) string {
	return fmt.Sprintf("postgres://waggle@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// start runs the server and waits until it accepts connections.
func (c *localCluster) start() error {
	logf, err := os.OpenFile(filepath.Join(c.dir, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	srv := exec.Command(c.postgres, "-D", c.data(), "-p", strconv.Itoa(c.port), "-k", c.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=200")
	srv.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGQUIT}
	srv.Dir = c.dir
	srv.Stdout, srv.Stderr = logf, logf
	if err := srv.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan error, 1)
	// Reaps the server when it exits; it lives until stop or as long as
	// the test process.
	go func() { exited <- srv.Wait() }()
	c.cmd, c.exited = srv, exited
	u := c.url("postgres")
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, u)
		if err == nil {
			conn.Close(ctx)
			cancel()
			return nil
		}
		cancel()
		select {
		case werr := <-exited:
			log, _ := os.ReadFile(filepath.Join(c.dir, "log"))
			return fmt.Errorf("postgres exited (%v): %s", werr, tail(log))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = srv.Process.Signal(syscall.SIGQUIT)
			return fmt.Errorf("postgres did not accept connections: %v", err)
		}
	}
}

// stop shuts the server down the way `pg_ctl stop -m fast` does (SIGINT:
// roll back open transactions, close connections, checkpoint) and waits
// for it to exit.
func (c *localCluster) stop() error {
	if c.cmd == nil {
		return nil
	}
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.exited:
	case <-time.After(60 * time.Second):
		_ = c.cmd.Process.Signal(syscall.SIGQUIT)
		<-c.exited
		return errors.New("postgres did not stop within 60s of a fast shutdown")
	}
	c.cmd = nil
	return nil
}

// remove stops the server and deletes the cluster.
func (c *localCluster) remove() {
	if c.cmd != nil {
		_ = c.cmd.Process.Signal(syscall.SIGQUIT)
		<-c.exited
		c.cmd = nil
	}
	_ = os.RemoveAll(c.dir)
}

// findBin finds a PostgreSQL program on PATH or in Debian's versioned
// directories (newest first).
func findBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	sort.Slice(matches, func(i, j int) bool { return version(matches[i]) > version(matches[j]) })
	if len(matches) > 0 {
		return matches[0], nil
	}
	return "", errors.New(name + " not found")
}

func version(path string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return v
}

// postgresUser returns the postgres user's ids, creating the user (as
// scripts/with-postgres.sh does) when it does not exist.
func postgresUser() (int, int, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		if out, err := exec.Command("useradd", "--system", "--no-create-home", "postgres").CombinedOutput(); err != nil {
			return 0, 0, fmt.Errorf("create user postgres: %v: %s", err, tail(out))
		}
		if u, err = user.Lookup("postgres"); err != nil {
			return 0, 0, err
		}
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	return uid, gid, errors.Join(err1, err2)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// sweepStale removes clusters of earlier test processes whose server is
// gone (the process that owned them was killed). Recent directories are
// left alone: another test process may be creating one.
func sweepStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "waggle-pgtest-*"))
	for _, d := range dirs {
		fi, err := os.Stat(d)
		if err != nil || time.Since(fi.ModTime()) < 10*time.Minute {
			continue
		}
		pidFile, err := os.ReadFile(filepath.Join(d, "data", "postmaster.pid"))
		if err == nil {
			first, _, _ := strings.Cut(string(pidFile), "\n")
			if pid, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && syscall.Kill(pid, 0) == nil {
				continue
			}
		}
		_ = os.RemoveAll(d)
	}
}

func tail(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
