package turnevents

import (
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

// StepsOnly is an event writer that stores and publishes nothing: it hands
// the text of each step event to step. A stand-in turn that builds a
// placed sub-agent's tools on another runner writes through it, so an MCP
// server's trouble reaches the parent's stream as a step and nothing else
// of the stand-in is written.
func StepsOnly(step func(string)) Steps { return Steps{step: step} }

// Steps is StepsOnly's writer; it has the methods of Publisher a turn
// uses.
type Steps struct{ step func(string) }

// Emit hands a step's text to the writer's function and drops the rest.
func (e Steps) Emit(event string, data any) error {
	if td, ok := data.(protocol.TokenData); ok && event == protocol.EventStep {
		e.step(td.Content)
	}
	return nil
}

// Note, Mark and Finish write nothing.
func (Steps) Note(string, any) error   { return nil }
func (Steps) Mark(string, any) error   { return nil }
func (Steps) Finish(string, any) error { return nil }

// Hold, Release, Discard, ContinueAt, Drain and Close do nothing; Last is 0.
func (Steps) Hold()               {}
func (Steps) Release()            {}
func (Steps) Discard()            {}
func (Steps) ContinueAt(uint64)   {}
func (Steps) Last() uint64        { return 0 }
func (Steps) Drain(time.Duration) {}
func (Steps) Close()              {}
