package turn

import "time"

// events is what a turn needs of its event writer
// (turnevents.Publisher): publish its events in order, end it, say how far
// the numbering got, and flush.
type events interface {
	// Emit publishes an event (a token is coalesced while the bus is
	// behind) without waiting; Note does the same for an internal marker.
	Emit(event string, data any) error
	Note(event string, data any) error
	// Mark publishes a checkpoint and waits until it is stored.
	Mark(event string, data any) error
	// Finish publishes the terminal event and waits until it is stored.
	Finish(event string, data any) error
	// Hold keeps events back until Release (publish them) or Discard.
	Hold()
	Release()
	Discard()
	// ContinueAt continues the numbering after event n (a turn taken
	// over); Last is the number of the last event.
	ContinueAt(n uint64)
	Last() uint64
	// Drain waits up to d until every event is stored; Close ends the
	// writer's background work.
	Drain(d time.Duration)
	Close()
}
