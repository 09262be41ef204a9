// Package groups stores agent groups (<data-dir>/agent-groups.json) for
// the session store.
package groups

import (
	"log/slog"

	"github.com/waggle-os/core/libs/bus"
)

// Config configures the group store.
type Config struct {
	// DataDir is the data directory. Required.
	DataDir string
}

// Register adds the group endpoints to svc.
func Register(svc *bus.Service, cfg Config, log *slog.Logger) error { return nil }
