package gateway

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/llmprobe"
	"github.com/waggle-os/core/libs/protocol"
)

// modelServer answers what the model server says for /health, the model
// routes and agent runs. The gateway probes with the key it is configured
// with (--llm-api-key) or none; it never holds the vault's key. When the
// server refuses its probe for want of a key, a turn runner — which uses
// the vault's key — is asked for its probe instead (protocol.
// CheckModelServer), so a key saved in the app makes the model server
// "reachable" here too.
type modelServer struct {
	probe   *llmprobe.Prober
	nc      *nats.Conn
	ownKey  bool
	timeout time.Duration
}

// Check returns the model server's status.
func (m *modelServer) Check(ctx context.Context) llmprobe.Status {
	st := m.probe.Check(ctx)
	if st.Reachable || m.ownKey || !st.WantsKey() {
		return st
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	rep, err := bus.Call(ctx, m.nc, protocol.CheckModelServer, protocol.Empty{})
	if err != nil {
		// No runner answers: the gateway's own view stands.
		return st
	}
	return llmprobe.Status(rep)
}

// Available reports whether the model server answers.
func (m *modelServer) Available(ctx context.Context) bool { return m.Check(ctx).Reachable }
