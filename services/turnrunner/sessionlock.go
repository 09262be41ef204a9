package turnrunner

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/services/turnrunner/ownership"
)

// Session queues: at most one turn per session runs at a time, across
// every runner, and a session's turns run in the order they were
// accepted. A turn joins its session's queue (package ownership) before
// its start request is answered: one append, whose stream sequence is its
// place, so no turn is ever refused because others joined at the same
// moment. The holder gives the session to the next turn by appending its
// done record; the turns waiting replay the log and start when it names
// them.
//
// The queue needs no heartbeat of its own: a holder is alive while its
// turn has a lease (written before the turn joins), so a turn that another
// runner takes over keeps its place, and a holder without a lease
// (finished without leaving, or ended by a gateway because no runner was
// left) is passed over by a runner with turns waiting behind it. The queue
// is a file-backed stream, not a runner's memory, so it survives a
// runner's crash and a full restart (see "Distributed turns" in
// docs/architecture.md for what a crash of the NATS server itself may
// lose and how that is recovered).

// joinMode says where a turn that finds its session busy goes.
type joinMode int

const (
	joinQueue joinMode = iota // behind every waiting turn
	joinFront                 // ahead of them (an interrupting turn)
	joinNever                 // nowhere: the caller refuses the turn
)

func (t *turn) session() ownership.Session {
	return ownership.Session{Workspace: t.req.Workspace, Session: t.req.Session}
}

// holderAlive reports whether turnID still has a lease.
func (s *Service) holderAlive(ctx context.Context, turnID string) (bool, error) {
	if turnID == "" {
		return false, nil
	}
	_, err := s.leases.Get(ctx, turnID)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	return false, fmt.Errorf("turnrunner: read lease of %s: %w", turnID, err)
}

// joinSession puts the turn in its session's queue (front first for an
// interrupting turn) and reports the turn holding the session when that
// is another ("" when this turn holds it). A turn joining with joinNever
// is in the queue too, until the caller refuses it and unlock takes it
// out: joining and looking cannot be one step, and a reject that lost the
// race against another turn must see that turn.
func (t *turn) joinSession(ctx context.Context, mode joinMode) (holder string, err error) {
	s := t.session()
	// The join's message id makes a publish retried after a lost
	// acknowledgement the same entry; a claimed turn that must join again
	// (its entry was lost) uses its claim count.
	msgID := fmt.Sprintf("%s:%d", t.req.TurnID, t.lease.Claims)
	seq, held, err := t.svc.queue.Enter(ctx, s, t.req.TurnID, msgID, mode == joinFront)
	if err != nil {
		return "", fmt.Errorf("turnrunner: %w", err)
	}
	t.qseq = seq
	if held {
		// An idle session, joined on condition that it still was: no read.
		t.holds = true
		return "", nil
	}
	return t.settle(ctx)
}

// settle finds out whether the turn at t.qseq holds its session: by the
// cheap test first (an idle session's log), else by replaying the log.
func (t *turn) settle(ctx context.Context) (holder string, err error) {
	s := t.session()
	held, err := t.svc.queue.Holds(ctx, s, t.qseq)
	if err != nil {
		return "", fmt.Errorf("turnrunner: %w", err)
	}
	if !held {
		id, seq, err := t.svc.queue.Holder(ctx, s, t.qseq)
		if err != nil {
			return "", fmt.Errorf("turnrunner: %w", err)
		}
		if seq != t.qseq {
			if id == "" {
				id = "?" // nobody holds it and this turn is not first: cannot be, but never run it
			}
			return id, nil
		}
	}
	t.holds = true
	return "", nil
}

// waitLock waits until this turn holds its session, or the turn is
// cancelled or its place is gone (false).
func (t *turn) waitLock() bool {
	err := t.svc.queue.Wait(t.ctx, t.session(), t.qseq)
	if err == nil {
		t.holds = true
		return true
	}
	if errors.Is(err, ownership.ErrGone) {
		// Passed over as dead: its lease was gone for a moment. Better
		// refuse it than run it beside the turn that took its place.
		t.logger().Warn("the turn lost its place in its session's queue")
		t.qseq = 0
	}
	return false
}

// unlock takes the turn out of its session's queue: the holder gives the
// session to the next turn; a waiting turn gives up its place.
func (t *turn) unlock() {
	if t.qseq == 0 {
		return
	}
	seq := t.qseq
	t.qseq, t.holds = 0, false
	ctx, cancel := kvCtx()
	defer cancel()
	if err := t.svc.queue.Leave(ctx, t.session(), seq); err != nil {
		t.logger().Warn("leave the session's queue", "err", err)
	}
}

// ownLock finds the place of a claimed turn in its session's queue: held,
// waiting, or none (t.qseq 0: it never joined, or a crash of the bus lost
// its entry; resume joins again).
func (t *turn) ownLock(ctx context.Context) error {
	seq, err := t.svc.queue.Find(ctx, t.session(), t.req.TurnID)
	if err != nil || seq == 0 {
		return err
	}
	t.qseq = seq
	_, err = t.settle(ctx)
	return err
}
