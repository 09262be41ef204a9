package gateway

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Liveness of the consumers a gateway reads turn events with (the hub's
// live consumer and every relay's private one). A consumer lives on one
// NATS node; when that node dies the gateway hears nothing — no error, just
// silence — until the consumer misses two heartbeats, and only then does
// nats.go re-create it (from the last event read) on a live node. The
// defaults (a 30 s pull, a 5 s heartbeat) left a live stream silent for 10 s
// and more after a node loss; these make it about two seconds, for a
// heartbeat per second per open consumer.
const (
	consumerHeartbeat = time.Second
	consumerExpiry    = 5 * time.Second
)

// liveness returns the pull options that bound how long a consumer's loss
// goes unnoticed, before opts.
func liveness(opts ...jetstream.PullConsumeOpt) []jetstream.PullConsumeOpt {
	return append([]jetstream.PullConsumeOpt{jetstream.PullExpiry(consumerExpiry), jetstream.PullHeartbeat(consumerHeartbeat)}, opts...)
}
