package sessionqueue

import (
	"testing"

	"go.uber.org/goleak"
)

// The replays and compactions are goroutines: Close must end every one.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
