package gateway

import "time"

// consumerHeartbeat is how often the server tells the gateway's live
// consumer (the hub's) that it is alive. A consumer lives on one NATS node;
// when that node dies the gateway hears nothing — no error, just silence —
// until two heartbeats are missed, and only then is the consumer re-created
// on a live node (internal/ordered). nats.go's default of 5 s left a live
// stream silent for 10 s before the re-creation even began.
//
// The relays' private consumers keep nats.go's default: their callback
// blocks while a slow client's queue is full (flow control), which also
// stops heartbeats from being seen, and a short heartbeat would re-create
// the consumer of every slow client every two seconds.
const consumerHeartbeat = time.Second
