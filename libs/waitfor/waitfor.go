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
// awaited state in the failure: "decided entry removed".
func True(t testing.TB, what string, cond func() bool) {
	t.Helper()
	NoError(t, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// NoError polls fn until it returns nil, and fails t with fn's last error
// when Timeout passes first.
func NoError(t testing.TB, what string, fn func() error) {
	t.Helper()
	poll(t, Timeout, what, fn)
}

func poll(t testing.TB, timeout time.Duration, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(interval)
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
