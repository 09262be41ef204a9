package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/protocol"
)

// TurnStreamConfig shapes the turn-event stream.
type TurnStreamConfig struct {
	// MaxAge is how long a turn's events stay replayable. Default 15m
	// (resume must work for at least 10 minutes after a turn ends).
	MaxAge time.Duration
	// Replicas is the stream's replica count on a cluster. Default 1.
	Replicas int
	// Storage is "memory" (default) or "file". Turn events are not the
	// system of record (the session store is), so memory only gives up
	// replay across a NATS restart — and saves a file write and read per
	// token, the largest cost on the token path in profiles.
	Storage string
	// MaxBytes bounds what the stream keeps, over every turn: the oldest
	// events go first, so memory does not grow with what slow clients have
	// not read (a client behind the window is told, see
	// protocol.EventStreamGap). Default DefaultTurnStreamBytes.
	MaxBytes int64
}

// DefaultTurnStreamBytes is what the turn stream keeps by default: sized
// for a desktop (a few hundred long replies), not for the longest turn.
const DefaultTurnStreamBytes = 64 << 20

// Validate checks c and fills defaults.
func (c *TurnStreamConfig) Validate() error {
	if c.MaxAge <= 0 {
		c.MaxAge = 15 * time.Minute
	}
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	if c.Storage == "" {
		c.Storage = "memory"
	}
	if c.Storage != "memory" && c.Storage != "file" {
		return fmt.Errorf("bus: turn stream storage %q: want memory or file", c.Storage)
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultTurnStreamBytes
	}
	return nil
}

// EnsureTurnStream creates or updates protocol.StreamTurns.
func EnsureTurnStream(ctx context.Context, js jetstream.JetStream, cfg TurnStreamConfig) (jetstream.Stream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	storage := jetstream.MemoryStorage
	if cfg.Storage == "file" {
		storage = jetstream.FileStorage
	}
	scfg := jetstream.StreamConfig{
		Name:        protocol.StreamTurns,
		Description: "Events of every chat turn; sequence = SSE event id",
		Subjects:    []string{protocol.SubjTurnEventsAll},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      cfg.MaxAge,
		MaxBytes:    cfg.MaxBytes,
		Storage:     storage,
		Replicas:    cfg.Replicas,
		Discard:     jetstream.DiscardOld,
		// Publishers set Nats-Msg-Id on terminal events only; a short window
		// is enough to absorb a retried publish.
		Duplicates: 2 * time.Minute,
	}
	if storage == jetstream.FileStorage && cfg.Replicas == 1 {
		// Turn events are not the system of record (the session store is):
		// they need not pay the fsync per write (sync_interval: always)
		// that the state buckets do. Replicated streams cannot opt out; their
		// raft log lets the server relax it by itself.
		scfg.PersistMode = jetstream.AsyncPersistMode
	}
	st, err := createWithRetry(ctx, func(ctx context.Context) (jetstream.Stream, error) { return js.CreateOrUpdateStream(ctx, scfg) })
	if err != nil {
		// JetStream cannot change a stream's storage type or persist mode in
		// place. Turn events are transient, so a stream of the other kind
		// (from an older configuration) is replaced rather than kept.
		if old, e := js.Stream(ctx, protocol.StreamTurns); e == nil && (old.CachedInfo().Config.Storage != storage || old.CachedInfo().Config.PersistMode != scfg.PersistMode) {
			if e := js.DeleteStream(ctx, protocol.StreamTurns); e == nil {
				// The server removes the old stream's files after it answers;
				// a new file stream of the same name can fail to create its
				// store until they are gone.
				for attempt := 0; attempt < 20; attempt++ {
					if st, err = js.CreateStream(ctx, scfg); err == nil || ctx.Err() != nil {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("bus: ensure stream %s: %w", protocol.StreamTurns, err)
	}
	return st, nil
}

// createWithRetry retries a JetStream create that timed out: right after a
// cluster starts, or with many services starting at once, the meta leader
// can take longer than the API's default timeout to answer. Bounded by ctx
// and by 60 s.
func createWithRetry[T any](ctx context.Context, create func(context.Context) (T, error)) (T, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		v, err := create(ctx)
		if err == nil || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, jetstream.ErrJetStreamNotEnabled) && !errors.Is(err, nats.ErrTimeout) {
			return v, err
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(500 * time.Millisecond):
		}
	}
}
