package bus

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream API error codes that mean "not now" on a forming or electing
// cluster (nats-server's JSClusterNoPeersErrF, JSClusterNotAvailErr,
// JSClusterNotLeaderErr and JSStreamOfflineErr).
const (
	jsErrNoPeers       = 10005
	jsErrNotAvailable  = 10008
	jsErrNotLeader     = 10009
	jsErrStreamOffline = 10118
)

// Unavailable reports whether err is the bus saying it cannot answer for
// now — the connection is away, or a stream or bucket has no leader while
// the cluster elects one — rather than a failure of the request: the same
// request may well succeed in a few seconds without anyone changing
// anything. Such failures are answered 503 BUS_UNAVAILABLE, never 500.
//
// During an election a JetStream request is often not answered at all:
// nats.go reports no responders, "no response from stream", or a timeout
// (context.DeadlineExceeded of the request's own bound).
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, nats.ErrDisconnected) || errors.Is(err, nats.ErrConnectionReconnecting) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jsErrNoPeers, jsErrNotAvailable, jsErrNotLeader, jsErrStreamOffline:
			return true
		}
	}
	var legacyErr *nats.APIError
	if errors.As(err, &legacyErr) {
		switch legacyErr.ErrorCode {
		case jsErrNoPeers, jsErrNotAvailable, jsErrNotLeader, jsErrStreamOffline:
			return true
		}
	}
	return false
}
