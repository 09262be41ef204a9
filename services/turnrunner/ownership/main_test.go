package ownership

import (
	"testing"

	"go.uber.org/goleak"
)

// The queue's replays and compactions and the Owner's loops are
// goroutines: Close and Stop must end every one.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
