// Package recovery puts back, from the session store's record of accepted
// turns, what a crash of NATS lost of the turns' leases and places in
// their sessions' queues, when the runner keeps them without an fsync per
// write (ownership.OwnerConfig.Async): the recovery rule of
// docs/architecture.md.
package recovery

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/ownership"
	"github.com/waggle-os/core/services/turnrunner/ownership/sessionqueue"
)

// Leases is the lease bucket (ownership.BucketLeases) as Recover uses it:
// a jetstream.KeyValue.
type Leases interface {
	Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error)
	Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error)
}

// Places is the session queues as Recover uses them: a
// *sessionqueue.Queue.
type Places interface {
	Find(ctx context.Context, s sessionqueue.Session, turnID string) (uint64, error)
	Join(ctx context.Context, s sessionqueue.Session, turnID, msgID string, front bool) (uint64, error)
}

// Recover puts back what a crash of NATS lost of the turns the session
// store records as accepted and open (protocol.OpenTurns), for an Owner
// whose coordination state is Async, into its lease bucket and session
// queues (ownership.Owner.Coordination):
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
// before the crash. It reports how many leases and places it put back,
// and logs a warning on log when it put back any.
func Recover(ctx context.Context, bucket Leases, queue Places, turns []protocol.AcceptedTurn, log *slog.Logger) (leases, places int, err error) {
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
		made, err := restoreLease(ctx, bucket, at)
		if err != nil {
			return leases, places, err
		}
		if made {
			leases++
		}
		s := sessionqueue.Session{Workspace: req.Workspace, Session: req.Session}
		seq, err := queue.Find(ctx, s, req.TurnID)
		if err != nil {
			return leases, places, fmt.Errorf("ownership: recover %s: %w", req.TurnID, err)
		}
		if seq != 0 {
			continue
		}
		if _, err := queue.Join(ctx, s, req.TurnID, req.TurnID+":recovered", req.Multitask == protocol.MultitaskInterrupt); err != nil {
			return leases, places, fmt.Errorf("ownership: recover %s: %w", req.TurnID, err)
		}
		places++
	}
	if leases+places > 0 {
		log.Warn("put back turns NATS lost in a crash, from the session store's record", "leases", leases, "places", places)
	}
	return leases, places, nil
}

// restoreLease writes at's lease, released, unless the turn has one. It
// reports whether it wrote it.
func restoreLease(ctx context.Context, bucket Leases, at protocol.AcceptedTurn) (bool, error) {
	req := at.Request
	_, err := bucket.Get(ctx, req.TurnID)
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
	body, _ := json.Marshal(ownership.Lease{Request: req, Released: true, Accepted: accepted, Heartbeat: time.Now().UnixMilli()})
	if _, err := bucket.Create(ctx, req.TurnID, body); err != nil {
		if ownership.IsConflict(err) {
			return false, nil // made meanwhile: the turn has one
		}
		return false, fmt.Errorf("ownership: recover %s: %w", req.TurnID, err)
	}
	return true, nil
}
