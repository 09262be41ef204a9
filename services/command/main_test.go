package command

import (
	"testing"

	"go.uber.org/goleak"
)

// The service owns goroutines (group runs and their member turns' event
// readers, its bus handlers): Stop must end every one of them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
