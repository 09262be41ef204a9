package gateway

import (
	"context"
	"time"
)

// orphanWatch is what is left of the gateway's judgment of orphaned turns:
// nothing. A turn's ownership is the turn runners' business (package
// services/turnrunner/ownership): a runner takes over a turn whose runner
// is gone, and a runner ends a turn that none can take over, with the
// terminal error in the turn's stream. A relay therefore only watches the
// turn's events — its subscription — and makes no bus request however long
// the turn is quiet (an approval may keep it so for minutes). With no
// runner at all, nobody judges: the turn waits, and the first runner back
// resumes it (see "Distributed turns" in docs/architecture.md).
//
// The relay still calls tick on its idle timer; it costs no I/O.
type orphanWatch struct {
	s      *Service
	turnID string
}

// orphanIdle is how long a stream must be quiet before the relay calls
// tick.
const orphanIdle = 3 * time.Second

// orphanVerdict is what one look found.
type orphanVerdict int

const (
	orphanNo orphanVerdict = iota // the turn goes on: keep relaying
	// orphanGone: there is nothing more to relay (never reported now: a
	// relay finds a turn whose events are all gone by itself).
	orphanGone
)

// tick reports orphanNo: the runners end the turns no runner is left to
// finish, in the turn's stream, which this relay already follows.
func (o *orphanWatch) tick(context.Context) orphanVerdict { return orphanNo }
