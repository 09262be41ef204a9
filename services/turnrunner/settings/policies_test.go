package settings

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
)

func busConns(t *testing.T, names ...string) []*nats.Conn {
	t.Helper()
	dial := bus.OptionDialer(natstest.Start(t).ConnectOption())
	var out []*nats.Conn
	for _, n := range names {
		nc, err := dial(n)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		out = append(out, nc)
	}
	return out
}

func TestPolicyCache(t *testing.T) {
	conns := busConns(t, "runner", "teams")
	runner, teams := conns[0], conns[1]
	var asked atomic.Int32
	blocked := atomic.Value{}
	blocked.Store([]string{"bash"})
	sub, err := teams.Subscribe(protocol.GetToolPolicy.Subject, func(m *nats.Msg) {
		asked.Add(1)
		var req protocol.ToolPolicyRequest
		_ = json.Unmarshal(m.Data, &req)
		body, _ := json.Marshal(protocol.ToolPolicy{Governed: true, Team: "acme", Role: "member", BlockedTools: blocked.Load().([]string)})
		_ = m.Respond(body)
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = teams.Flush()
	c := NewPolicies(runner, 5*time.Second, time.Second)
	ctx := context.Background()
	now := time.Now()

	p, err := c.Policy(ctx, "alice", "ws", now)
	if err != nil || !p.Blocks("bash") || asked.Load() != 1 {
		t.Fatalf("first get: %+v %v asked=%d", p, err, asked.Load())
	}
	// Cached within the TTL, per (user, workspace).
	if _, err := c.Policy(ctx, "alice", "ws", now.Add(4*time.Second)); err != nil || asked.Load() != 1 {
		t.Fatalf("cached get asked again: %d %v", asked.Load(), err)
	}
	if _, err := c.Policy(ctx, "bob", "ws", now); err != nil || asked.Load() != 2 {
		t.Fatalf("another user must be asked: %d", asked.Load())
	}
	// A change of the team drops its entries at once.
	blocked.Store([]string{"web_fetch"})
	c.changed("acme")
	p, err = c.Policy(ctx, "alice", "ws", now.Add(time.Second))
	if err != nil || p.Blocks("bash") || !p.Blocks("web_fetch") {
		t.Fatalf("after change: %+v %v", p, err)
	}
	// Expired entries are asked again.
	before := asked.Load()
	if _, err := c.Policy(ctx, "alice", "ws", now.Add(10*time.Second)); err != nil || asked.Load() != before+1 {
		t.Fatalf("expired entry not refreshed")
	}
	// No teams service: an error (the turn fails closed), not an empty policy.
	_ = sub.Unsubscribe()
	_ = teams.Flush()
	if _, err := c.Policy(ctx, "carol", "ws", now); err == nil || !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("no teams service: %v", err)
	}
}
