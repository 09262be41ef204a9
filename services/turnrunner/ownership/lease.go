package ownership

import (
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

// Leases. Every accepted turn has a lease in BucketLeases naming its
// runner, and every runner writes its entry in BucketRunners every
// Heartbeat. A lease whose runner's entry has not changed for StaleAfter
// (the runner died), names an earlier incarnation of its runner (it
// restarted), or was released (the runner shut down) is claimed by
// another runner with a compare-and-set on its revision, and that runner
// resumes the turn from its checkpoint. These are the runners' own state:
// no other service reads them (a gateway asks protocol.LookupTurn).

// Buckets of the turn runners.
const (
	// BucketLeases holds one Lease per accepted, unfinished turn, keyed
	// by turn id.
	BucketLeases = "waggle_turn_leases"
	// BucketRunners holds one RunnerBeat per live turn runner, keyed by
	// runner id and rewritten every Heartbeat: one write per runner,
	// however many turns it runs.
	BucketRunners = "waggle_runners"
)

// Lease timing. Liveness is judged by a runner's entry in BucketRunners
// changing, on the observer's own clock, so no two machines' clocks are
// ever compared.
const (
	// Heartbeat is how often a runner rewrites its BucketRunners entry.
	Heartbeat = time.Second
	// StaleAfter is how long a runner's entry may stay unchanged before
	// any runner may claim its turns.
	StaleAfter = 3 * time.Second
	// OrphanAfter is how long a lease that may be claimed stays unclaimed
	// (every runner full) before a runner ends its turn.
	OrphanAfter = 10 * time.Second
	// LeaseMaxAge is BucketLeases' MaxAge: a lease not written for this
	// long is garbage. Runners rewrite their leases well within it.
	LeaseMaxAge = time.Hour
	// RunnerMaxAge is BucketRunners' MaxAge: a dead runner's entry goes.
	RunnerMaxAge = time.Minute
)

// Lease is the value of a turn's lease.
type Lease struct {
	// Request is the turn as the gateway sent it: everything a runner
	// needs to run or resume it.
	Request protocol.TurnRequest `json:"request"`
	// Runner owns the turn; "" after a release.
	Runner string `json:"runner,omitempty"`
	// Incarnation is the owner's RunnerBeat.Incarnation.
	Incarnation string `json:"incarnation,omitempty"`
	// Released means the owner gave the turn up (graceful shutdown):
	// claim it at once instead of waiting for StaleAfter.
	Released bool `json:"released,omitempty"`
	// Accepted is when the turn was first accepted (Unix ms).
	Accepted int64 `json:"accepted"`
	// Heartbeat is the owner's clock at its last write (Unix ms), for
	// operators.
	Heartbeat int64 `json:"heartbeat"`
	// Claims counts takeovers.
	Claims int `json:"claims,omitempty"`
	// Followed is set once any client attached, so a runner that takes the
	// turn over applies the disconnect grace to it too.
	Followed bool `json:"followed,omitempty"`
}

// RunnerBeat is the value of a runner's entry in BucketRunners.
type RunnerBeat struct {
	// Incarnation is random per process start: leases of an earlier
	// incarnation of the same runner id are its dead predecessor's.
	Incarnation string `json:"incarnation"`
	// Heartbeat is the runner's clock (Unix ms), for operators; liveness
	// is judged by the entry's revision changing.
	Heartbeat int64 `json:"heartbeat"`
	// Turns is how many turns' leases the runner holds (the turns it
	// runs, or is about to), for operators.
	Turns int `json:"turns"`
}
