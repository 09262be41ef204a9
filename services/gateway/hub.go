package gateway

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/ordered"
)

// hub is the live path of event streams: one ordered consumer per gateway
// reads every turn's new events and queues each for the relays following
// that turn. A relay costs a small queue here, not a JetStream consumer of
// its own (a consumer is ~50 KiB of server state, four goroutines and an
// API round trip before the first event).
//
// The hub never blocks on a client: a relay whose queue overflows is
// dropped and catches up from the stream with a private consumer, starting
// after the last event it took.
type hub struct {
	mu    sync.Mutex
	turns map[string][]*queue
	cc    *ordered.Reader
	limit int // a follower's backlog limit in bytes (liveQueueBytes)
	// lastSeq is the stream sequence of the last event read (0: none
	// since start). The stream holds turn events only, so the next one
	// read is lastSeq+1 unless the stream discarded events first (its
	// byte or age limit, a burst the hub fell behind).
	lastSeq uint64
	// gaps counts the times it did not: events the hub never read, any
	// follower's among them — a turn's end, after which nothing would
	// wake its relay (relay.missedLive).
	gaps uint64
}

func newHub() *hub { return &hub{turns: map[string][]*queue{}, limit: liveQueueBytes} }

// hubReadAhead is what the hub pulls ahead of its dispatch, in bytes.
const hubReadAhead = 4 << 20

// start consumes new events of every turn. The reader re-creates its
// consumer within a second or two of a lost one being noticed (its NATS node
// died), after the last event it read (internal/ordered).
func (h *hub) start(ctx context.Context, js jetstream.JetStream) error {
	nc := js.Conn()
	// Bounded in bytes (coalesced events can be large), but never below
	// one largest message: such a pull would never deliver it.
	cc, err := ordered.Start(ctx, js, ordered.Config{
		Stream:     protocol.StreamTurns,
		Filter:     []string{protocol.SubjTurnEventsAll},
		DeliverNew: true,
		Pull:       []jetstream.PullConsumeOpt{jetstream.PullMaxBytes(pullBytes(nc.MaxPayload(), hubReadAhead))},
		Heartbeat:  consumerHeartbeat,
	}, h.dispatch)
	if err != nil {
		return fmt.Errorf("gateway: live event consumer: %w", err)
	}
	h.mu.Lock()
	h.cc = cc
	h.lastSeq = 0
	h.mu.Unlock()
	return nil
}

// gapCount is how many times the hub found events the stream discarded
// before it read them.
func (h *hub) gapCount() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gaps
}

// stop stops the live consumer (start may run again: the store came back).
func (h *hub) stop() {
	h.mu.Lock()
	cc := h.cc
	h.cc = nil
	h.mu.Unlock()
	if cc != nil {
		cc.Stop()
	}
}

func (h *hub) dispatch(m jetstream.Msg) {
	id := protocol.TurnIDOfEvent(m.Subject())
	ev, ok := newEvent(m)
	if !ok {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lastSeq != 0 && ev.seq > h.lastSeq+1 {
		h.gaps++
	}
	h.lastSeq = max(h.lastSeq, ev.seq)
	fs := h.turns[id]
	for i := 0; i < len(fs); i++ {
		if !fs[i].offer(ev) {
			// Lagging: this follower now catches up from the stream.
			fs = append(fs[:i], fs[i+1:]...)
			i--
		}
	}
	if len(fs) == 0 {
		delete(h.turns, id)
	} else {
		h.turns[id] = fs
	}
}

// event is one turn event as a relay needs it, taken out of its NATS
// message. Relays and queues never keep the message itself: nats.go links
// each message it delivers to the one that arrived after it on the same
// subscription while it waited, and never unlinks it, so one message kept
// by a relay stuck writing to a client that stopped reading keeps the
// whole backlog that followed it alive — on the hub's subscription, every
// turn's events, done events carrying whole replies included.
type event struct {
	seq  uint64    // stream sequence: the SSE id
	num  uint64    // number in its turn (protocol.HeaderEventNum), 0 when it has none
	name string    // protocol.HeaderEvent
	data []byte    // the message's own payload buffer (nats.go allocates one per message)
	at   time.Time // when the stream stored it
}

// newEvent takes what a relay needs out of m; ok is false when m carries
// no stream metadata (not a stream message: nothing to relay).
func newEvent(m jetstream.Msg) (ev event, ok bool) {
	meta, err := m.Metadata()
	if err != nil {
		return event{}, false
	}
	h := m.Headers()
	num, _ := strconv.ParseUint(h.Get(protocol.HeaderEventNum), 10, 64)
	return event{seq: meta.Sequence.Stream, num: num, name: h.Get(protocol.HeaderEvent), data: m.Data(), at: meta.Timestamp}, true
}

// follow registers a relay for a turn's future events. Register before the
// turn can publish (the gateway picks the turn id), and nothing is missed.
func (h *hub) follow(turnID string) *queue {
	q := newQueue(h.limit)
	h.mu.Lock()
	h.turns[turnID] = append(h.turns[turnID], q)
	h.mu.Unlock()
	return q
}

// unfollow removes a relay (a no-op when the hub already dropped it).
func (h *hub) unfollow(turnID string, q *queue) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fs := h.turns[turnID]
	for i, g := range fs {
		if g == q {
			fs = append(fs[:i], fs[i+1:]...)
			break
		}
	}
	if len(fs) == 0 {
		delete(h.turns, turnID)
	} else {
		h.turns[turnID] = fs
	}
}

// queue hands a turn's events to one relay. The producer appends; the
// relay takes everything waiting at once, so a relay that fell behind sees
// its whole backlog and can coalesce it.
type queue struct {
	mu      sync.Mutex
	pending []event
	bytes   int           // of pending (msgSize)
	limit   int           // bytes
	dropped bool          // overflowed (live path): the relay must catch up
	ready   chan struct{} // signalled when pending becomes non-empty or dropped
	space   *sync.Cond    // private path: the producer waits for room
}

// Backlogs are bounded in bytes, so what the gateway holds for a client
// that does not read is the same small amount however long the turn is.
const (
	// liveQueueBytes bounds a live follower's backlog; beyond it the relay
	// reads from the stream instead.
	liveQueueBytes = 128 << 10
	// privateQueueBytes bounds a private consumer's backlog; beyond it the
	// consumer stops pulling and the stream holds the rest.
	privateQueueBytes = 64 << 10
)

// msgSize is what an event costs a queue: its data and a fixed allowance
// for the message's subject, headers and bookkeeping.
func msgSize(ev event) int { return len(ev.data) + 256 }

func newQueue(limit int) *queue {
	q := &queue{limit: limit, ready: make(chan struct{}, 1)}
	q.space = sync.NewCond(&q.mu)
	return q
}

func (q *queue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// offer appends m unless the queue is full, in which case the queue is
// marked dropped and offer reports false. It never blocks.
func (q *queue) offer(m event) bool {
	q.mu.Lock()
	if q.dropped || q.bytes >= q.limit {
		q.dropped = true
		q.mu.Unlock()
		q.signal()
		return false
	}
	q.pending = append(q.pending, m)
	q.bytes += msgSize(m)
	q.mu.Unlock()
	q.signal()
	return true
}

// drop marks the queue dropped: its relay delivers what it holds, then
// catches up from the stream.
func (q *queue) drop() {
	q.mu.Lock()
	q.dropped = true
	q.mu.Unlock()
	q.signal()
}

// put appends m, waiting while the queue is full until there is room or
// stop is closed. It is the private consumer's flow control.
func (q *queue) put(m event, stop <-chan struct{}) {
	q.mu.Lock()
	for q.bytes >= q.limit {
		select {
		case <-stop:
			q.mu.Unlock()
			return
		default:
		}
		q.space.Wait()
	}
	q.pending = append(q.pending, m)
	q.bytes += msgSize(m)
	q.mu.Unlock()
	q.signal()
}

// wake releases a producer blocked in put (used when the relay ends).
func (q *queue) wake() {
	q.mu.Lock()
	q.space.Broadcast()
	q.mu.Unlock()
}

// take returns everything waiting (reusing buf) and whether the queue was
// dropped by the live path.
func (q *queue) take(buf []event) ([]event, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := append(buf[:0], q.pending...)
	clear(q.pending)
	q.pending = q.pending[:0]
	q.bytes = 0
	q.space.Broadcast()
	return out, q.dropped
}
