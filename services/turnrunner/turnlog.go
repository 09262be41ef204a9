package turnrunner

import (
	"context"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/turnevents"
)

// turnLog is what a turn's stored events say about how far it got
// (turnevents.Log, in the shape the resume code reads).
type turnLog struct {
	ended  bool
	last   uint64
	text   string
	tokens int
	path   *protocol.PathCheckpoint
	steps  []protocol.StepCheckpoint
	execs  []protocol.ExecCheckpoint
}

// readTurnLog reads every event of turnID stored so far.
func (s *Service) readTurnLog(ctx context.Context, turnID string) (turnLog, error) {
	lg, err := turnevents.ReadLog(ctx, s.js, turnID)
	return turnLog{ended: lg.Ended, last: lg.Last, text: lg.Text, tokens: lg.Tokens, path: lg.Path, steps: lg.Steps, execs: lg.Execs}, err
}
