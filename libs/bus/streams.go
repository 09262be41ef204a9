package bus

import (
	"context"
	"fmt"
	"time"

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
	// Memory keeps events in memory instead of files. Turn events are not
	// the system of record (the session store is), so this only trades
	// replay across a NATS restart for speed.
	Memory bool
}

// EnsureTurnStream creates or updates protocol.StreamTurns.
func EnsureTurnStream(ctx context.Context, js jetstream.JetStream, cfg TurnStreamConfig) (jetstream.Stream, error) {
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 15 * time.Minute
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	storage := jetstream.FileStorage
	if cfg.Memory {
		storage = jetstream.MemoryStorage
	}
	st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        protocol.StreamTurns,
		Description: "Events of every chat turn; sequence = SSE event id",
		Subjects:    []string{protocol.SubjTurnEventsAll},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      cfg.MaxAge,
		Storage:     storage,
		Replicas:    cfg.Replicas,
		Discard:     jetstream.DiscardOld,
		// Publishers set Nats-Msg-Id on terminal events only; a short window
		// is enough to absorb a retried publish.
		Duplicates: 2 * time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("bus: ensure stream %s: %w", protocol.StreamTurns, err)
	}
	return st, nil
}
