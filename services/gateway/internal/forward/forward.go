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

// Call sends req to ep, bounded by d.Timeout and the request's context. On
// failure it writes the error response itself and returns ok=false, so
// handlers read:
//
//	rep, ok := forward.Call(d, w, r, protocol.ListSessions, req)
//	if !ok { return }
func Call[Req, Rep any](d Deps, w http.ResponseWriter, r *http.Request, ep protocol.Endpoint[Req, Rep], req Req) (rep Rep, ok bool) {
	ctx, cancel := context.WithTimeout(r.Context(), d.Timeout)
	defer cancel()
	rep, err := bus.Call(ctx, d.NC, ep, req)
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
