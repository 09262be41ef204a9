package ownership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
)

// EnsureBucket creates (or updates) a key-value bucket of coordination
// state that costs no fsync per write: the runners' heartbeats, rewritten
// every second (a write lost in a crash of NATS is replaced by the next).
// The turn leases are not such state yet (see the recovery rule).
//
// A single-replica bucket is made as its stream by hand, with the same
// configuration nats.go gives a bucket plus the asynchronous persist mode:
// a write is acknowledged once it is in the server's memory and reaches
// the file within milliseconds, instead of after an fsync
// (sync_interval: always is for the session store's kind of data). A
// runner's crash loses nothing (the server keeps it); what a crash of the
// NATS server itself may lose, and how that is recovered, is the recovery
// rule in docs/architecture.md ("Recovery after a crash"). A replicated bucket
// is left to its raft log, which already relaxes the fsync by itself
// (JetStream refuses the async mode on replicated streams).
//
// A bucket made by an older version with the default persist mode is kept
// as it is (JetStream cannot change a stream's persist mode, and its
// leases must not be lost to an upgrade); it still works, just slower.
func EnsureBucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig, log *slog.Logger) (jetstream.KeyValue, error) {
	if cfg.Replicas > 1 || cfg.Storage != jetstream.FileStorage {
		return bus.EnsureKeyValue(ctx, js, cfg)
	}
	if log == nil {
		log = slog.Default()
	}
	scfg := bucketStream(cfg)
	st, err := js.Stream(ctx, scfg.Name)
	switch {
	case err == nil && st.CachedInfo().Config.PersistMode != jetstream.AsyncPersistMode:
		log.Info("keeping a coordination bucket made with an fsync per write (made by an older version)", "bucket", cfg.Bucket)
		return bus.EnsureKeyValue(ctx, js, cfg)
	case err == nil, errors.Is(err, jetstream.ErrStreamNotFound):
		// Create it, or update its limits (TTL, description).
	default:
		// Not answered yet (a forming cluster): EnsureStream retries.
	}
	if _, err := bus.EnsureStream(ctx, js, scfg); err != nil {
		return nil, fmt.Errorf("ownership: bucket %s: %w", cfg.Bucket, err)
	}
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("ownership: bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}

// bucketStream is the stream of a single-replica bucket: what nats.go's
// CreateKeyValue makes of cfg (the fields Waggle's buckets use), with the
// asynchronous persist mode.
func bucketStream(cfg jetstream.KeyValueConfig) jetstream.StreamConfig {
	history := int64(max(cfg.History, 1))
	dup := 2 * time.Minute
	if cfg.TTL > 0 && cfg.TTL < dup {
		dup = cfg.TTL
	}
	return jetstream.StreamConfig{
		Name:              "KV_" + cfg.Bucket,
		Description:       cfg.Description,
		Subjects:          []string{"$KV." + cfg.Bucket + ".>"},
		MaxMsgsPerSubject: history,
		MaxBytes:          -1,
		MaxAge:            cfg.TTL,
		MaxMsgSize:        -1,
		Storage:           jetstream.FileStorage,
		Replicas:          1,
		AllowRollup:       true,
		DenyDelete:        true,
		Duplicates:        dup,
		MaxMsgs:           -1,
		MaxConsumers:      -1,
		AllowDirect:       true,
		Discard:           jetstream.DiscardNew,
		PersistMode:       jetstream.AsyncPersistMode,
	}
}
