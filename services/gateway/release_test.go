package gateway

import (
	"context"
	"testing"
	"time"
)

func testReleaser(t *testing.T) (*releaser, <-chan struct{}) {
	t.Helper()
	released := make(chan struct{}, 8)
	r := newReleaser()
	r.quiet, r.every = 5*time.Millisecond, 0
	r.release = func() { released <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r, released
}

// waitRelease waits for one release (bounded: the loop releases within
// milliseconds in these tests).
func waitRelease(t *testing.T, released <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal(what + ": the memory was never released")
	}
}

// When a burst of streams ends (stalled clients that all left), the
// process gives the burst's memory back, and the burst is over once none
// is open.
func TestBurstOfEndedStreamsReleasesMemory(t *testing.T) {
	r, released := testReleaser(t)
	for range 200 {
		r.started()
	}
	for range 200 {
		r.ended()
	}
	// One release, or two when the loop woke before the last ended.
	for over := false; !over; {
		waitRelease(t, released, "200 streams ended")
		r.mu.Lock()
		over = r.high == 0 && r.floor == noFloor
		r.mu.Unlock()
	}
	// The next release needs a new burst: a few streams coming and going
	// do not make one due.
	for range 10 {
		r.started()
		r.ended()
	}
	r.mu.Lock()
	due := r.dueLocked()
	r.mu.Unlock()
	if due {
		t.Fatal("a release is due after 10 streams came and went")
	}
}

// A burst whose streams end over many seconds (turns that end one after
// the other) is released again when the rest ended: its last streams'
// memory is not left to the runtime.
func TestBurstEndingSlowlyReleasesItsLastStreams(t *testing.T) {
	r, released := testReleaser(t)
	for range 120 {
		r.started()
	}
	for range 64 { // 56 left: fewer than half, a drop of 64
		r.ended()
	}
	waitRelease(t, released, "64 of 120 streams ended")
	for range 56 {
		r.ended()
	}
	waitRelease(t, released, "the burst's last 56 streams ended")
}

// The ordinary coming and going of streams, however many are open, and a
// drop of a few never ask for a release (each costs a full collection).
// No loop runs here: a kick would stay in the channel.
func TestChurnDoesNotReleaseMemory(t *testing.T) {
	r := newReleaser()
	for range 1000 {
		r.started()
	}
	for range 5000 {
		r.ended()
		r.started()
	}
	for range 400 { // 1000 → 600: not half
		r.ended()
	}
	if len(r.kick) != 0 {
		t.Fatal("a release was asked for while most streams stayed open")
	}
	s := newReleaser()
	for range releaseMinDrop - 1 {
		s.started()
	}
	for range releaseMinDrop - 1 {
		s.ended()
	}
	if len(s.kick) != 0 {
		t.Fatalf("a release was asked for after %d streams ended", releaseMinDrop-1)
	}
}
