package bus

import (
	"testing"

	"go.uber.org/goleak"
)

// The package owns goroutines (handler goroutines, lease renewal, drain
// waits): none may outlive the Stop, Release or Drain that owns it. Every
// test closes its connections and server in cleanup, so none is running
// when the check runs.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
