package approval

import (
	"testing"

	"go.uber.org/goleak"
)

// The service owns goroutines (the sweeper, its bus handlers, the grant
// lease's renewal): Stop must end every one of them. The one exception is
// by design: without WAGGLE_TEST_POSTGRES_URL, libs/pgtest runs one
// PostgreSQL for the whole test process and reaps it when the process
// exits (the goroutine reaping it is localCluster.start's).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/waggle-os/core/libs/pgtest.(*localCluster).start.func1"))
}
