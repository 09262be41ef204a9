package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// EnsureCoordinationKeyValue is CreateOrUpdateKeyValue for a bucket of
// coordination state that is rewritten every second per turn (turn
// leases, session locks) and pairs with the turn stream: on one node its
// file writes are flushed asynchronously (persist_mode async) instead of
// paying the server's fsync per write (sync_interval: always), which at
// thousands of turns would serialise every start behind the disk. An
// acknowledged write survives a process crash (it is in the page cache);
// only a power cut can lose the last ones, which costs the resume of the
// turns then in flight, as losing the turn stream (memory by default)
// does anyway. Replicated buckets are left to the server (their raft log
// relaxes the fsync by itself). An existing bucket is bound as it is.
func EnsureCoordinationKeyValue(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	if cfg.Storage != jetstream.FileStorage || cfg.Replicas > 1 {
		return js.CreateOrUpdateKeyValue(ctx, cfg)
	}
	if kv, err := js.KeyValue(ctx, cfg.Bucket); err == nil {
		return kv, nil
	} else if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, err
	}
	history := int64(max(cfg.History, 1))
	dup := 2 * time.Minute
	if cfg.TTL > 0 && cfg.TTL < dup {
		dup = cfg.TTL
	}
	// The stream a KV bucket is, as nats.go builds it, plus the persist
	// mode KeyValueConfig cannot express.
	scfg := jetstream.StreamConfig{
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
	if cfg.MaxBytes > 0 {
		scfg.MaxBytes = cfg.MaxBytes
	}
	if _, err := js.CreateStream(ctx, scfg); err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return nil, fmt.Errorf("bus: create bucket %s: %w", cfg.Bucket, err)
	}
	return js.KeyValue(ctx, cfg.Bucket)
}
