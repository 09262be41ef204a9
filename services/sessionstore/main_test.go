package sessionstore

import (
	"testing"

	"go.uber.org/goleak"
)

// The store owns goroutines (its bus handlers, the minds' embedding
// worker): Stop must end every one of them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
