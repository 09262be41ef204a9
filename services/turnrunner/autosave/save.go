package autosave

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

// Store saves facts through the session store.
type Store struct {
	Conn    *nats.Conn
	Timeout time.Duration // per save
	Log     *slog.Logger
}

// Save stores facts as frames of workspace (or of user's personal mind),
// one append per fact, in parallel; the store embeds them in the
// background. It returns how many were new (a duplicate of a kept frame
// is not). A failed save is logged and not counted.
func (s Store) Save(ctx context.Context, workspace, user string, facts []Fact) int {
	var saved atomic.Int32
	var wg sync.WaitGroup
	for _, f := range facts {
		wg.Go(func() {
			rep, err := bus.Call(ctx, s.Conn, protocol.SaveMemory, protocol.MemorySaveRequest{
				Workspace: workspace, User: user, Content: f.Content, Importance: f.Importance,
				Source: protocol.SourceAgentInferred, Personal: f.Personal,
			}, bus.Within(s.Timeout))
			switch {
			case err != nil:
				s.Log.Warn("auto-save memory", "err", err)
			case !rep.Duplicate:
				saved.Add(1)
			}
		})
	}
	wg.Wait()
	return int(saved.Load())
}
