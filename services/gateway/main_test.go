package gateway

import (
	"testing"

	"go.uber.org/goleak"
)

// The gateway owns goroutines (SSE relays and their keep-alives, the bus
// watch, the HTTP server): Stop must end every one of them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
