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
// state that costs no fsync per write: the turn leases and the runners'
// heartbeats.
//
// A single-replica bucket is made as its stream by hand, with the same
// configuration nats.go gives a bucket plus the asynchronous persist mode:
// a write is acknowledged once it is in the server's memory and reaches
// the file within milliseconds (nats-server batches the flush, up to
// 8 ms), instead of after an fsync (sync_interval: always is for the
// session store's kind of data). A runner's crash loses nothing (the
// server keeps it); what a crash of the NATS server itself may lose, and
// how that is recovered, is the recovery rule in docs/architecture.md
// ("Recovery after a crash"). A replicated bucket is made as nats.go
// makes it: JetStream refuses the async mode on replicated streams, and
// with sync_interval: always each write is fsynced in the raft log of
// every node (see docs/operations.md, "Durability").
//
// A bucket made by an older version with the default persist mode is kept
// as it is (JetStream cannot change a stream's persist mode, and its
// entries must not be lost to an upgrade); it still works, just slower.
// Unless replace, when given, says it is safe to replace it (nobody else
// uses it now): then its entries are read, the bucket is made again
// without the fsync, and they are written back (replaceBucket).
func EnsureBucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig, log *slog.Logger, replace ...func(context.Context) (bool, error)) (jetstream.KeyValue, error) {
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
		if len(replace) > 0 {
			ok, err := replace[0](ctx)
			if err != nil {
				return nil, fmt.Errorf("ownership: bucket %s: %w", cfg.Bucket, err)
			}
			if ok {
				return replaceBucket(ctx, js, cfg, scfg, log)
			}
		}
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

// replaceBucket makes an older bucket of cfg, with its fsync per write,
// again in the asynchronous persist mode: it reads every entry, deletes
// the bucket, makes the new one and writes the entries back (with new
// revisions: nobody holds one, the caller made sure nobody uses the
// bucket). A crash between the delete and the last write back loses the
// entries not yet written: the price of an upgrade's first start, once.
func replaceBucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig, scfg jetstream.StreamConfig, log *slog.Logger) (jetstream.KeyValue, error) {
	old, err := js.KeyValue(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("ownership: bucket %s: %w", cfg.Bucket, err)
	}
	type entry struct {
		key   string
		value []byte
	}
	var entries []entry
	keys, err := old.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("ownership: bucket %s: list: %w", cfg.Bucket, err)
	}
	for key := range keys.Keys() {
		e, err := old.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			continue
		case err != nil:
			return nil, fmt.Errorf("ownership: bucket %s: read %s: %w", cfg.Bucket, key, err)
		}
		entries = append(entries, entry{key, e.Value()})
	}
	if err := js.DeleteStream(ctx, scfg.Name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("ownership: bucket %s: delete the older bucket: %w", cfg.Bucket, err)
	}
	// The server removes a deleted file stream's files after it answers;
	// a new stream of the same name cannot make its store until they are
	// gone.
	for attempt := 0; ; attempt++ {
		_, err = js.CreateStream(ctx, scfg)
		if err == nil || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) || attempt == 50 || ctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return nil, fmt.Errorf("ownership: bucket %s: make it again: %w", cfg.Bucket, err)
	}
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("ownership: bucket %s: %w", cfg.Bucket, err)
	}
	for _, e := range entries {
		if _, err := kv.Create(ctx, e.key, e.value); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("ownership: bucket %s: write back %s: %w", cfg.Bucket, e.key, err)
		}
	}
	log.Info("made a coordination bucket of an older version again without an fsync per write", "bucket", cfg.Bucket, "entries", len(entries))
	return kv, nil
}
