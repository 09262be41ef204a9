package turnrunner

import (
	"testing"

	"go.uber.org/goleak"
)

// The runner owns goroutines (turns, their publishers, leases and
// heartbeats, presence watches, bus handlers): Stop must end every one.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
