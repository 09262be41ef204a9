package bus

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
)

var quiet = slog.New(slog.DiscardHandler)

func jetStream(t *testing.T, srv *natstest.Server, name string) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(srv.Conn(name))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func acquire(t *testing.T, js jetstream.JetStream, holder string) *Singleton {
	t.Helper()
	s, err := AcquireSingleton(ctxT(t), js, "bustest-lease", holder, 1, quiet)
	if err != nil {
		t.Fatalf("acquire as %s: %v", holder, err)
	}
	t.Cleanup(func() { s.Release(context.Background()) })
	return s
}

func leaseHolder(t *testing.T, js jetstream.JetStream) string {
	t.Helper()
	kv, err := js.KeyValue(ctxT(t), protocol.BucketSingletons)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctxT(t), "bustest-lease")
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(e.Value())
}

// A second instance waits while the first holds the lease, and takes it
// as soon as the first releases it, long before the lease would expire.
func TestSingletonTakeoverOnRelease(t *testing.T) {
	srv := natstest.Start(t)
	jsA, jsB := jetStream(t, srv, "a"), jetStream(t, srv, "b")
	a := acquire(t, jsA, "a on host (pid 1)")
	if got := leaseHolder(t, jsB); got != "a on host (pid 1)" {
		t.Fatalf("holder %q", got)
	}

	// While a holds it, b waits until its own context gives up.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := AcquireSingleton(ctx, jsB, "bustest-lease", "b", 1, quiet)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "bustest-lease is already running elsewhere on this bus") {
		t.Fatalf("second acquire: %v", err)
	}

	got := make(chan *Singleton, 1)
	go func() {
		s, err := AcquireSingleton(ctxT(t), jsB, "bustest-lease", "b", 1, quiet)
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	a.Release(ctxT(t))
	began := time.Now()
	b := <-got
	defer b.Release(context.Background())
	if took := time.Since(began); took >= SingletonTTL {
		t.Fatalf("takeover after release took %s: waited for the expiry", took)
	}
	if h := leaseHolder(t, jsA); h != "b" {
		t.Fatalf("holder after takeover %q", h)
	}
}

// The holder renews its lease, so it outlives SingletonTTL; a holder that
// stops renewing (a crash) loses it after SingletonTTL, and its late
// Release does not delete its successor's lease.
func TestSingletonRenewalAndTakeoverOnExpiry(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the lease TTL twice")
	}
	t.Parallel()
	srv := natstest.Start(t)
	jsA, jsB := jetStream(t, srv, "a"), jetStream(t, srv, "b")
	a := acquire(t, jsA, "a")

	ctx, cancel := context.WithTimeout(context.Background(), SingletonTTL+SingletonTTL/2)
	defer cancel()
	if _, err := AcquireSingleton(ctx, jsB, "bustest-lease", "b", 1, quiet); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire while a renews: %v, want to wait it out", err)
	}

	// a crashes: no more renewals, no release.
	a.cancel()
	<-a.done
	began := time.Now()
	ctx, cancel = context.WithTimeout(context.Background(), 3*SingletonTTL)
	defer cancel()
	b, err := AcquireSingleton(ctx, jsB, "bustest-lease", "b", 1, quiet)
	if err != nil {
		t.Fatalf("takeover after a crash: %v", err)
	}
	defer b.Release(context.Background())
	if took := time.Since(began); took > SingletonTTL+2*time.Second {
		t.Fatalf("takeover took %s, want about %s", took, SingletonTTL)
	}
	a.Release(ctxT(t))
	if h := leaseHolder(t, jsB); h != "b" {
		t.Fatalf("the crashed holder's release removed b's lease: holder %q", h)
	}
}

func TestReleaseOfNoLease(t *testing.T) {
	var s *Singleton
	s.Release(context.Background())
}

func TestHolderNamesTheProcess(t *testing.T) {
	h := Holder("approval")
	if !strings.HasPrefix(h, "approval on ") || !strings.Contains(h, "(pid ") {
		t.Fatalf("holder %q", h)
	}
	// A second instance in the same process must not take the first
	// one's lease as its own.
	if h2 := Holder("approval"); h2 == h {
		t.Fatalf("two instances share the holder %q", h)
	}
}

// records is a slog.Handler that keeps the messages logged through it.
type records struct {
	mu   sync.Mutex
	msgs []string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Level.String()+" "+rec.Message)
	return nil
}

func (r *records) has(prefix string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.msgs, func(m string) bool { return strings.HasPrefix(m, prefix) })
}

// A lease that lapsed while its holder could not renew (here: removed
// under it) is taken again when nobody else took it; one another instance
// took is left alone, and the loss is logged as an error.
func TestSingletonLapsedLease(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for renewals")
	}
	t.Parallel()
	srv := natstest.Start(t)
	jsA, jsB := jetStream(t, srv, "a"), jetStream(t, srv, "b")
	log := &records{}
	a, err := AcquireSingleton(ctxT(t), jsA, "bustest-lease", "a", 1, slog.New(log))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(context.Background())
	kv, err := jsB.KeyValue(ctxT(t), protocol.BucketSingletons)
	if err != nil {
		t.Fatal(err)
	}

	if err := kv.Delete(ctxT(t), "bustest-lease"); err != nil {
		t.Fatal(err)
	}
	// The holder writes the lease before it logs, so wait for both.
	waitfor.True(t, "lapsed lease taken again and logged", func() bool {
		return leaseHolder(t, jsB) == "a" && log.has("WARN singleton lease lapsed and was taken again")
	})

	e, err := kv.Get(ctxT(t), "bustest-lease")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Update(ctxT(t), "bustest-lease", []byte("b"), e.Revision()); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, "loss reported", func() bool { return log.has("ERROR singleton lease lost") })
	if h := leaseHolder(t, jsB); h != "b" {
		t.Fatalf("the old holder overwrote the new one: holder %q", h)
	}
}

// A renewal that was written although its answer was lost leaves the
// holder with a stale revision; the next renewal finds its own value and
// goes on from there instead of letting the lease lapse.
func TestSingletonRenewalAfterALostAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for renewals")
	}
	t.Parallel()
	srv := natstest.Start(t)
	jsA := jetStream(t, srv, "a")
	log := &records{}
	a, err := AcquireSingleton(ctxT(t), jsA, "bustest-lease", "a", 1, slog.New(log))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(context.Background())
	kv, err := jsA.KeyValue(ctxT(t), protocol.BucketSingletons)
	if err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	rev, err := kv.Update(ctxT(t), "bustest-lease", []byte("a"), a.rev) // the write whose answer "was lost"
	a.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, "renewed past the stale revision", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.rev > rev
	})
	if log.has("ERROR") || log.has("WARN") {
		t.Fatal("a renewal of its own lease was reported as a loss or a lapse")
	}
}

// The approval service exited at a fresh cluster's start with "bus:
// singleton approval-grants: nats: no response from stream": the bucket
// existed but nothing answered a write to it yet. Here the bucket vanishes
// under a waiting instance (the holder crashed too), so its writes go
// unanswered; it keeps trying and takes the lease once the bucket is back,
// instead of giving up.
func TestSingletonWaitsForAnUnansweringBucket(t *testing.T) {
	srv := natstest.Start(t)
	jsA, jsB := jetStream(t, srv, "a"), jetStream(t, srv, "b")
	a := acquire(t, jsA, "a")
	a.cancel() // a crashes: it neither renews nor releases
	<-a.done

	// Every write and read of b on the lease passes through these
	// subscriptions (which answer nothing).
	writes := make(chan struct{}, 64)
	watch := srv.Conn("watch")
	for _, subject := range []string{
		"$KV." + protocol.BucketSingletons + ".bustest-lease",
		"$JS.API.DIRECT.GET.KV_" + protocol.BucketSingletons + ".>",
		"$JS.API.STREAM.MSG.GET.KV_" + protocol.BucketSingletons,
	} {
		sub, err := watch.Subscribe(subject, func(*nats.Msg) { writes <- struct{}{} })
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}

	type result struct {
		s   *Singleton
		err error
	}
	got := make(chan result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		s, err := AcquireSingleton(ctx, jsB, "bustest-lease", "b", 1, quiet)
		got <- result{s, err}
	}()
	<-writes // b found a's lease and waits

	if err := jsA.DeleteKeyValue(ctxT(t), protocol.BucketSingletons); err != nil {
		t.Fatal(err)
	}
	// Three more requests: at least one after the removal went unanswered.
	for range 3 {
		select {
		case <-writes:
		case r := <-got:
			t.Fatalf("acquire gave up while the bucket did not answer: %v", r.err)
		}
	}
	if _, err := EnsureKeyValue(ctxT(t), jsA, jetstream.KeyValueConfig{Bucket: protocol.BucketSingletons, TTL: SingletonTTL, History: 1}); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("acquire after the bucket answered again: %v", r.err)
	}
	defer r.s.Release(context.Background())
	if h := leaseHolder(t, jsA); h != "b" {
		t.Fatalf("holder %q, want b", h)
	}
}

// A lease that already names its holder (its first write landed but the
// answer was lost, and the retry found the key taken) is this process's
// own: it is taken at once, not waited out as another instance's.
func TestSingletonAcceptsItsOwnLease(t *testing.T) {
	srv := natstest.Start(t)
	js := jetStream(t, srv, "a")
	kv, err := EnsureKeyValue(ctxT(t), js, jetstream.KeyValueConfig{Bucket: protocol.BucketSingletons, TTL: SingletonTTL, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctxT(t), "bustest-lease", []byte("a")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := AcquireSingleton(ctx, js, "bustest-lease", "a", 1, quiet)
	if err != nil {
		t.Fatalf("acquire of a lease naming this holder: %v", err)
	}
	defer s.Release(context.Background())
	e, err := kv.Get(ctxT(t), "bustest-lease")
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	rev := s.rev
	s.mu.Unlock()
	if rev != e.Revision() {
		t.Fatalf("lease revision %d, want the stored %d (renewals would fail)", rev, e.Revision())
	}
}
