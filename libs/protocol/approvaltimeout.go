package protocol

import "time"

// DefaultApprovalTimeout is how long a tool approval waits for a human
// before it is denied as timed out, unless configured: the approval
// service's deadline and the runner's gate both start from it.
const DefaultApprovalTimeout = 5 * time.Minute
