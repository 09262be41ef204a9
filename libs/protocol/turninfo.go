package protocol

// Asking about a turn. A gateway that lets a client follow or cancel a
// turn asks the turn runners (LookupTurn, one queue group: any live runner
// answers) instead of reading their leases or the turn's first event: how
// a turn is owned is the runners' business, and what crosses to the
// gateway is only this answer.

// States of a TurnInfo.
const (
	// TurnRunning: the turn runs, waits for its session, or waits for a
	// runner to take it over (Runner says which runner owns it; "" when
	// none does right now).
	TurnRunning = "running"
	// TurnPaused: the turn waits for an approval (its last event asks for
	// one).
	TurnPaused = "paused"
	// TurnEnded: the turn's terminal event is stored; its events replay.
	TurnEnded = "ended"
	// TurnUnknown: no such turn, or it ended and none of its events is
	// left (the stream's window moved on).
	TurnUnknown = "unknown"
)

// TurnInfoRequest asks about one turn. A bad turn id is Invalid.
type TurnInfoRequest struct {
	TurnID string `json:"turnId"`
}

// TurnInfo is a runner's answer to a TurnInfoRequest.
type TurnInfo struct {
	// State is TurnRunning, TurnPaused, TurnEnded or TurnUnknown.
	State string `json:"state"`
	// Runner owns the turn ("" when none does, or the turn ended).
	Runner string `json:"runner,omitempty"`
	// Workspace is the turn's workspace, for a team server's check of who
	// may follow or cancel it ("" when unknown: treat the turn as absent).
	Workspace string `json:"workspace,omitempty"`
}
