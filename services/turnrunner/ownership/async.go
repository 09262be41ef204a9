package ownership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/services/turnrunner/ownership/sessionqueue"
)

// dropFsyncedWhenIdle removes the lease bucket and the session queue
// stream when an older version made them with an fsync per write and no
// turn has a lease, so that Open makes them again without one (JetStream
// cannot change a stream's persist mode). With no lease there is no turn
// accepted and unfinished that NATS knows of — a turn in a session's queue
// has a lease, and one without is passed over — so nothing of value is
// removed; a turn the store records as open is put back by package recovery. With a
// lease, both are kept as they are (correct, only slower) until a start
// finds none.
func dropFsyncedWhenIdle(ctx context.Context, js jetstream.JetStream, log *slog.Logger) error {
	fsynced := func(name string) bool {
		st, err := js.Stream(ctx, name)
		return err == nil && st.CachedInfo().Config.PersistMode != jetstream.AsyncPersistMode
	}
	leaseStream := "KV_" + BucketLeases
	if !fsynced(leaseStream) && !fsynced(sessionqueue.StreamName) {
		return nil
	}
	if kv, err := js.KeyValue(ctx, BucketLeases); err == nil {
		keys, err := kv.ListKeys(ctx)
		if err != nil {
			return fmt.Errorf("ownership: list leases: %w", err)
		}
		for range keys.Keys() {
			log.Info("keeping the turn leases and session queues made with an fsync per write (a turn is open); they are made without one at a start with no open turn")
			_ = keys.Stop()
			return nil
		}
	}
	for _, name := range []string{leaseStream, sessionqueue.StreamName} {
		if !fsynced(name) {
			continue
		}
		if err := js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("ownership: remove %s to make it without an fsync per write: %w", name, err)
		}
		log.Info("made a coordination stream again without an fsync per write (no turn was open)", "stream", name)
	}
	return nil
}
