package bus

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// ReconnectHookTimeout bounds one run of a reconnect hook.
const ReconnectHookTimeout = 30 * time.Second

// hooks holds the reconnect hooks of every connection made by a Dialer.
// A connection's entry lives until the connection closes.
var hooks = struct {
	sync.Mutex
	byConn map[*nats.Conn]*connHooks
}{byConn: map[*nats.Conn]*connHooks{}}

// connHooks are one connection's hooks, by name, and the context their
// runs are bounded by (cancelled when the connection closes).
type connHooks struct {
	fns    map[string]func(context.Context)
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// OnReconnect runs fn every time nc reconnects after losing its server, in
// its own goroutine, bounded by ReconnectHookTimeout and by nc closing. A
// NATS server that restarts loses what it kept in memory (memory streams
// and buckets), so whoever created such an asset re-creates it here. Hooks
// are keyed by name: registering a name again replaces the hook. It only
// has an effect on connections made by a Dialer of this package.
func OnReconnect(nc *nats.Conn, name string, fn func(context.Context)) {
	hooks.Lock()
	defer hooks.Unlock()
	h := hooks.byConn[nc]
	if h == nil {
		if nc.IsClosed() {
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		h = &connHooks{fns: map[string]func(context.Context){}, ctx: ctx, cancel: cancel}
		hooks.byConn[nc] = h
	}
	h.fns[name] = fn
}

// runReconnectHooks starts nc's hooks (the connection's ReconnectHandler).
// It must not block: nats.go calls it on the connection's callback
// goroutine.
func runReconnectHooks(nc *nats.Conn) {
	hooks.Lock()
	defer hooks.Unlock()
	h := hooks.byConn[nc]
	if h == nil {
		return
	}
	for name, fn := range h.fns {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			ctx, cancel := context.WithTimeout(h.ctx, ReconnectHookTimeout)
			defer cancel()
			began := time.Now()
			fn(ctx)
			slog.Debug("bus: reconnect hook ran", "hook", name, "took", time.Since(began))
		}()
	}
}

// dropReconnectHooks stops nc's running hooks and forgets them (the
// connection's ClosedHandler).
func dropReconnectHooks(nc *nats.Conn) {
	hooks.Lock()
	h := hooks.byConn[nc]
	delete(hooks.byConn, nc)
	hooks.Unlock()
	if h != nil {
		h.cancel()
		// Called on the callback goroutine: the hooks are already
		// cancelled, so waiting here is short, and nothing they started
		// outlives the connection.
		h.wg.Wait()
	}
}

// WaitConnected returns nil once nc is connected (at once when it is), or
// ctx's error. Work that must not be lost when the bus drops mid-way — a
// partial reply to persist, a lock to release — can wait for the bus to
// come back instead of failing at once (nothing is buffered while
// disconnected).
func WaitConnected(ctx context.Context, nc *nats.Conn) error {
	if nc.IsConnected() {
		return nil
	}
	t := time.NewTicker(25 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if nc.IsConnected() {
				return nil
			}
			if nc.IsClosed() {
				return nats.ErrConnectionClosed
			}
		}
	}
}
