package ownership

import (
	"context"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/natstest"
)

// env is one test's embedded NATS server; each runner under test has a
// connection of its own.
type env struct {
	t   *testing.T
	srv *natstest.Server
}

func newEnv(t *testing.T) *env { return &env{t: t, srv: natstest.Start(t)} }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
