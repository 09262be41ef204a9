// Package commandapi serves the slash-command routes (contract §5) by
// asking the command service over NATS.
package commandapi

import (
	"github.com/go-chi/chi/v5"

	"github.com/waggle-os/core/services/gateway/internal/httpx"
)

// Mount adds the routes to r (mounted at /api).
func Mount(r chi.Router, d httpx.Deps) {}
