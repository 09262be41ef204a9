package waitfor

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records the message and ends the
// goroutine, as the real one does.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls fn with a recorder on its own goroutine (Fatalf ends it) and
// returns the failure message, "" when fn returned normally.
func run(fn func(tb testing.TB)) string {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	return r.msg
}

func TestTrueReturnsOnceTheConditionHolds(t *testing.T) {
	var polls atomic.Int32
	msg := run(func(tb testing.TB) {
		True(tb, "third poll", func() bool { return polls.Add(1) == 3 })
	})
	if msg != "" || polls.Load() != 3 {
		t.Fatalf("failure %q after %d polls, want none after 3", msg, polls.Load())
	}
}

func TestFailuresNameTheStateAndTheLastError(t *testing.T) {
	tests := []struct {
		name string
		fn   func() error
		want string
	}{
		{"condition", func() error { return errNotYet }, "waitfor: entry removed: not within 30ms"},
		{"error", func() error { return errors.New("key exists") }, "waitfor: entry removed: not within 30ms: last error: key exists"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			began := time.Now()
			msg := run(func(tb testing.TB) { Within(30*time.Millisecond).NoError(tb, "entry removed", tc.fn) })
			if msg != tc.want {
				t.Fatalf("failure %q, want %q", msg, tc.want)
			}
			if took := time.Since(began); took < 30*time.Millisecond || took > 5*time.Second {
				t.Fatalf("gave up after %s, want just past 30ms", took)
			}
		})
	}
}

func TestNoErrorStopsAtNil(t *testing.T) {
	var polls atomic.Int32
	msg := run(func(tb testing.TB) {
		NoError(tb, "second poll", func() error {
			if polls.Add(1) < 2 {
				return errors.New("not yet")
			}
			return nil
		})
	})
	if msg != "" || polls.Load() != 2 {
		t.Fatalf("failure %q after %d polls", msg, polls.Load())
	}
}

// Every sets the pause between polls: a 200ms wait polling every 50ms
// checks about four times, not twenty.
func TestEveryPacesThePolls(t *testing.T) {
	var polls atomic.Int32
	msg := run(func(tb testing.TB) {
		Within(200*time.Millisecond).Every(50*time.Millisecond).True(tb, "never", func() bool {
			polls.Add(1)
			return false
		})
	})
	if msg != "waitfor: never: not within 200ms" {
		t.Fatalf("failure %q", msg)
	}
	if n := polls.Load(); n < 2 || n > 6 {
		t.Fatalf("%d polls in 200ms at 50ms intervals", n)
	}
}
