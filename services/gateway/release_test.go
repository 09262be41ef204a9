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

// When a burst of streams ends (stalled clients that all left), the
// process gives the burst's memory back once, after the last of them.
func TestBurstOfEndedStreamsReleasesMemoryOnce(t *testing.T) {
	r, released := testReleaser(t)
	for range 200 {
		r.started()
	}
	for range 200 {
		r.ended()
	}
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("200 streams ended and the memory was never released")
	}
	r.mu.Lock()
	high := r.high
	r.mu.Unlock()
	if high != 0 {
		t.Fatalf("most streams since the release %d, want 0: the next burst counts from here", high)
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
