package recovery

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/ownership"
	"github.com/waggle-os/core/services/turnrunner/ownership/sessionqueue"
)

// The Owners' loops and the queues' replays are goroutines: Stop must end
// every one.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Timing of the owners under test: a runner is stale after a few missed
// beats, so a released lease is claimed in well under a second.
const (
	testBeat  = 50 * time.Millisecond
	testStale = 300 * time.Millisecond
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fakeHost is the turn runner of an Owner under test: it has slots for
// claimed turns and hands on each turn it resumes.
type fakeHost struct {
	mu      sync.Mutex
	runs    map[string]bool
	slots   int
	resumed chan *ownership.Ticket
}

func newHost(slots int) *fakeHost {
	return &fakeHost{runs: map[string]bool{}, slots: slots, resumed: make(chan *ownership.Ticket, 16)}
}

func (h *fakeHost) Runs(turnID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.runs[turnID]
}

func (h *fakeHost) Lost(string) {}

func (h *fakeHost) Reserve() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.slots == 0 {
		return false
	}
	h.slots--
	return true
}

func (h *fakeHost) Unreserve() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.slots++
}

func (h *fakeHost) Resume(t *ownership.Ticket) bool {
	h.mu.Lock()
	h.runs[t.Request().TurnID] = true
	h.mu.Unlock()
	h.resumed <- t
	return true
}

// startOwner opens and starts an Owner on a connection of its own; stop
// ends it early (the process dies), and the test's end stops it otherwise.
func startOwner(t *testing.T, srv *natstest.Server, cfg ownership.OwnerConfig, host *fakeHost) (o *ownership.Owner, stop func()) {
	t.Helper()
	js, err := jetstream.New(srv.Conn(cfg.Runner))
	if err != nil {
		t.Fatal(err)
	}
	o = ownership.NewOwner(cfg, host)
	if err := o.Open(ctxT(t), js); err != nil {
		t.Fatal(err)
	}
	o.Start()
	var once sync.Once
	stop = func() { once.Do(o.Stop) }
	t.Cleanup(stop)
	return o, stop
}

func request(turnID string) protocol.TurnRequest {
	return protocol.TurnRequest{TurnID: turnID, Workspace: "ws", Session: "s1", Message: "hi"}
}

// awaitResumed is the next turn host resumed.
func awaitResumed(t *testing.T, host *fakeHost) *ownership.Ticket {
	t.Helper()
	select {
	case tk := <-host.resumed:
		return tk
	case <-time.After(20 * time.Second):
		t.Fatal("no turn was claimed")
		return nil
	}
}

// TestRecoverPutsBackWhatNATSLost is the recovery rule of an Async owner
// (docs/architecture.md):
// three turns accepted into one session (the first holds it), then a crash
// that loses NATS's last writes — the leases and joins of the second and
// third turn — and a restart. The runner, before it takes any turn, puts
// back from the store's record the lost leases (released: claimed at once)
// and places (in their order); a turn sent after the restart queues behind
// all three, and the session runs first, second, third, late.
func TestRecoverPutsBackWhatNATSLost(t *testing.T) {
	srv := natstest.Start(t)
	ctx := ctxT(t)
	cfg := ownership.OwnerConfig{Runner: "desk", OrphanAfter: time.Hour, Heartbeat: testBeat, StaleAfter: testStale, Async: true}
	o1, stop1 := startOwner(t, srv, cfg, newHost(4))
	var record []protocol.AcceptedTurn
	for _, id := range []string{"first", "second", "third"} {
		tk, err := o1.Accept(ctx, request(id))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tk.Join(ctx, ownership.Behind); err != nil {
			t.Fatal(err)
		}
		record = append(record, tk.Record())
	}
	if record[0].Place == 0 || !(record[0].Place < record[1].Place && record[1].Place < record[2].Place) || record[0].Accepted == 0 {
		t.Fatalf("records: %+v", record)
	}
	stop1() // the process dies (its leases stay: nothing releases them)

	// What the crash lost: the last two turns' leases and joins.
	js, err := jetstream.New(srv.Conn("crash"))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, ownership.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := js.Stream(ctx, sessionqueue.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range record[1:] {
		if err := kv.Purge(ctx, at.Request.TurnID); err != nil {
			t.Fatal(err)
		}
		if err := qs.DeleteMsg(ctx, at.Place); err != nil {
			t.Fatal(err)
		}
	}

	// The restart: recover, then take turns.
	h2 := newHost(4)
	js2, err := jetstream.New(srv.Conn("desk-2"))
	if err != nil {
		t.Fatal(err)
	}
	o2 := ownership.NewOwner(cfg, h2)
	if err := o2.Open(ctx, js2); err != nil {
		t.Fatal(err)
	}
	rev := slices.Clone(record)
	slices.Reverse(rev) // the store's order does not matter: Place does
	bucket, queue := o2.Coordination()
	leases, places, err := Recover(ctx, bucket, queue, rev, slog.New(slog.DiscardHandler))
	if err != nil || leases != 2 || places != 2 {
		t.Fatalf("Recover: %d leases, %d places, %v; want 2 and 2", leases, places, err)
	}
	// A second Recover (a restart before any turn ran) puts back nothing.
	if leases, places, err := Recover(ctx, bucket, queue, record, slog.New(slog.DiscardHandler)); err != nil || leases != 0 || places != 0 {
		t.Fatalf("Recover again: %d leases, %d places, %v", leases, places, err)
	}
	o2.Start()
	var once sync.Once
	t.Cleanup(func() { once.Do(o2.Stop) })

	late, err := o2.Accept(ctx, request("late"))
	if err != nil {
		t.Fatal(err)
	}
	if holder, err := late.Join(ctx, ownership.Behind); err != nil || holder == "" {
		t.Fatalf("the late turn's join: holder %q, %v", holder, err)
	}
	claimed := map[string]*ownership.Ticket{}
	for range 3 {
		tk := awaitResumed(t, h2)
		claimed[tk.Request().TurnID] = tk
	}
	var order []string
	for _, id := range []string{"first", "second", "third"} {
		tk := claimed[id]
		if tk == nil {
			t.Fatalf("claimed %v, want first, second and third", claimed)
		}
		if err := tk.Place(ctx); err != nil || !tk.Placed() {
			t.Fatalf("%s's place after the restart: %v", id, err)
		}
	}
	// Run the session: each turn, once it holds it, notes it and leaves
	// it to the next.
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for id, tk := range map[string]*ownership.Ticket{"first": claimed["first"], "second": claimed["second"], "third": claimed["third"], "late": late} {
		wg.Go(func() {
			if err := tk.Wait(ctx); err != nil {
				errs <- err
				return
			}
			mu.Lock()
			order = append(order, id)
			mu.Unlock()
			tk.Leave()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("waiting for the session: %v", err)
	}
	if want := []string{"first", "second", "third", "late"}; !slices.Equal(order, want) {
		t.Fatalf("the session ran %v, want %v", order, want)
	}
}
