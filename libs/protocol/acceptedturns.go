package protocol

// The session store's record of accepted turns. A turn runner whose
// coordination state (leases, session queues) is kept without an fsync per
// write — a single-node NATS embedded in the same process, where a crash
// of the runner is a crash of NATS — makes the session store the durable
// record of every turn it accepts, so that a full restart can rebuild what
// NATS lost in its last flush window:
//
//   - a turn that holds its session at once is recorded by its user
//     message's append (AppendRequest.Accepted): no write of its own;
//   - a turn that waits behind another is recorded by RecordTurn (fsynced)
//     before its client is told it waits;
//   - a turn is closed by its reply's append (the key AppendKey(turn,
//     "assistant")) or by CloseTurn (it ended without one);
//   - after a restart the runner asks OpenTurns and puts back the lease and
//     the place of every open turn NATS no longer has, in place order,
//     before it takes any new turn.
//
// These are bus-only endpoints of the store, called by turn runners only;
// no HTTP route reaches them.

// AcceptedTurn is the store's record of one accepted, unfinished turn.
type AcceptedTurn struct {
	// Request is the turn as the gateway sent it: what a runner needs to
	// run it again.
	Request TurnRequest `json:"request"`
	// Place is the turn's position in its session's queue when it was
	// accepted (the join's stream sequence): a session's open turns run in
	// Place order.
	Place uint64 `json:"place"`
	// Accepted is when the runner accepted the turn (Unix ms).
	Accepted int64 `json:"accepted"`
}

// RecordTurnReply confirms a durable RecordTurn (fsync done).
type RecordTurnReply struct{}

// CloseTurnRequest closes a recorded turn that ended without a reply (it
// was cancelled while it waited, or ended because no runner could take
// it).
type CloseTurnRequest struct {
	SessionRef
	TurnID string `json:"turnId"`
}

// CloseTurnReply answers CloseTurn.
type CloseTurnReply struct{}

// OpenTurnsRequest asks for every open recorded turn.
type OpenTurnsRequest struct{}

// OpenTurnsReply lists the open turns: recorded, not closed, and with no
// reply in their session's history; ordered by workspace, session, then
// Place.
type OpenTurnsReply struct {
	Turns []AcceptedTurn `json:"turns"`
}
