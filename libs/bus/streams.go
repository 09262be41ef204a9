package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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

// EnsureTurnStream creates or updates protocol.StreamTurns, and does so
// again every time js's connection comes back after losing its server: a
// memory stream does not survive a NATS restart, and every gateway and
// runner that uses it re-creates it (whoever comes first; the others find
// it).
//
// A memory stream starts its sequence at its creation time in
// microseconds rather than 1. Sequences are SSE event ids and the cursors
// of ordered consumers; a stream re-created after a restart then continues
// above every id a client, relay or consumer saw before (an ordered
// consumer resumes at its last sequence + 1 and would otherwise skip the
// new stream's first events). Microseconds stay below 2^53 (JavaScript's
// exact integers) until the year 2255.
func EnsureTurnStream(ctx context.Context, js jetstream.JetStream, cfg TurnStreamConfig) (jetstream.Stream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	st, err := ensureTurnStream(ctx, js, cfg)
	if err != nil {
		return nil, err
	}
	OnReconnect(js.Conn(), "turn-stream", func(ctx context.Context) {
		if _, err := ensureTurnStream(ctx, js, cfg); err != nil {
			slog.Warn("bus: re-creating the turn stream after a reconnect", "err", err)
		}
	})
	return st, nil
}

func ensureTurnStream(ctx context.Context, js jetstream.JetStream, cfg TurnStreamConfig) (jetstream.Stream, error) {
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
	// A few rounds: another process may create or replace the stream
	// between our look and our write. Only replacing counts against the
	// limit; a creation that finds the stream made by another process looks
	// again after a pause, for a while: on a fresh cluster the new stream
	// answers "not found" until its own raft group has formed.
	replaced, raced := 0, 0
	for replaced < 4 && raced < maxCreateRaces {
		st, err := createWithRetry(ctx, "stream "+protocol.StreamTurns, func(ctx context.Context) (jetstream.Stream, error) { return js.Stream(ctx, protocol.StreamTurns) })
		switch {
		case err == nil:
			old := st.CachedInfo().Config
			if old.Storage != storage || old.PersistMode != scfg.PersistMode {
				// JetStream cannot change a stream's storage type (or persist
				// mode) in place.
				// Turn events are transient, so a stream of the other kind
				// (from an older configuration) is replaced rather than
				// kept.
				if err := js.DeleteStream(ctx, protocol.StreamTurns); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
					return nil, fmt.Errorf("bus: replace stream %s: %w", protocol.StreamTurns, err)
				}
				replaced++
				continue
			}
			// The first sequence is fixed at creation.
			scfg.FirstSeq = old.FirstSeq
			st, err = createWithRetry(ctx, "stream "+protocol.StreamTurns, func(ctx context.Context) (jetstream.Stream, error) { return js.UpdateStream(ctx, scfg) })
			if err != nil {
				return nil, fmt.Errorf("bus: update stream %s: %w", protocol.StreamTurns, err)
			}
			return st, nil
		case errors.Is(err, jetstream.ErrStreamNotFound):
			scfg.FirstSeq = 0
			if storage == jetstream.MemoryStorage {
				scfg.FirstSeq = uint64(time.Now().UnixMicro())
			}
			st, err = createWithRetry(ctx, "stream "+protocol.StreamTurns, func(ctx context.Context) (jetstream.Stream, error) { return js.CreateStream(ctx, scfg) })
			// The server removes a replaced file stream's files after it
			// answers; a new one of the same name can fail to create its
			// store until they are gone.
			for attempt := 0; err != nil && storage == jetstream.FileStorage && attempt < 20 &&
				!errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) && ctx.Err() == nil; attempt++ {
				time.Sleep(100 * time.Millisecond)
				st, err = js.CreateStream(ctx, scfg)
			}
			if err == nil {
				return st, nil
			}
			// Another process created it first (with its own first
			// sequence): take that one.
			if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				return nil, fmt.Errorf("bus: create stream %s: %w", protocol.StreamTurns, err)
			}
			raced++
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("bus: ensure stream %s: %w", protocol.StreamTurns, ctx.Err())
			case <-time.After(min(time.Duration(raced)*100*time.Millisecond, time.Second)):
			}
		default:
			return nil, fmt.Errorf("bus: ensure stream %s: %w", protocol.StreamTurns, err)
		}
	}
	return nil, fmt.Errorf("bus: ensure stream %s: other processes keep changing it (do they disagree on --turn-stream-storage?)", protocol.StreamTurns)
}

// maxCreateRaces bounds how often ensureTurnStream finds the stream
// created by another process and still cannot see it (about 40 s of
// pauses).
const maxCreateRaces = 45

// createAttemptTimeout bounds one try of createWithRetry. During an
// election the cluster may drop a JetStream API request without an answer;
// a try bounded only by the caller's whole budget would then use all of
// it on one request and never see the new leader. The first try gets
// firstAttemptTimeout (a create answers in milliseconds once there is a
// leader), each later one twice the one before, up to createAttemptTimeout
// (a loaded cluster placing a replicated stream may need seconds): on a
// fresh cluster a start no longer waits out 5 s per stream for a request
// sent before its first leader was elected.
const (
	firstAttemptTimeout  = time.Second
	createAttemptTimeout = 5 * time.Second
)

// createWithRetry retries a JetStream create, look-up or update that the
// cluster could not answer yet: right after a cluster starts, while it
// elects a meta leader, or with many processes creating the same replicated
// stream or bucket at once, the API times out or says it is temporarily
// unavailable for seconds. Each try is bounded by createAttemptTimeout; it
// backs off from 50 ms to 2 s between tries, bounded by ctx (the caller's
// start deadline) and by 60 s; any other error is returned at once. A wait
// is logged (what it waits for, and why) every waitReport, so an operator
// sees a start that waits for its cluster rather than one that hangs.
func createWithRetry[T any](ctx context.Context, what string, create func(context.Context) (T, error)) (T, error) {
	began := time.Now()
	deadline := began.Add(time.Minute)
	wait := 50 * time.Millisecond
	attempt := firstAttemptTimeout
	var reported time.Time
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		v, err := create(actx)
		cancel()
		attempt = min(2*attempt, createAttemptTimeout)
		if err == nil || !Unavailable(err) {
			if err == nil && !reported.IsZero() {
				slog.Info("bus: the cluster answered", "for", what, "waited", time.Since(began).Round(time.Millisecond).String())
			}
			return v, err
		}
		if ctx.Err() != nil || time.Now().Add(wait).After(deadline) {
			return v, err
		}
		if time.Since(reported) >= waitReport {
			reported = time.Now()
			slog.Info("bus: waiting for the cluster to answer (a JetStream leader is being elected?)", "for", what,
				"waited", time.Since(began).Round(time.Millisecond).String(), "err", err)
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// waitReport is how often createWithRetry logs that it still waits.
const waitReport = 5 * time.Second

// EnsureStream creates a stream or updates its configuration, retrying
// (with backoff, bounded by ctx) while the cluster cannot answer yet.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	st, err := createWithRetry(ctx, "stream "+cfg.Name, func(ctx context.Context) (jetstream.Stream, error) {
		return js.CreateOrUpdateStream(ctx, cfg)
	})
	if err != nil {
		return nil, fmt.Errorf("bus: stream %s: %w", cfg.Name, err)
	}
	return st, nil
}

// EnsureKeyValue creates a bucket or updates its configuration, retrying
// (with backoff, bounded by ctx) while the cluster cannot answer yet, so a
// process starting beside others on a fresh or electing cluster waits for
// it instead of exiting.
func EnsureKeyValue(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := createWithRetry(ctx, "bucket "+cfg.Bucket, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, cfg)
	})
	if err != nil {
		return nil, fmt.Errorf("bus: bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}

// OrphanedTurnEnd is the terminal event that ends a turn no runner is left
// to finish: an error event with protocol.TurnOrphanedText, carrying the
// turn's end id so the stream keeps one end even if the turn's own runner
// ends it at the same moment.
func OrphanedTurnEnd(turnID string) *nats.Msg {
	body, _ := json.Marshal(protocol.ErrorData{Message: protocol.TurnOrphanedText})
	m := &nats.Msg{Subject: protocol.TurnEvents(turnID), Data: body, Header: nats.Header{}}
	m.Header.Set(protocol.HeaderEvent, protocol.EventError)
	m.Header.Set(jetstream.MsgIDHeader, protocol.TurnEndMsgID(turnID))
	return m
}
