package sessionqueue

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/waitfor"
)

// testPoll keeps the holder checks fast: the tests run in milliseconds.
const testPoll = 20 * time.Millisecond

// liveSet is the Alive of the tests: turns not marked dead are alive.
type liveSet struct {
	mu   sync.Mutex
	dead map[string]bool
}

func (l *liveSet) kill(turn string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dead[turn] = true
}

func (l *liveSet) alive(_ context.Context, turn string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.dead[turn], nil
}

type env struct {
	t    *testing.T
	srv  *natstest.Server
	live *liveSet
}

func newEnv(t *testing.T) *env {
	return &env{t: t, srv: natstest.Start(t), live: &liveSet{dead: map[string]bool{}}}
}

// queue opens a handle on its own connection (a runner of its own).
func (e *env) queue(nc *nats.Conn) *Queue {
	e.t.Helper()
	if nc == nil {
		nc = e.srv.Conn("runner")
	}
	js, err := jetstream.New(nc)
	if err != nil {
		e.t.Fatal(err)
	}
	q, err := Open(context.Background(), js, Config{Alive: e.live.alive, Poll: testPoll})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(q.Close)
	return q
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// logLen is how many messages the session's log holds.
func logLen(t *testing.T, q *Queue, s Session) uint64 {
	t.Helper()
	info, err := q.stream.Info(context.Background(), jetstream.WithSubjectFilter(s.subject()))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[s.subject()]
}

// TestManyJoinersGetDistinctOrderedPositions: turns joining one session at
// once through three runners all get a place (none is refused, whatever
// the contention), and they hold the session one at a time, in the order
// of their positions.
func TestManyJoinersGetDistinctOrderedPositions(t *testing.T) {
	e := newEnv(t)
	qs := []*Queue{e.queue(nil), e.queue(nil), e.queue(nil)}
	s := Session{Workspace: "ws", Session: "race"}
	ctx := ctxT(t)
	const n = 60
	seqs := make([]uint64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			q := qs[i%len(qs)]
			seq, err := q.Join(ctx, s, fmt.Sprint("t", i), fmt.Sprint("t", i), false)
			if err != nil {
				t.Errorf("join %d: %v", i, err)
			}
			seqs[i] = seq
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if sorted := slices.Sorted(slices.Values(seqs)); slices.Compact(sorted) == nil || len(slices.Compact(slices.Clone(sorted))) != n {
		t.Fatalf("positions are not distinct: %v", seqs)
	}
	var (
		mu      sync.Mutex
		order   []uint64
		holding atomic.Int32
	)
	for i := range n {
		wg.Go(func() {
			q := qs[i%len(qs)]
			if err := q.Wait(ctx, s, seqs[i]); err != nil {
				t.Errorf("wait %d: %v", i, err)
				return
			}
			if h := holding.Add(1); h != 1 {
				t.Errorf("%d turns hold the session at once", h)
			}
			mu.Lock()
			order = append(order, seqs[i])
			mu.Unlock()
			holding.Add(-1)
			if err := q.Leave(ctx, s, seqs[i]); err != nil {
				t.Errorf("leave %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if !slices.IsSorted(order) || len(order) != n {
		t.Fatalf("held in the order %v, want the positions' order", order)
	}
	// Idle again: the log is compacted down to the last done record.
	waitfor.True(t, "the idle session's log compacted", func() bool { return logLen(t, qs[0], s) == 1 })
}

// TestRetriedJoinIsOneEntry: a join whose acknowledgement was lost is
// published again with the same message id; the session's queue has one
// entry for it, at the first position, and leaving it frees the session.
func TestRetriedJoinIsOneEntry(t *testing.T) {
	e := newEnv(t)
	q := e.queue(nil)
	s := Session{Workspace: "ws", Session: "dup"}
	ctx := ctxT(t)
	first, err := q.Join(ctx, s, "a", "a-join", false)
	if err != nil {
		t.Fatal(err)
	}
	again, err := q.Join(ctx, s, "a", "a-join", false)
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Fatalf("the retried join is at %d, the first at %d", again, first)
	}
	if held, err := q.Holds(ctx, s, first); err != nil || !held {
		t.Fatalf("holds: %v %v", held, err)
	}
	if err := q.Leave(ctx, s, first); err != nil {
		t.Fatal(err)
	}
	b, err := q.Join(ctx, s, "b", "b-join", false)
	if err != nil {
		t.Fatal(err)
	}
	if holder, _, err := q.Holder(ctx, s, b); err != nil || holder != "b" {
		t.Fatalf("holder %q %v, want b", holder, err)
	}
}

// TestCrashBetweenJoinAndLeave: a turn joined and its runner died before
// it left (its lease is gone). The turns behind it are not stuck: a runner
// with a turn waiting passes the dead holder over, once.
func TestCrashBetweenJoinAndLeave(t *testing.T) {
	e := newEnv(t)
	dead, q := e.queue(nil), e.queue(nil)
	s := Session{Workspace: "ws", Session: "crash"}
	ctx := ctxT(t)
	_, err := dead.Join(ctx, s, "a", "a", false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := q.Join(ctx, s, "b", "b", false)
	if err != nil {
		t.Fatal(err)
	}
	c, err := q.Join(ctx, s, "c", "c", false)
	if err != nil {
		t.Fatal(err)
	}
	dead.Close()
	e.live.kill("a")
	if err := q.Wait(ctx, s, b); err != nil {
		t.Fatalf("b waits behind a dead holder: %v", err)
	}
	if holder, _, err := q.Holder(ctx, s, c); err != nil || holder != "b" {
		t.Fatalf("holder %q %v, want b", holder, err)
	}
	if err := q.Leave(ctx, s, b); err != nil {
		t.Fatal(err)
	}
	if err := q.Wait(ctx, s, c); err != nil {
		t.Fatal(err)
	}
	if seq, err := q.Find(ctx, s, "a"); err != nil || seq != 0 {
		t.Fatalf("the dead turn is still in the queue at %d (%v)", seq, err)
	}
}

// TestFrontJoinGoesAheadOfTheWaiting: an interrupting turn runs right
// after the holder, ahead of the turns that waited before it, which keep
// their order.
func TestFrontJoinGoesAheadOfTheWaiting(t *testing.T) {
	e := newEnv(t)
	q := e.queue(nil)
	s := Session{Workspace: "ws", Session: "front"}
	ctx := ctxT(t)
	var seqs []uint64
	for _, j := range []struct {
		turn  string
		front bool
	}{{"a", false}, {"b", false}, {"c", false}, {"f", true}} {
		seq, err := q.Join(ctx, s, j.turn, j.turn, j.front)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	if holder, _, err := q.Holder(ctx, s, seqs[3]); err != nil || holder != "a" {
		t.Fatalf("holder %q %v, want a (an interrupt does not take the session from its holder)", holder, err)
	}
	var got []string
	for _, i := range []int{0, 3, 1, 2} {
		if err := q.Wait(ctx, s, seqs[i]); err != nil {
			t.Fatal(err)
		}
		holder, _, _ := q.Holder(ctx, s, seqs[i])
		got = append(got, holder)
		if err := q.Leave(ctx, s, seqs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"a", "f", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("held by %v, want %v", got, want)
	}
}

// TestWaitOutlastsAReconnect: a runner's connection drops and comes back
// while its turn waits; the turn still gets the session when the holder
// leaves.
func TestWaitOutlastsAReconnect(t *testing.T) {
	e := newEnv(t)
	nc, err := nats.Connect(e.srv.URL(), nats.ReconnectWait(10*time.Millisecond), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	holder, waiter := e.queue(nil), e.queue(nc)
	s := Session{Workspace: "ws", Session: "reconnect"}
	ctx := ctxT(t)
	a, err := holder.Join(ctx, s, "a", "a", false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := waiter.Join(ctx, s, "b", "b", false)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- waiter.Wait(ctx, s, b) }()
	reconnected := make(chan struct{}, 1)
	nc.SetReconnectHandler(func(*nats.Conn) { reconnected <- struct{}{} })
	if err := nc.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	<-reconnected
	if err := holder.Leave(ctx, s, a); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("wait after a reconnect: %v", err)
	}
}

// TestStaleReplayRestarts: a replay that still holds the entry of a turn
// whose messages were compacted away (it was behind when they were
// purged) starts again instead of passing the session on from that entry.
func TestStaleReplayRestarts(t *testing.T) {
	e := newEnv(t)
	q := e.queue(nil)
	s := Session{Workspace: "ws", Session: "stale"}
	ctx := ctxT(t)
	a, err := q.Join(ctx, s, "a", "a", false)
	if err != nil {
		t.Fatal(err)
	}
	w := q.acquire(s)
	defer q.release(w)
	if err := w.await(ctx, func(st *state) bool { return st.holder.seq == a }); err != nil {
		t.Fatal(err)
	}
	// The replay saw a's join; a's done and the purge happen behind its
	// back (another runner's turn finishing), then b and c join.
	if _, err := q.done(ctx, s, a); err != nil {
		t.Fatal(err)
	}
	last, _ := q.lastSeq(ctx, s)
	if err := q.stream.Purge(ctx, jetstream.WithPurgeSubject(s.subject()), jetstream.WithPurgeSequence(last)); err != nil {
		t.Fatal(err)
	}
	w.update(func(st *state) { st.holder, st.last = entry{seq: a, turn: "a"}, a }) // as if the done was never read
	b, _ := q.Join(ctx, s, "b", "b", false)
	c, _ := q.Join(ctx, s, "c", "c", false)
	e.live.kill("a")
	if err := q.Wait(ctx, s, b); err != nil {
		t.Fatal(err)
	}
	if holder, _, err := q.Holder(ctx, s, c); err != nil || holder != "b" {
		t.Fatalf("holder %q %v, want b", holder, err)
	}
}

// TestIdleSessionIsEnteredWithoutARead: once a runner saw a session go
// idle, its next turn there holds the session on its join alone (one
// conditional append, no read of the log). If another runner's turn
// joined meanwhile, the condition fails, nothing extra is stored, and the
// turn queues behind that one as usual.
func TestIdleSessionIsEnteredWithoutARead(t *testing.T) {
	e := newEnv(t)
	q, other := e.queue(nil), e.queue(nil)
	s := Session{Workspace: "ws", Session: "idle"}
	ctx := ctxT(t)
	a, held, err := q.Enter(ctx, s, "a", "a", false)
	if err != nil || held {
		t.Fatalf("first join: held %v, %v (nothing was known of the session yet)", held, err)
	}
	if err := q.Leave(ctx, s, a); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, "the idle session's log compacted", func() bool { return logLen(t, q, s) == 1 })
	q.compactions.Wait()
	b, held, err := q.Enter(ctx, s, "b", "b", false)
	if err != nil || !held {
		t.Fatalf("join of an idle session: held %v, %v", held, err)
	}
	if holder, _, err := other.Holder(ctx, s, b); err != nil || holder != "b" {
		t.Fatalf("another runner sees %q holding (%v), want b", holder, err)
	}
	if err := q.Leave(ctx, s, b); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, "compacted again", func() bool { return logLen(t, q, s) == 1 })
	q.compactions.Wait()
	// Another runner's turn joins first: q's idea of the session is stale.
	c, err := other.Join(ctx, s, "c", "c", false)
	if err != nil {
		t.Fatal(err)
	}
	d, held, err := q.Enter(ctx, s, "d", "d", false)
	if err != nil || held {
		t.Fatalf("join behind another runner's turn: held %v, %v", held, err)
	}
	if holder, hseq, err := q.Holder(ctx, s, d); err != nil || holder != "c" || hseq != c {
		t.Fatalf("holder %q at %d (%v), want c at %d", holder, hseq, err, c)
	}
	if n := logLen(t, q, s); n != 3 {
		t.Fatalf("the session's log has %d messages, want 3 (the last done, c's join, d's join)", n)
	}
}

// TestQueueStreamIsFsynced: a join is the only record of an accepted
// turn's place, so the queue stream is made with an fsync per write. With
// the asynchronous persist mode a kill -9 of NATS lost the last join and
// the turn, claimed after the restart, ran behind a turn sent after it
// (e2e/distributed TestSessionFIFOAcrossFullRestart, 1 run in 12).
func TestQueueStreamIsFsynced(t *testing.T) {
	e := newEnv(t)
	q := e.queue(nil)
	defer q.Close()
	info, err := q.stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.PersistMode == jetstream.AsyncPersistMode {
		t.Fatal("the session queue stream acknowledges joins before they are on disk (persist_mode: async)")
	}
}

// TestOlderAsyncQueueStreamIsKept: a queue stream an older version made
// asynchronous is kept as it is (JetStream cannot change a stream's
// persist mode, and its entries must survive the upgrade): Open works and
// the waiting turns keep their places.
func TestOlderAsyncQueueStreamIsKept(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	js, err := jetstream.New(e.srv.Conn("older"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: StreamName, Subjects: []string{subjectPrefix + ">"},
		Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute, AllowDirect: true, PersistMode: jetstream.AsyncPersistMode}); err != nil {
		t.Fatal(err)
	}
	s := Session{Workspace: "w", Session: "s"}
	older := e.queue(nil)
	first, err := older.Join(ctx, s, "t1", "t1", false)
	if err != nil {
		t.Fatal(err)
	}
	older.Close()

	q := e.queue(nil)
	defer q.Close()
	info, err := q.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.PersistMode != jetstream.AsyncPersistMode {
		t.Fatalf("persist mode %v, want the older stream's (async)", info.Config.PersistMode)
	}
	if seq, err := q.Find(ctx, s, "t1"); err != nil || seq != first {
		t.Fatalf("the older stream's join: %d %v, want %d", seq, err, first)
	}
}
