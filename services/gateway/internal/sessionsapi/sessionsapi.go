// Package sessionsapi serves the workspaces and sessions routes (contract
// §6) by asking the session store over NATS.
package sessionsapi

import (
	"github.com/go-chi/chi/v5"

	"github.com/waggle-os/core/services/gateway/internal/httpx"
)

// Mount adds the routes to r (mounted at /api).
func Mount(r chi.Router, d httpx.Deps) {}
