// Package approvalgate is the turn runner's side of tool approvals: it
// implements agent.Gate by asking the approval service whether a tool call
// may run, and waits for a human decision when one is needed.
package approvalgate

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
)

// Emitter publishes an event into the turn's stream.
type Emitter interface {
	Emit(event string, data any) error
}

// Config configures a Gate.
type Config struct {
	// Timeout is how long an approval may wait before it is denied as timed
	// out. Default 5m.
	Timeout time.Duration
}

// Turn identifies the turn a Gate guards.
type Turn struct {
	TurnID    string
	Workspace string
	Session   string
	Autonomy  protocol.Autonomy
}

// Gate guards the tool calls of one turn.
type Gate struct {
	nc   *nats.Conn
	turn Turn
	emit Emitter
	cfg  Config
}

// New returns a gate for one turn.
func New(nc *nats.Conn, turn Turn, emit Emitter, cfg Config) *Gate {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Minute
	}
	return &Gate{nc: nc, turn: turn, emit: emit, cfg: cfg}
}

// Check decides whether call may run. (Placeholder until the approval
// service lands: everything runs.)
func (g *Gate) Check(ctx context.Context, call agent.ToolCall) (agent.Verdict, error) {
	return agent.Verdict{Allow: true}, nil
}

// Close denies every approval of this turn that is still pending; the
// runner calls it when the turn ends or is cancelled.
func (g *Gate) Close(ctx context.Context) {}
