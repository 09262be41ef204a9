package bus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/protocol"
)

// Singleton is a held lease that keeps a service the only instance of its
// kind on the bus. Its owner renews it until Release.
type Singleton struct {
	kv     jetstream.KeyValue
	key    string
	holder []byte
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	rev  uint64
	lost bool // another instance holds the lease now; reported once
}

// SingletonTTL is how long a lease outlives its holder's last renewal: a
// crashed holder blocks a successor for at most this long.
const SingletonTTL = 6 * time.Second

// AcquireSingleton takes the lease name for holder, waiting (bounded by
// ctx) while another live instance holds it. Some services write files
// that only one process may own (the JSONL session store, the grant file);
// a second instance on the same bus would split their data, so it waits
// instead of serving.
//
// On a fresh or electing cluster the bucket may be created before it has a
// leader (or before the leader's interest reached this node), so writing
// or reading the lease goes unanswered for a while: that is retried with
// backoff until ctx's deadline, like every stream and bucket creation. A
// retried write whose first try landed although its answer was lost finds
// the lease naming holder already: that lease is taken, not waited out.
func AcquireSingleton(ctx context.Context, js jetstream.JetStream, name, holder string, replicas int, log *slog.Logger) (*Singleton, error) {
	if replicas <= 0 {
		replicas = 1
	}
	kv, err := EnsureKeyValue(ctx, js, jetstream.KeyValueConfig{
		Bucket: protocol.BucketSingletons, Description: "single-instance service leases",
		TTL: SingletonTTL, History: 1, Replicas: replicas,
	})
	if err != nil {
		return nil, err
	}
	what := "singleton lease " + name
	warned := false
	for {
		rev, err := createWithRetry(ctx, what, func(ctx context.Context) (uint64, error) {
			return kv.Create(ctx, name, []byte(holder))
		})
		if err == nil {
			return start(kv, name, []byte(holder), rev, log), nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			if warned && ctx.Err() != nil {
				return nil, fmt.Errorf("bus: %s is already running elsewhere on this bus: %w", name, ctx.Err())
			}
			return nil, fmt.Errorf("bus: singleton %s: %w", name, err)
		}
		e, gerr := createWithRetry(ctx, what, func(ctx context.Context) (jetstream.KeyValueEntry, error) {
			return kv.Get(ctx, name)
		})
		owner := "another instance"
		if gerr == nil {
			if bytes.Equal(e.Value(), []byte(holder)) {
				return start(kv, name, []byte(holder), e.Revision(), log), nil
			}
			owner = string(e.Value())
		}
		if !warned {
			log.Warn("waiting for the running instance to stop (only one may run)", "service", name, "holder", owner)
			warned = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("bus: %s is already running elsewhere on this bus: %w", name, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func start(kv jetstream.KeyValue, key string, holder []byte, rev uint64, log *slog.Logger) *Singleton {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Singleton{kv: kv, key: key, holder: holder, log: log, cancel: cancel, done: make(chan struct{}), rev: rev}
	go func() {
		defer close(s.done)
		t := time.NewTicker(SingletonTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.renew(ctx)
			}
		}
	}()
	return s
}

// renew extends the lease. A renewal the lease's revision refuses means
// one of three things: an earlier renewal was written but its answer lost
// (the lease is still ours), renewals failed for a whole TTL and the lease
// lapsed (taken again if nobody else did), or another instance took it
// over meanwhile: that is logged, since both may now be writing.
func (s *Singleton) renew(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, SingletonTTL/3)
	defer cancel()
	rev, err := s.kv.Update(ctx, s.key, s.holder, s.rev)
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		var e jetstream.KeyValueEntry
		switch e, err = s.kv.Get(ctx, s.key); {
		case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
			if rev, err = s.kv.Create(ctx, s.key, s.holder); err == nil {
				s.log.Warn("singleton lease lapsed and was taken again", "service", s.key)
			}
		case err != nil:
		case bytes.Equal(e.Value(), s.holder):
			rev, err = s.kv.Update(ctx, s.key, s.holder, e.Revision())
		default:
			if !s.lost {
				s.log.Error("singleton lease lost: another instance took over while this one could not renew",
					"service", s.key, "holder", string(e.Value()))
			}
			s.lost = true
			return
		}
	}
	if err == nil {
		s.rev, s.lost = rev, false
	}
}

// Release stops renewing and deletes the lease, so a successor starts at
// once.
func (s *Singleton) Release(ctx context.Context) {
	if s == nil {
		return
	}
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	// Bounded well under any shutdown budget: a JetStream that cannot
	// write (a full disk) never answers, and the lease expires by itself
	// SingletonTTL after the last renewal anyway.
	ctx, cancel := context.WithTimeout(ctx, SingletonTTL/3)
	defer cancel()
	_ = s.kv.Delete(ctx, s.key, jetstream.LastRevision(s.rev))
}

// Holder names this process in a singleton lease. Each call names a new
// instance (a sequence number after the pid): AcquireSingleton takes a
// lease that already names its holder as its own, so two instances in one
// process (a test, a service started again) must not share a name.
func Holder(service string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s on %s (pid %d, #%d)", service, host, os.Getpid(), holders.Add(1))
}

// holders numbers the holders named in this process.
var holders atomic.Uint64
