package turn

import (
	"testing"

	"go.uber.org/goleak"
)

// A turn owns goroutines (the user message's store request, the usage
// record): each has ended once Run and Close returned.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
