package ownership

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/ownership/sessionqueue"
)

// Recover puts back what a crash of NATS lost of the turns the session
// store records as accepted and open (protocol.OpenTurns), for an Owner
// whose coordination state is Async:
//
//   - a turn without a lease gets one again, released, so the claim loop
//     takes it over at once and resumes it like any turn whose runner
//     died (from the store: its user message, or its wait for its place);
//   - a turn without a place in its session's queue joins it again, the
//     session's turns in the order they were accepted (Place).
//
// A crash loses a suffix of each stream's writes (what NATS acknowledged
// from memory in its last flush window), so the places still there are
// those of the turns accepted first, and the ones put back follow them in
// their order. Call it after Open and before the runner takes any turn: a
// turn sent after the restart then joins behind every turn accepted
// before the crash. It reports how many leases and places it put back.
func (o *Owner) Recover(ctx context.Context, turns []protocol.AcceptedTurn) (leases, places int, err error) {
	turns = slices.Clone(turns)
	slices.SortStableFunc(turns, func(a, b protocol.AcceptedTurn) int {
		return cmp.Or(cmp.Compare(a.Request.Workspace, b.Request.Workspace),
			cmp.Compare(a.Request.Session, b.Request.Session), cmp.Compare(a.Place, b.Place))
	})
	for _, at := range turns {
		req := at.Request
		if !protocol.ValidID(req.TurnID) || !protocol.ValidID(req.Workspace) || !protocol.ValidID(req.Session) {
			continue
		}
		made, err := o.restoreLease(ctx, at)
		if err != nil {
			return leases, places, err
		}
		if made {
			leases++
		}
		s := sessionqueue.Session{Workspace: req.Workspace, Session: req.Session}
		seq, err := o.queue.Find(ctx, s, req.TurnID)
		if err != nil {
			return leases, places, fmt.Errorf("ownership: recover %s: %w", req.TurnID, err)
		}
		if seq != 0 {
			continue
		}
		if _, err := o.queue.Join(ctx, s, req.TurnID, req.TurnID+":recovered", req.Multitask == protocol.MultitaskInterrupt); err != nil {
			return leases, places, fmt.Errorf("ownership: recover %s: %w", req.TurnID, err)
		}
		places++
	}
	if leases+places > 0 {
		o.log.Warn("put back turns NATS lost in a crash, from the session store's record", "leases", leases, "places", places)
	}
	return leases, places, nil
}

// restoreLease writes at's lease, released, unless the turn has one. It
// reports whether it wrote it.
func (o *Owner) restoreLease(ctx context.Context, at protocol.AcceptedTurn) (bool, error) {
	req := at.Request
	_, err := o.leases.Get(ctx, req.TurnID)
	switch {
	case err == nil:
		return false, nil
	case !errors.Is(err, jetstream.ErrKeyNotFound):
		return false, fmt.Errorf("ownership: recover %s: %w", req.TurnID, err)
	}
	accepted := at.Accepted
	if accepted == 0 {
		accepted = time.Now().UnixMilli()
	}
	body, _ := json.Marshal(Lease{Request: req, Released: true, Accepted: accepted, Heartbeat: time.Now().UnixMilli()})
	if _, err := o.leases.Create(ctx, req.TurnID, body); err != nil {
		if isConflict(err) {
			return false, nil // made meanwhile: the turn has one
		}
		return false, fmt.Errorf("ownership: recover %s: %w", req.TurnID, err)
	}
	return true, nil
}
