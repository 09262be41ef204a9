package gateway

import (
	"context"
	"math"
	"runtime/debug"
	"sync"
	"time"
)

// releaser gives the memory of a burst of streams back to the operating
// system once the burst is over.
//
// Why: the Go runtime sets its next collection at twice the heap that was
// live at the last one, and returns free memory to the OS only above that
// goal, slowly. When hundreds of streams end at once (clients that
// stalled, then left), nothing allocates afterwards, so no collection
// lowers the goal: the process kept ~60 MiB of free heap and the burst's
// garbage for minutes (issue 23: RSS 141–160 MiB above the start 30 s
// after the clients closed, of which the runtime called 133 MiB free).
// One collection that returns everything (debug.FreeOSMemory) right after
// such a drop costs a few milliseconds of CPU; it is not done for the
// ordinary coming and going of streams.
type releaser struct {
	mu   sync.Mutex
	open int
	// high is the most streams open since the burst began; floor the
	// streams open at the burst's last release (noFloor before the first).
	// A burst's streams may end over many seconds: after a release, the
	// next is due when half of those still open ended too, so the burst's
	// last streams are not left out (at most log2(high) releases).
	high, floor int
	kick        chan struct{}

	// quiet is how long no stream may have ended before the release (the
	// rest of the burst ends first); every the least time between two
	// releases; minDrop the fewest streams a drop must count. Variables
	// for tests.
	quiet, every time.Duration
	minDrop      int
	release      func()
}

// noFloor marks a burst with no release yet.
const noFloor = math.MaxInt

// releaseMinDrop is the smallest drop of open streams (and at least half
// of the most open) that releases memory: a burst, not a few turns.
const releaseMinDrop = 64

func newReleaser() *releaser {
	return &releaser{kick: make(chan struct{}, 1), floor: noFloor, quiet: time.Second, every: 10 * time.Second,
		minDrop: releaseMinDrop, release: debug.FreeOSMemory}
}

// started counts a stream that opened.
func (r *releaser) started() {
	if r == nil {
		return // a router built for a test, without Start
	}
	r.mu.Lock()
	r.open++
	if r.floor != noFloor && r.open >= 2*r.floor+r.minDrop {
		// A new burst after a release: it counts from here.
		r.floor, r.high = noFloor, r.open
	}
	r.high = max(r.high, r.open)
	r.mu.Unlock()
}

// ended counts a stream that ended and wakes the loop when the open
// streams dropped enough for a release.
func (r *releaser) ended() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.open--
	due := r.dueLocked()
	r.mu.Unlock()
	if due {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

func (r *releaser) dueLocked() bool {
	return r.high-r.open >= r.minDrop && r.open <= r.high/2 && (r.floor == noFloor || r.open <= r.floor/2)
}

// releasedLocked records a release: with no stream open the burst is over.
func (r *releaser) releasedLocked() {
	r.floor = r.open
	if r.open == 0 {
		r.high, r.floor = 0, noFloor
	}
}

// run releases memory after each burst of ended streams, until ctx ends.
func (r *releaser) run(ctx context.Context) {
	var last time.Time
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		}
		// Wait until streams stopped ending for quiet, and at least every
		// after the last release.
		wait := max(r.quiet, time.Until(last.Add(r.every)))
		timer.Reset(wait)
	settle:
		for {
			select {
			case <-ctx.Done():
				return
			case <-r.kick:
				timer.Reset(max(r.quiet, time.Until(last.Add(r.every))))
			case <-timer.C:
				break settle
			}
		}
		r.mu.Lock()
		due := r.dueLocked()
		if due {
			r.releasedLocked()
		}
		r.mu.Unlock()
		if due {
			r.release()
			last = time.Now()
		}
	}
}
