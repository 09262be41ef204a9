package protocol

// Orphaned turns. A turn's lease, its runner's heartbeat and the end of its
// event stream belong to the turn runners, so a gateway relaying a turn
// whose stream has gone quiet does not judge or end the turn itself: it
// asks the runners (ReapTurn, one queue group: any live runner answers)
// and acts on their verdict. The judgment follows OrphanCheck's rules: the
// gateway keeps the clock (an OrphanCheck over the liveness revisions the
// runners report, on its own clock), a runner reads the buckets, probes the
// owner and, when the turn is orphaned, removes its lease at the revision it
// judged and publishes the terminal error (TurnOrphanedText, Nats-Msg-Id
// TurnEndMsgID).

// Verdicts of a ReapReply.
const (
	// ReapAlive: the turn has a runner, or it is not orphaned (yet), or it
	// could not be ended now (a runner claimed it meanwhile): keep relaying.
	ReapAlive = "alive"
	// ReapEnded: the runner that answered ended the turn; the terminal
	// error is in the stream for every follower.
	ReapEnded = "ended"
	// ReapGone: the turn ended long ago and none of its events is left
	// (the stream's window moved on), or its own end was stored already:
	// there is nothing more to relay.
	ReapGone = "gone"
)

// ReapRequest asks a turn runner about one turn a gateway relays.
type ReapRequest struct {
	TurnID string `json:"turnId"`
	// End asks the runner to end the turn if it is orphaned: its liveness
	// revision is still Liveness (the one the gateway's OrphanCheck judged
	// unchanged for LeaseOrphanAfter), it has not ended, and its owner does
	// not answer a probe. Without End the runner only looks.
	End bool `json:"end,omitempty"`
	// Liveness is the liveness revision End was judged at.
	Liveness uint64 `json:"liveness,omitempty"`
}

// ReapReply is a runner's verdict on a ReapRequest.
type ReapReply struct {
	// Verdict is ReapAlive, ReapEnded or ReapGone.
	Verdict string `json:"verdict"`
	// Liveness is the turn's liveness revision as OrphanCheck defines it:
	// its runner's BucketRunners entry revision when the lease names a
	// runner of the lease's incarnation, else the lease's revision (0 when
	// there is none).
	Liveness uint64 `json:"liveness"`
	// Terminal reports that the turn's last stored event ends it.
	Terminal bool `json:"terminal,omitempty"`
}
