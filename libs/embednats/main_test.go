package embednats

import (
	"testing"

	"go.uber.org/goleak"
)

// The server's goroutines (nats-server's own, the storage watch) all end
// with Stop.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
