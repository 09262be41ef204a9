// Package forward answers HTTP requests with a bus call: what a route group
// needs from the gateway (Deps) and the typed call that writes the error
// response itself when the call fails.
package forward

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/respond"
)

// Deps is what a route group needs from the gateway.
type Deps struct {
	// NC is the gateway's bus connection.
	NC *nats.Conn
	// Log is the gateway's logger.
	Log *slog.Logger
	// BodyLimit is the largest accepted request body in bytes.
	BodyLimit int64
	// Timeout bounds one bus request.
	Timeout time.Duration
	// DataDir is the absolute data directory.
	DataDir string
}

// Unanswered is how long a call is sent again while no instance of its
// service is subscribed: on a NATS cluster, a service whose node died is
// away until it has reconnected to another node, which takes a moment.
const Unanswered = 3 * time.Second

// Call sends req to ep, bounded by d.Timeout and the request's context,
// riding out a service that is reconnecting (Unanswered) and, for a GET,
// an answer of BUS_UNAVAILABLE. On
// failure it writes the error response itself and returns ok=false, so
// handlers read:
//
//	rep, ok := forward.Call(d, w, r, protocol.ListSessions, req)
//	if !ok { return }
func Call[Req, Rep any](d Deps, w http.ResponseWriter, r *http.Request, ep protocol.Endpoint[Req, Rep], req Req) (rep Rep, ok bool) {
	ctx, cancel := context.WithTimeout(r.Context(), d.Timeout)
	defer cancel()
	opts := []bus.CallOption{bus.RetryUnanswered(Unanswered)}
	if r.Method == http.MethodGet {
		// A read changes nothing: while what it reads elects a leader
		// (a node loss), ask again until the deadline rather than 503.
		opts = append(opts, bus.RetryUnavailable())
	}
	rep, err := bus.Call(ctx, d.NC, ep, req, opts...)
	if err != nil {
		respond.Error(w, d.Log, err)
		return rep, false
	}
	return rep, true
}

// Reply is Call that writes the reply itself, as JSON with status.
func Reply[Req, Rep any](d Deps, w http.ResponseWriter, r *http.Request, status int, ep protocol.Endpoint[Req, Rep], req Req) {
	if rep, ok := Call(d, w, r, ep, req); ok {
		respond.JSON(w, status, rep)
	}
}

// Reader builds an endpoint's request from an HTTP request; its error is
// the response (a 4xx for bad input).
type Reader[Req any] func(w http.ResponseWriter, r *http.Request) (Req, error)

// Serve answers a route with one endpoint: read the request, call ep, and
// write the reply as JSON with status, passed through shape when shape is
// not nil (the contract's shape of the reply often differs from the bus
// reply). Any failure is written as the error response.
func Serve[Req, Rep any](d Deps, w http.ResponseWriter, r *http.Request, read Reader[Req], ep protocol.Endpoint[Req, Rep], status int, shape func(Rep) any) {
	req, err := read(w, r)
	if err != nil {
		respond.Error(w, d.Log, err)
		return
	}
	rep, ok := Call(d, w, r, ep, req)
	if !ok {
		return
	}
	if shape == nil {
		respond.JSON(w, status, rep)
		return
	}
	respond.JSON(w, status, shape(rep))
}

// NoInput is the Reader of an endpoint that takes protocol.Empty.
func NoInput(http.ResponseWriter, *http.Request) (protocol.Empty, error) {
	return protocol.Empty{}, nil
}

// OrEmpty is s, or an empty slice for nil: the contract's lists are [] when
// empty, never null.
func OrEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
