// Package waitfor waits in tests for a state that announces itself with no
// event (a KV entry a sweeper removes, a process that exits, a file another
// goroutine writes): it polls with a deadline, so a test neither sleeps a
// guessed duration nor hangs until the test binary's timeout.
package waitfor

import (
	"errors"
	"testing"
	"time"
)

// Timeout is how long a condition may take before the test fails. It is
// generous because CI machines are shared; a passing test never waits it.
const Timeout = 10 * time.Second

// interval is the pause between two polls.
const interval = 10 * time.Millisecond

// True polls cond until it returns true, and fails t (from the test's
// goroutine, as t.Fatal requires) when Timeout passes first. what names the
// awaited state in the failure: "decided entry removed". cond runs on the
// caller's goroutine, so it may itself fail t at once (a process it waits
// for has exited).
func True(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(Timeout).True(t, what, cond)
}

// NoError polls fn until it returns nil, and fails t with fn's last error
// when Timeout passes first.
func NoError(t testing.TB, what string, fn func() error) {
	t.Helper()
	Within(Timeout).NoError(t, what, fn)
}

// Wait is a wait with its own deadline and polling interval, for a state
// that may take longer than Timeout (a cluster restarting) or must come
// sooner, and for conditions too costly to check every 10ms (a request to
// another process).
type Wait struct {
	timeout, interval time.Duration
}

// Within is a wait of timeout.
func Within(timeout time.Duration) Wait { return Wait{timeout: timeout, interval: interval} }

// Every is w polling every d.
func (w Wait) Every(d time.Duration) Wait {
	w.interval = d
	return w
}

// True is the package's True with w's deadline and interval.
func (w Wait) True(t testing.TB, what string, cond func() bool) {
	t.Helper()
	w.NoError(t, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// NoError is the package's NoError with w's deadline and interval.
func (w Wait) NoError(t testing.TB, what string, fn func() error) {
	t.Helper()
	timeout := w.timeout
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			if err == errNotYet {
				t.Fatalf("waitfor: %s: not within %s", what, timeout)
			}
			t.Fatalf("waitfor: %s: not within %s: last error: %v", what, timeout, err)
		}
		<-tick.C
	}
}

// errNotYet is True's condition while it does not hold; its failure
// message has no error to report.
var errNotYet = errors.New("condition not met")
