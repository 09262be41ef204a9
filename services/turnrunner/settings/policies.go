package settings

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

// Policies holds the teams service's tool policies per (user,
// workspace) for a short while: a policy is asked for on every turn of a
// team user, and a change reaches every runner through
// protocol.PolicyChanges (entries of that team are dropped) or,
// failing that, within the TTL.
type Policies struct {
	nc      *nats.Conn
	ttl     time.Duration
	timeout time.Duration

	mu      sync.Mutex
	entries map[policyKey]policyEntry
	// gen is bumped by every invalidation, so an answer that was in flight
	// during one is not cached (it may predate the change).
	gen uint64
}

type policyKey struct{ user, workspace string }

type policyEntry struct {
	policy protocol.ToolPolicy
	at     time.Time
}

// NewPolicies returns a cache that asks the teams service over nc, keeps
// an answer for ttl and waits at most timeout for one.
func NewPolicies(nc *nats.Conn, ttl, timeout time.Duration) *Policies {
	return &Policies{nc: nc, ttl: ttl, timeout: timeout, entries: map[policyKey]policyEntry{}}
}

// Policy returns the tools blocked for user in workspace. An error means
// the teams service did not answer: the caller must not run tools then.
func (c *Policies) Policy(ctx context.Context, user, workspace string, now time.Time) (protocol.ToolPolicy, error) {
	k := policyKey{user, workspace}
	c.mu.Lock()
	e, ok := c.entries[k]
	gen := c.gen
	c.mu.Unlock()
	if ok && now.Sub(e.at) < c.ttl {
		return e.policy, nil
	}
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	p, err := bus.Call(rctx, c.nc, protocol.GetToolPolicy,
		protocol.ToolPolicyRequest{User: user, Workspace: workspace})
	if err != nil {
		return protocol.ToolPolicy{}, fmt.Errorf("settings: tool policy of %s in %s: %w", user, workspace, err)
	}
	c.mu.Lock()
	if c.gen == gen {
		c.entries[k] = policyEntry{policy: p, at: now}
	}
	c.mu.Unlock()
	return p, nil
}

// changed drops the cached policies of a team ("" drops everything).
func (c *Policies) changed(team string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for k, e := range c.entries {
		// An ungoverned answer may be about a workspace that just joined a
		// team; it goes too.
		if team == "" || e.policy.Team == team || !e.policy.Governed {
			delete(c.entries, k)
		}
	}
}

// OnChanged handles protocol.PolicyChanges: the team's cached policies go.
func (c *Policies) OnChanged(ev protocol.TeamPolicyChanged) {
	c.changed(ev.Team)
}
