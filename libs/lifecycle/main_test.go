package lifecycle

import (
	"testing"

	"go.uber.org/goleak"
)

// The manager starts and stops the services that own goroutines; none of
// its own may outlive Stop.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
