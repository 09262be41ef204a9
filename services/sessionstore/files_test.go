package sessionstore_test

import (
	"log/slog"
	"testing"

	"github.com/waggle-os/core/services/sessionstore"
	"github.com/waggle-os/core/services/sessionstore/storetest"
)

// TestFilesConformance runs the store conformance suite on the JSONL files.
func TestFilesConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) sessionstore.Store {
		return sessionstore.NewFiles(t.TempDir(), nil, slog.New(slog.DiscardHandler))
	})
}
