package ownership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/ownership/sessionqueue"
)

// Ticket is one turn's ownership on this runner: its lease and its place
// in its session's queue.
//
// At most one turn per session runs at a time, across every runner, and a
// session's turns run in the order they were accepted. A turn joins its
// session's queue (Join) before its start request is answered: one
// append, whose stream sequence is its place, so no turn is ever refused
// because others joined at the same moment. The holder gives the session
// to the next turn by appending its done record (Leave); the turns
// waiting replay the log and start when it names them (Wait).
//
// The queue needs no heartbeat of its own: a holder is alive while its
// turn has a lease (written before the turn joins), so a turn that another
// runner takes over keeps its place, and a holder without a lease
// (finished without leaving, or ended because no runner was left) is
// passed over by a runner with turns waiting behind it. The queue is a
// stream, not a runner's memory, so it survives a runner's crash and a
// full restart (see "Recovery after a crash" in docs/architecture.md for
// what a crash of the NATS server itself may lose and how that is
// recovered).
//
// The queue's methods (Join, Holds, Wait, Leave, Place) are the turn's
// own: call them from one goroutine at a time. The lease's (Renew, Drop,
// Release) may be called from any.
type Ticket struct {
	o     *Owner
	req   protocol.TurnRequest
	claim int // the lease's claim count when this ticket was made

	// seq is the turn's place in its session's queue (0: none); holds is
	// set once the turn holds its session.
	seq   uint64
	holds bool

	// op serialises the lease's writes (renew, drop, release), so a
	// renewal never resurrects a lease being dropped or released.
	op    sync.Mutex
	mu    sync.Mutex
	lease Lease
	rev   uint64 // 0 once the lease is gone or someone else's
	// renewing ends the renewal under way, if any: the turn's end
	// (Drop, Release) does not wait behind a renewal its write makes moot.
	renewing context.CancelFunc
}

// stopRenewal ends the renewal under way, if any.
func (t *Ticket) stopRenewal() {
	t.mu.Lock()
	stop := t.renewing
	t.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// Mode says where a turn that finds its session busy goes.
type Mode int

const (
	// Behind joins behind every waiting turn.
	Behind Mode = iota
	// Ahead joins ahead of them (an interrupting turn).
	Ahead
	// Nowhere joins only to look: the caller refuses the turn if its
	// session is held, and Leave takes it out.
	Nowhere
)

// Accept records a newly accepted turn: its lease, naming this runner. A
// turn id already leased is ErrLeased (a retried start request). The
// lease is written before the turn joins its session's queue: a queued
// turn without a lease is taken for dead and passed over, so it must
// never be seen without one. A crash between the two leaves a lease
// without a place, which the runner that claims it joins again (Place).
func (o *Owner) Accept(ctx context.Context, req protocol.TurnRequest) (*Ticket, error) {
	now := time.Now().UnixMilli()
	l := Lease{Request: req, Runner: o.cfg.Runner, Incarnation: o.incarnation, Accepted: now, Heartbeat: now}
	body, _ := json.Marshal(l)
	// Each try waits acceptTryWait(try) for its answer, then the write is sent
	// again: a request the server drops unanswered (JetStream restarting
	// after a full disk was freed, a cluster electing a leader) costs the
	// start a second, not its whole budget. A try that finds the lease
	// made by an earlier try of this very call (same incarnation, same
	// acceptance time) has it.
	for try := 0; ; try++ {
		tctx, cancel := context.WithTimeout(ctx, acceptTryWait(try))
		rev, err := o.leases.Create(tctx, req.TurnID, body)
		cancel()
		switch {
		case err == nil:
			return o.ticket(l, rev), nil
		case IsConflict(err) && try > 0:
			rev, ok, rerr := o.sameLease(ctx, l)
			switch {
			case ok:
				return o.ticket(l, rev), nil
			case rerr != nil && ctx.Err() == nil:
				continue // the read failed, not the turn: ask again
			}
			return nil, fmt.Errorf("%w: %s", ErrLeased, req.TurnID)
		case IsConflict(err):
			return nil, fmt.Errorf("%w: %s", ErrLeased, req.TurnID)
		case ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)):
			continue
		default:
			return nil, fmt.Errorf("ownership: lease %s: %w", req.TurnID, err)
		}
	}
}

// acceptTry bounds one try of Accept's lease write (it answers in
// milliseconds when the server answers at all).
const acceptTry = time.Second

// sameLease reports the revision of l's turn's lease when it is l itself
// (written by an earlier try whose answer was lost).
func (o *Owner) sameLease(ctx context.Context, l Lease) (uint64, bool, error) {
	e, err := o.leases.Get(ctx, l.Request.TurnID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	var got Lease
	if json.Unmarshal(e.Value(), &got) != nil || got.Runner != l.Runner || got.Incarnation != l.Incarnation || got.Accepted != l.Accepted {
		return 0, false, nil
	}
	return e.Revision(), true, nil
}

// ticket registers the lease l at revision rev as this runner's.
func (o *Owner) ticket(l Lease, rev uint64) *Ticket {
	t := &Ticket{o: o, req: l.Request, claim: l.Claims, lease: l, rev: rev}
	o.mu.Lock()
	o.tickets[l.Request.TurnID] = t
	o.mu.Unlock()
	return t
}

// Record is the turn as the session store records it accepted
// (protocol.AcceptedTurn): its request, its place in its session's queue
// (0 before Join), when it was first accepted.
func (t *Ticket) Record() protocol.AcceptedTurn {
	t.mu.Lock()
	accepted := t.lease.Accepted
	t.mu.Unlock()
	return protocol.AcceptedTurn{Request: t.req, Place: t.seq, Accepted: accepted}
}

// Request is the turn as the gateway sent it.
func (t *Ticket) Request() protocol.TurnRequest { return t.req }

// Followed reports whether the lease, when this ticket was made, said a
// client had followed the turn (a claimed turn's followers reattach to
// the new runner within protocol.AttachInterval).
func (t *Ticket) Followed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lease.Followed
}

func (t *Ticket) session() sessionqueue.Session {
	return sessionqueue.Session{Workspace: t.req.Workspace, Session: t.req.Session}
}

func (t *Ticket) logger() *slog.Logger {
	return t.o.log.With("turn", t.req.TurnID, "workspace", t.req.Workspace, "session", t.req.Session)
}

// Join puts the turn in its session's queue (ahead of the waiting turns
// for Ahead) and reports the turn holding the session when that is
// another ("" when this turn holds it). A turn joining with Nowhere is in
// the queue too, until the caller refuses it and Leave takes it out:
// joining and looking cannot be one step, and a reject that lost the race
// against another turn must see that turn.
func (t *Ticket) Join(ctx context.Context, mode Mode) (holder string, err error) {
	// The join's message id makes a publish retried after a lost
	// acknowledgement the same entry; a claimed turn that must join again
	// (its entry was lost) uses its claim count.
	msgID := fmt.Sprintf("%s:%d", t.req.TurnID, t.claim)
	seq, held, err := t.o.queue.Enter(ctx, t.session(), t.req.TurnID, msgID, mode == Ahead)
	if err != nil {
		return "", err
	}
	t.seq = seq
	if held {
		// An idle session, joined on condition that it still was: no read.
		t.holds = true
		return "", nil
	}
	return t.settle(ctx)
}

// settle finds out whether the turn at t.seq holds its session: by the
// cheap test first (an idle session's log), else by replaying the log.
func (t *Ticket) settle(ctx context.Context) (holder string, err error) {
	s := t.session()
	held, err := t.o.queue.Holds(ctx, s, t.seq)
	if err != nil {
		return "", err
	}
	if !held {
		id, seq, err := t.o.queue.Holder(ctx, s, t.seq)
		if err != nil {
			return "", err
		}
		if seq != t.seq {
			if id == "" {
				id = "?" // nobody holds it and this turn is not first: cannot be, but never run it
			}
			return id, nil
		}
	}
	t.holds = true
	return "", nil
}

// Holds reports whether the turn holds its session (as far as this
// ticket knows: Join, Place and Wait find out).
func (t *Ticket) Holds() bool { return t.holds }

// Placed reports whether the turn has a place in its session's queue.
func (t *Ticket) Placed() bool { return t.seq != 0 }

// Wait waits until the turn holds its session. It returns
// sessionqueue.ErrGone when
// its place is gone (it was passed over as dead: its lease was gone for a
// moment, and it had better be refused than run beside the turn that took
// its place), or ctx's error.
func (t *Ticket) Wait(ctx context.Context) error {
	err := t.o.queue.Wait(ctx, t.session(), t.seq)
	if err == nil {
		t.holds = true
		return nil
	}
	if errors.Is(err, sessionqueue.ErrGone) {
		t.logger().Warn("the turn lost its place in its session's queue")
		t.seq = 0
	}
	return err
}

// Leave takes the turn out of its session's queue: the holder gives the
// session to the next turn; a waiting turn gives up its place. It does
// nothing for a turn without a place.
func (t *Ticket) Leave() {
	if t.seq == 0 {
		return
	}
	seq := t.seq
	t.seq, t.holds = 0, false
	ctx, cancel := t.o.cleanupCtx()
	defer cancel()
	if err := t.o.queue.Leave(ctx, t.session(), seq); err != nil {
		t.logger().Warn("leave the session's queue", "err", err)
	}
}

// Place finds the place of a claimed turn in its session's queue: held,
// waiting, or none (Placed false: it never joined, or a crash of the bus
// lost its entry; the caller joins again).
func (t *Ticket) Place(ctx context.Context) error {
	seq, err := t.o.queue.Find(ctx, t.session(), t.req.TurnID)
	if err != nil || seq == 0 {
		return err
	}
	t.seq = seq
	_, err = t.settle(ctx)
	return err
}

// Renew writes the lease again when it changed (followed, the turn's
// presence says whether a client ever attached) or is getting old. A lost
// compare-and-set means another runner owns the turn now: the turn is
// stopped (Host.Lost) without another word.
func (t *Ticket) Renew(ctx context.Context, followed bool) {
	t.op.Lock()
	defer t.op.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t.mu.Lock()
	rev, lease := t.rev, t.lease
	t.renewing = cancel
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.renewing = nil
		t.mu.Unlock()
	}()
	if rev == 0 {
		return
	}
	if lease.Followed == followed && time.Since(time.UnixMilli(lease.Heartbeat)) < leaseRefresh {
		return
	}
	lease.Heartbeat = time.Now().UnixMilli()
	lease.Followed = followed
	body, _ := json.Marshal(lease)
	newRev, err := t.o.leases.Update(ctx, t.req.TurnID, body, rev)
	switch {
	case err == nil:
		t.mu.Lock()
		t.rev, t.lease = newRev, lease
		t.mu.Unlock()
	case IsConflict(err):
		rev, ok, err := t.o.stillMine(ctx, t.req.TurnID)
		if err != nil {
			// Only the read failed (a loaded bus): whose lease it is is
			// asked again at the next renewal; a turn is never stopped on
			// a read it did not get.
			t.logger().Warn("renew turn lease: could not tell whose it is", "err", err)
			return
		}
		if ok {
			// An earlier write of ours landed and its answer was lost (a
			// cluster electing a leader): the lease is still this turn's.
			t.mu.Lock()
			t.rev, t.lease = rev, lease
			t.mu.Unlock()
			return
		}
		t.o.lost(t.req.TurnID)
	case errors.Is(err, context.Canceled):
		// Ended by Drop or Release, whose write settles the lease.
	default:
		// NATS hiccup: try again on the next beat. If it lasts, another
		// runner claims the turn and the next renewal finds out.
		t.o.log.Warn("renew turn lease", "turn", t.req.TurnID, "err", err)
	}
}

// restore writes the lease again when the bus no longer has it (a NATS
// restart lost it: Owner.restoreLeases). It reports false when the bus
// could not say.
func (t *Ticket) restore(ctx context.Context) bool {
	t.op.Lock()
	defer t.op.Unlock()
	t.mu.Lock()
	rev, lease := t.rev, t.lease
	t.mu.Unlock()
	if rev == 0 {
		return true // dropped, released or someone else's meanwhile
	}
	_, err := t.o.leases.Get(ctx, t.req.TurnID)
	switch {
	case err == nil:
		return true // still there; a revision the bus lost is Renew's (stillMine)
	case !errors.Is(err, jetstream.ErrKeyNotFound):
		return false
	}
	lease.Heartbeat = time.Now().UnixMilli()
	body, _ := json.Marshal(lease)
	newRev, err := t.o.leases.Create(ctx, t.req.TurnID, body)
	switch {
	case err == nil:
		t.mu.Lock()
		t.rev, t.lease = newRev, lease
		t.mu.Unlock()
		t.logger().Warn("put back the turn's lease, which the bus lost (NATS restarted)")
		return true
	case IsConflict(err):
		return true // written meanwhile: the claim loop and Renew see whose it is
	default:
		return false
	}
}

// Drop deletes the lease of a finished turn (its terminal event is
// stored). A conflict means the lease is someone else's now: left alone.
func (t *Ticket) Drop() {
	t.stopRenewal()
	t.op.Lock()
	defer t.op.Unlock()
	rev := t.forget()
	if rev == 0 {
		return
	}
	ctx, cancel := t.o.cleanupCtx()
	defer cancel()
	err := t.o.leases.Delete(ctx, t.req.TurnID, jetstream.LastRevision(rev))
	if IsConflict(err) {
		// A renewal of ours whose answer was lost or cut short by this
		// Drop may have landed: still this runner's lease, at a newer
		// revision.
		if rev, ok, _ := t.o.stillMine(ctx, t.req.TurnID); ok {
			err = t.o.leases.Delete(ctx, t.req.TurnID, jetstream.LastRevision(rev))
		}
	}
	if err != nil && !IsConflict(err) {
		t.o.log.Warn("delete turn lease", "turn", t.req.TurnID, "err", err)
	}
}

// Release hands the turn to whichever runner claims it first (this
// runner shuts down); followed is as for Renew.
func (t *Ticket) Release(followed bool) {
	t.stopRenewal()
	t.op.Lock()
	defer t.op.Unlock()
	t.mu.Lock()
	lease := t.lease
	t.mu.Unlock()
	rev := t.forget()
	if rev == 0 {
		return
	}
	lease.Runner, lease.Released = "", true
	lease.Heartbeat = time.Now().UnixMilli()
	lease.Followed = followed
	body, _ := json.Marshal(lease)
	ctx, cancel := t.o.cleanupCtx()
	defer cancel()
	_, err := t.o.leases.Update(ctx, t.req.TurnID, body, rev)
	if IsConflict(err) {
		// As in Drop: a renewal of ours may have landed meanwhile.
		if rev, ok, _ := t.o.stillMine(ctx, t.req.TurnID); ok {
			_, err = t.o.leases.Update(ctx, t.req.TurnID, body, rev)
		}
	}
	if err != nil {
		t.o.log.Warn("release turn lease", "turn", t.req.TurnID, "err", err)
	}
}

// Abandon lets go of the turn here without touching its lease or its
// place in its session's queue: a claimed turn whose checkpoint could not
// be read. The lease stays this runner's, and the claim loop takes the
// turn back (takeBack) once the turn has not run here for StaleAfter.
func (t *Ticket) Abandon() { t.forget() }

// forget makes the lease no longer this runner's and returns the revision
// it had (0 when it was not).
func (t *Ticket) forget() uint64 {
	t.mu.Lock()
	rev := t.rev
	t.rev = 0
	t.mu.Unlock()
	t.o.mu.Lock()
	if t.o.tickets[t.req.TurnID] == t {
		delete(t.o.tickets, t.req.TurnID)
	}
	t.o.mu.Unlock()
	return rev
}
