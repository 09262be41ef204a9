package ownership

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
)

// turnStream creates the turn stream (as the runner does before its
// Owner opens) and returns a reader of one turn's stored events.
func (e *env) turnStream(ctx context.Context) (events func(turnID string) (n uint64, last string)) {
	e.t.Helper()
	js, err := jetstream.New(e.srv.Conn("observer"))
	if err != nil {
		e.t.Fatal(err)
	}
	st, err := bus.EnsureTurnStream(ctx, js, bus.TurnStreamConfig{})
	if err != nil {
		e.t.Fatal(err)
	}
	return func(turnID string) (uint64, string) {
		subj := protocol.TurnEvents(turnID)
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(subj))
		if err != nil {
			e.t.Fatal(err)
		}
		m, err := st.GetLastMsgForSubject(ctx, subj)
		if err != nil {
			return info.State.Subjects[subj], ""
		}
		return info.State.Subjects[subj], m.Header.Get(protocol.HeaderEvent)
	}
}

// TestOwnLeaseNobodyRunsIsSettled: a lease that names this runner as it
// is now but stands behind no turn here (no other runner ever claims it:
// its runner is alive) is settled by this runner once the turn has neither
// run nor started here for StaleAfter. A turn that never stored an event
// (its start failed after the lease write landed) gets the orphan error as
// its only event; one that did is claimed back and resumed. A turn that
// runs here, or whose start is under way here, keeps its lease — also when
// the lease was written while the start was under way and the start fails
// later, with no further write of the lease to show it again.
func TestOwnLeaseNobodyRunsIsSettled(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	events := e.turnStream(ctx)
	h := newHost(1)
	o, _ := e.owner("r1", h, time.Hour)

	running, err := o.Accept(ctx, request("running"))
	if err != nil {
		t.Fatal(err)
	}
	h.run(running)
	h.starting("failed", true)
	if _, err := o.Accept(ctx, request("failed")); err != nil {
		t.Fatal(err)
	}
	// Leases the runner has no turn for: one whose turn never began, one
	// whose turn has events (a finished turn whose lease removal was lost,
	// or one let go after its checkpoint could not be read).
	if _, err := o.Accept(ctx, request("never")); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Accept(ctx, request("begun")); err != nil {
		t.Fatal(err)
	}
	if _, err := o.js.Publish(ctx, protocol.TurnEvents("begun"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}

	waitfor.NoError(t, "the never-started turn settled", func() error {
		if _, ok, err := o.Lookup(ctx, "never"); ok || err != nil {
			return fmt.Errorf("lease still there (%v)", err)
		}
		if n, last := events("never"); n != 1 || last != protocol.EventError {
			return fmt.Errorf("%d events, the last %q; want the orphan error only", n, last)
		}
		return nil
	})
	tk := awaitResumed(t, h)
	if tk.Request().TurnID != "begun" {
		t.Fatalf("resumed %q, want the begun turn claimed back", tk.Request().TurnID)
	}
	if l, ok, err := o.Lookup(ctx, "begun"); err != nil || !ok || l.Claims != 1 || l.Runner != "r1" || l.Incarnation != o.Incarnation() {
		t.Fatalf("the begun turn's lease after its claim: %+v %v %v", l, ok, err)
	}
	if n, _ := events("begun"); n != 1 {
		t.Fatalf("the begun turn has %d events after its claim, want its own 1", n)
	}
	// The leases were seen in the order written: the failed start's while
	// it was under way, before the never-started turn's was settled.
	for _, id := range []string{"running", "failed"} {
		if l, ok, err := o.Lookup(ctx, id); err != nil || !ok || l.Runner != "r1" || l.Incarnation != o.Incarnation() {
			t.Fatalf("lease of %s, whose turn runs or starts here: %+v %v %v", id, l, ok, err)
		}
	}

	h.starting("failed", false)
	waitfor.NoError(t, "the failed start settled once it is over", func() error {
		if _, ok, err := o.Lookup(ctx, "failed"); ok || err != nil {
			return fmt.Errorf("lease still there (%v)", err)
		}
		if n, last := events("failed"); n != 1 || last != protocol.EventError {
			return fmt.Errorf("%d events, the last %q; want the orphan error only", n, last)
		}
		return nil
	})
	if _, ok, err := o.Lookup(ctx, "running"); err != nil || !ok {
		t.Fatalf("the running turn's lease: %v %v", ok, err)
	}
	if n, _ := events("running"); n != 0 {
		t.Fatalf("the running turn has %d events stored by the claim loop", n)
	}
	if lost := h.lostTurns(); len(lost) != 0 {
		t.Fatalf("the runner was told it lost %v", lost)
	}
}

// TestRenewalConflictWithOwnWriteKeepsTheLease: a renewal whose
// compare-and-set fails because an earlier write of this very runner
// landed (its answer lost while a cluster elected a leader) keeps the
// turn: it is not stopped as lost, and its lease is still its own to drop.
func TestRenewalConflictWithOwnWriteKeepsTheLease(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	h := newHost(1)
	o, _ := e.owner("r1", h, time.Hour)
	tk, err := o.Accept(ctx, request("t1"))
	if err != nil {
		t.Fatal(err)
	}
	h.run(tk)
	// The landed write: the same lease, by the same runner, at a revision
	// the ticket never heard of.
	cur, err := o.leases.Get(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	var l Lease
	if err := json.Unmarshal(cur.Value(), &l); err != nil {
		t.Fatal(err)
	}
	l.Followed = true
	l.Heartbeat = time.Now().UnixMilli()
	body, _ := json.Marshal(l)
	if _, err := o.leases.Update(ctx, "t1", body, cur.Revision()); err != nil {
		t.Fatal(err)
	}

	tk.Renew(ctx, true) // followed changed: it writes, at its stale revision
	if lost := h.lostTurns(); len(lost) != 0 {
		t.Fatalf("the turn was stopped as lost: %v", lost)
	}
	tk.Drop()
	if _, ok, err := o.Lookup(ctx, "t1"); ok || err != nil {
		t.Fatalf("the turn's lease after its drop: %v %v (the ticket no longer knew its revision)", ok, err)
	}
}

// TestNoJudgingWhileOwnHeartbeatIsLate: while every runner's heartbeat
// write fails (a cluster electing the runners bucket's leader), another
// runner's entry looks stale a moment before this runner's own does. A
// runner whose own heartbeat is late judges nobody: the other runner's
// turn is not claimed, however stale its entry gets, until this runner
// sees its own heartbeat again (and then, the other being gone, it is).
func TestNoJudgingWhileOwnHeartbeatIsLate(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	// A StaleAfter of seconds: the steps below that must fall inside it
	// take milliseconds, even on a busy machine.
	const stale = 3 * time.Second
	logs := &syncBuffer{}
	h := newHost(1)
	o, _ := e.ownerWith(OwnerConfig{Runner: "r2", OrphanAfter: time.Hour, Heartbeat: testBeat, StaleAfter: stale,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}, h)

	// The other runner "r1" (written by hand): its entry and its turn's
	// lease, then no more beats.
	beat, _ := json.Marshal(RunnerBeat{Incarnation: "i1", Heartbeat: time.Now().UnixMilli(), Turns: 1})
	if _, err := o.runners.Put(ctx, "r1", beat); err != nil {
		t.Fatal(err)
	}
	lease, _ := json.Marshal(Lease{Request: request("t1"), Runner: "r1", Incarnation: "i1", Heartbeat: time.Now().UnixMilli()})
	if _, err := o.leases.Create(ctx, "t1", lease); err != nil {
		t.Fatal(err)
	}
	// r2's own entry is written a few more times after r1's last: r1's
	// entry is the older by more than a claim's jitter.
	rev := func() uint64 {
		e, err := o.runners.Get(ctx, "r2")
		if err != nil {
			return 0
		}
		return e.Revision()
	}
	after, changes := rev(), 0
	waitfor.True(t, "r2 beats three times after r1's last", func() bool {
		if r := rev(); r > after {
			after, changes = r, changes+1
		}
		return changes >= 3
	})

	// Every heartbeat write fails from now on.
	setMaxMsgSize := func(size int32) {
		t.Helper()
		st, err := o.js.Stream(ctx, "KV_"+BucketRunners)
		if err != nil {
			t.Fatal(err)
		}
		cfg := st.CachedInfo().Config
		cfg.MaxMsgSize = size
		if _, err := o.js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	setMaxMsgSize(1)
	// r2 finds out its own heartbeat is not seen (StaleAfter after its
	// last write); by then r1's older entry has been stale for longer
	// than a claim waits.
	waitfor.True(t, "r2 notices its own heartbeat is missing", func() bool {
		return strings.Contains(logs.String(), "runner watch stalled")
	})
	select {
	case tk := <-h.resumed:
		t.Fatalf("r2 claimed %s while its own heartbeat was late", tk.Request().TurnID)
	default:
	}
	if l, ok, err := o.Lookup(ctx, "t1"); err != nil || !ok || l.Runner != "r1" {
		t.Fatalf("t1's lease while r2 is blind: %+v %v %v", l, ok, err)
	}

	setMaxMsgSize(-1)
	if tk := awaitResumed(t, h); tk.Request().TurnID != "t1" {
		t.Fatalf("claimed %q, want t1 (r1 is gone)", tk.Request().TurnID)
	}
}

// syncBuffer is a log sink safe for the Owner's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
