// Package approvalapi serves the tool-approval routes (contract §4) by
// asking the approval service over NATS.
package approvalapi

import (
	"github.com/go-chi/chi/v5"

	"github.com/waggle-os/core/services/gateway/internal/httpx"
)

// Mount adds the routes to r (mounted at /api).
func Mount(r chi.Router, d httpx.Deps) {}
