package protocol

// Approval decisions reach the runner that waits for them from the
// approval service, which owns BucketApprovals: it publishes every final
// state on ApprovalDecided (a prompt notice, not durable) and answers
// GetApprovalState with the entry's current state (durable). A waiter
// subscribes first and asks second, so a decision taken between the two is
// either in the answer or delivered on the subscription; it asks again
// now and then, so a notice lost while it was reconnecting (or never sent:
// the service died between its write and its publish) delays the decision
// but never loses it.

// ApprovalStateRequest names the approval whose state is asked for.
type ApprovalStateRequest struct {
	RequestID string `json:"requestId"`
}

// ApprovalStateReply is an approval's current state (ApprovalState*).
type ApprovalStateReply struct {
	State string `json:"state"`
}

// ApprovalDecidedEvent is the body of ApprovalDecided: the approval
// reached a final state (ApprovalFinal).
type ApprovalDecidedEvent struct {
	RequestID string `json:"requestId"`
	TurnID    string `json:"turnId"`
	State     string `json:"state"`
}
