package turn

import (
	"context"
	"errors"
	"github.com/waggle-os/core/libs/protocol"
	"time"

	"github.com/waggle-os/core/services/turnrunner/ownership"
)

// Ownership is what a turn needs of its ownership (an
// ownership.Ticket): its place in its session's queue and its lease.
type Ownership interface {
	// Join puts the turn in its session's queue and reports the turn
	// holding the session when that is another.
	Join(ctx context.Context, mode ownership.Mode) (holder string, err error)
	// Place finds a claimed turn's place in its session's queue; Placed
	// reports whether it has one, Holds whether it holds the session.
	Place(ctx context.Context) error
	Placed() bool
	Holds() bool
	// Wait waits until the turn holds its session.
	Wait(ctx context.Context) error
	// Leave gives the session (or the turn's place) up.
	Leave()
	// Renew keeps the lease alive, Drop deletes it once the turn ended,
	// Release hands the turn to another runner.
	Renew(ctx context.Context, followed bool)
	Drop()
	Release(followed bool)
	// Abandon lets go of the turn here, its lease left for this runner
	// to take back later.
	Abandon()
	// Record is the turn as the session store records it accepted: its
	// request, its place in its session's queue, when it was accepted.
	Record() protocol.AcceptedTurn
}

// ErrLeaseLost cancels a turn whose lease another runner took: this
// runner must not touch the turn any more.
var ErrLeaseLost = errors.New("turn lease lost")

// ErrHandover cancels a turn this runner gives to another on shutdown.
var ErrHandover = errors.New("turn handed over")

// joinWait bounds a claimed turn's join of its session's queue.
const joinWait = 5 * time.Second
