package turn

import (
	"context"
	"sync"

	"github.com/waggle-os/core/libs/protocol"
)

// The session store's record of accepted turns (protocol.AcceptedTurn),
// kept when Config.RecordAccepted: the turn's lease and place are then
// written without an fsync, and what a crash of NATS loses of them is put
// back from this record (ownership/recovery). A turn that holds its
// session is recorded by its user message's append; one that waits is
// recorded by the runner before its start is answered (RecordQueued). A
// turn that ends without a reply — cancelled while it waited — is closed
// (its reply's append closes any other).

// recording is a turn's part in that record.
type recording struct {
	once sync.Once
	// done is closed once the turn's user message was stored, or failed
	// to be, or the turn ended without storing it (Recorded).
	done chan struct{}
}

// Recorded is closed once the session store records the turn (its user
// message is stored), or once that failed or cannot happen any more: a
// start is answered after it, so a turn whose client is told it runs is
// one the store knows.
func (t *Turn) Recorded() <-chan struct{} { return t.rec.done }

// markRecorded closes Recorded (once).
func (t *Turn) markRecorded() { t.rec.once.Do(func() { close(t.rec.done) }) }

// accepted is what the user message's append carries: the turn's record,
// or nil when the store keeps none.
func (t *Turn) accepted() *protocol.AcceptedTurn {
	if !t.deps.Config.RecordAccepted {
		return nil
	}
	at := t.own.Record()
	return &at
}

// closeRecord tells the store the turn ended without a reply, so that no
// restart runs it again. A close lost here is one turn run again after a
// crash; it is logged.
func (t *Turn) closeRecord() {
	if !t.deps.Config.RecordAccepted {
		return
	}
	CloseRecord(t.deps, t.req)
}

// CloseRecord closes req's record in the session store (see Turn's
// recording): for a turn that ends without a reply.
func CloseRecord(d *Deps, req protocol.TurnRequest) {
	err := storeWrite(context.Background(), d, protocol.CloseTurn,
		protocol.CloseTurnRequest{SessionRef: protocol.SessionRef{Workspace: req.Workspace, Session: req.Session}, TurnID: req.TurnID})
	if err != nil {
		d.Log.Warn("close the store's record of a turn that ended without a reply (a restart after a crash may run it again)", "turn", req.TurnID, "err", err)
	}
}

// RecordQueued records a turn that waits for its session as accepted,
// durably, before its start is answered.
func RecordQueued(ctx context.Context, d *Deps, at protocol.AcceptedTurn) error {
	return storeWrite(ctx, d, protocol.RecordTurn, at)
}
