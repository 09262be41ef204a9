// Package agentapi serves agent status, cost and model (contract §3) and
// agent groups (contract §7).
package agentapi

import (
	"github.com/go-chi/chi/v5"

	"github.com/waggle-os/core/services/gateway/internal/httpx"
)

// Mount adds the routes to r (mounted at /api).
func Mount(r chi.Router, d httpx.Deps) {}
