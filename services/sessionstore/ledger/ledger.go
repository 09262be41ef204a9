// Package ledger is the session store's usage ledger and agent settings:
// per-turn token usage summed over every runner and kept across restarts.
package ledger

import (
	"log/slog"

	"github.com/waggle-os/core/libs/bus"
)

// Config configures the ledger.
type Config struct {
	// DataDir is the data directory. Required.
	DataDir string
}

// Register adds the ledger's endpoints to svc.
func Register(svc *bus.Service, cfg Config, log *slog.Logger) error { return nil }
