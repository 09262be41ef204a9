// Package clients tests the waggle binary the way its users run it: the
// desktop app's sidecar environment (WAGGLE_PORT, WAGGLE_HOST,
// WAGGLE_FRONTEND_DIR) and `waggle chat` in a pty and in a pipe.
package clients

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waggle-os/core/services/waggle/waggletest"
)

var waggleBin string

func TestMain(m *testing.M) {
	os.Exit(waggletest.RunWithBinary(m, &waggleBin))
}

// baseEnv is a clean environment: no WAGGLE_* from the developer's shell.
func baseEnv(t *testing.T, extra ...string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TERM=xterm"}
	return append(env, extra...)
}

// freePort is the port of a free loopback address (the sidecar takes a
// port, not an address).
func freePort(t *testing.T) int {
	t.Helper()
	_, p, _ := net.SplitHostPort(waggletest.FreeAddr(t))
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// unreachableLLM is a model URL nothing answers: echo mode.
func unreachableLLM(t *testing.T) string {
	return "http://" + waggletest.FreeAddr(t) + "/v1"
}

// syncBuffer collects a process's output and wakes waiters on each write.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{changed: make(chan struct{})} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	close(b.changed)
	b.changed = make(chan struct{})
	return n, err
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until cond holds for the output from offset on, and
// returns the offset just past where it first held.
func (b *syncBuffer) waitFor(t *testing.T, what string, from int, cond func(s string) int) int {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		b.mu.Lock()
		s := b.buf.String()
		changed := b.changed
		b.mu.Unlock()
		if from > len(s) {
			from = len(s)
		}
		if end := cond(s[from:]); end >= 0 {
			return from + end
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("waited 20s for %s; output since offset %d:\n%q", what, from, s[from:])
		}
	}
}

// expect waits for text in the output after from.
func (b *syncBuffer) expect(t *testing.T, from int, text string) int {
	t.Helper()
	return b.waitFor(t, fmt.Sprintf("%q", text), from, func(s string) int {
		if i := strings.Index(s, text); i >= 0 {
			return i + len(text)
		}
		return -1
	})
}
