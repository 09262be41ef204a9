package sessionstore

import (
	"testing"

	"go.uber.org/goleak"
)

// The store owns goroutines (its bus handlers, the minds' embedding
// worker): Stop must end every one of them. A PostgreSQL the tests start
// themselves (no WAGGLE_TEST_POSTGRES_URL) lives as long as the test
// process, its reaper with it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/waggle-os/core/libs/pgtest.(*localCluster).start.func1"))
}
