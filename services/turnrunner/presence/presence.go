// Package presence tracks who follows one turn's stream and says when the
// turn has been without a follower for the disconnect grace.
package presence

import (
	"sync"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

// followerTimeout is how long a follower may stay silent before it counts
// as gone: it missed two attach heartbeats (its gateway died).
const followerTimeout = 2 * protocol.AttachInterval

// Tracker tracks who follows one turn's stream and decides when the turn
// has been without followers for the disconnect grace. Gateways send
// attach when a relay starts and every protocol.AttachInterval while it
// streams, and detach when the client goes away.
//
// A turn no one ever followed (an agent-group member turn, read straight
// from the stream) is never cancelled for lack of followers.
type Tracker struct {
	grace  time.Duration
	cancel func() // called once when the grace ran out

	mu        sync.Mutex
	followers map[string]time.Time // client → last attach
	followed  bool
	goneSince time.Time // zero while someone follows
	fired     bool
}

// New returns a tracker of a turn that nobody followed yet; cancel is
// called once, when the turn has had no follower for grace.
func New(grace time.Duration, cancel func()) *Tracker {
	return &Tracker{grace: grace, cancel: cancel, followers: map[string]time.Time{}}
}

// Attach records a follower's (repeated) attach.
func (p *Tracker) Attach(client string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.followers[client] = now
	p.followed = true
	p.goneSince = time.Time{}
}

// Detach records a follower leaving; with no grace the turn stops at once
// when it was the last.
func (p *Tracker) Detach(client string, now time.Time) {
	p.mu.Lock()
	delete(p.followers, client)
	if p.followed && len(p.followers) == 0 && p.goneSince.IsZero() {
		p.goneSince = now
	}
	fire := p.due(now)
	p.mu.Unlock()
	if fire {
		p.cancel()
	}
}

// Tick expires silent followers and fires the grace when it ran out.
func (p *Tracker) Tick(now time.Time) {
	p.mu.Lock()
	for c, last := range p.followers {
		if now.Sub(last) > followerTimeout {
			delete(p.followers, c)
			if len(p.followers) == 0 && p.goneSince.IsZero() {
				// Gone since its last sign of life, not since we noticed.
				p.goneSince = last.Add(followerTimeout)
			}
		}
	}
	fire := p.due(now)
	p.mu.Unlock()
	if fire {
		p.cancel()
	}
}

// due reports (once) that the turn has had no follower for the grace.
// Called with mu held.
func (p *Tracker) due(now time.Time) bool {
	if p.fired || !p.followed || len(p.followers) > 0 || p.goneSince.IsZero() || now.Sub(p.goneSince) < p.grace {
		return false
	}
	p.fired = true
	return true
}

// Followed reports whether a client ever followed the turn.
func (p *Tracker) Followed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.followed
}

// Count is how many clients follow the turn now.
func (p *Tracker) Count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.followers)
}
