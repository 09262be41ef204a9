package turnevents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/protocol"
)

// testWait bounds every wait of these tests: generous for a loaded
// machine; a passing test never waits it out.
const testWait = 60 * time.Second

// newJS opens JetStream on nc as the runner does.
func newJS(t *testing.T, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(AsyncWindow),
		jetstream.WithPublishAsyncTimeout(PublishWait))
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return js
}

// createStream creates the turn stream as the bus does (duplicate window
// included), with the given storage and replicas.
func createStream(t *testing.T, js jetstream.JetStream, storage jetstream.StorageType, replicas int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	for {
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := js.CreateOrUpdateStream(actx, jetstream.StreamConfig{
			Name: protocol.StreamTurns, Subjects: []string{protocol.SubjTurnEventsAll},
			Storage: storage, Replicas: replicas, Duplicates: 2 * time.Minute,
		})
		acancel()
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("create stream: %v", err)
		}
		t.Logf("create stream: %v (retried)", err)
		time.Sleep(100 * time.Millisecond) // a forming cluster answers later
	}
}

// storedEvent is one event as the stream holds it.
type storedEvent struct {
	event string
	num   uint64
	data  []byte
}

// content is a token event's text.
func (e storedEvent) content(t *testing.T) string {
	t.Helper()
	var d protocol.TokenData
	if err := json.Unmarshal(e.data, &d); err != nil {
		t.Fatalf("token data %q: %v", e.data, err)
	}
	return d.Content
}

// readStored returns every event of turnID in the stream, in stream
// order (read again from the start if the read breaks: a cluster that
// just elected a leader may refuse the first consumer).
func readStored(t *testing.T, js jetstream.JetStream, turnID string) []storedEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	for {
		evs, err := tryReadStored(ctx, js, turnID)
		if err == nil {
			return evs
		}
		if ctx.Err() != nil {
			t.Fatalf("read events: %v", err)
		}
		t.Logf("read events: %v (retried)", err)
		time.Sleep(100 * time.Millisecond)
	}
}

func tryReadStored(ctx context.Context, js jetstream.JetStream, turnID string) ([]storedEvent, error) {
	st, err := js.Stream(ctx, protocol.StreamTurns)
	if err != nil {
		return nil, err
	}
	last, err := st.GetLastMsgForSubject(ctx, protocol.TurnEvents(turnID))
	if err != nil {
		return nil, err
	}
	// Message by message: a consumer is what a cluster that just lost a
	// node answers least reliably, and the test reads few events.
	var out []storedEvent
	for seq := uint64(1); seq <= last.Sequence; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("at %d of %d: %w", seq, last.Sequence, err)
		}
		if m.Subject != protocol.TurnEvents(turnID) {
			continue
		}
		n, _ := strconv.ParseUint(m.Header.Get(protocol.HeaderEventNum), 10, 64)
		out = append(out, storedEvent{event: m.Header.Get(protocol.HeaderEvent), num: n, data: m.Data})
	}
	return out, nil
}

// checkDense fails t unless a reader sees the events numbered 1, 2, 3, …
// (none lost, none doubled, none reordered) and returns what it sees. The
// reader keeps the rule of the gateway's relay: a number already seen is
// a copy (dropped); one ahead of the next is held until the next arrives,
// then dropped (the publisher re-publishes it after its predecessors).
func checkDense(t *testing.T, evs []storedEvent) []storedEvent {
	t.Helper()
	var seen []storedEvent
	var ahead []storedEvent
	var last uint64
	for _, e := range evs {
		switch {
		case e.num <= last:
		case e.num == last+1:
			seen = append(seen, e)
			last = e.num
			ahead = ahead[:0]
		default:
			ahead = append(ahead, e)
		}
	}
	if len(ahead) > 0 {
		var nums []uint64
		for _, e := range evs {
			nums = append(nums, e.num)
		}
		t.Fatalf("events %d.. arrived without event %d before them: lost (stream order %v)", ahead[0].num, last+1, nums)
	}
	if len(seen) != len(evs) {
		t.Logf("the stream holds %d events, a reader sees %d (copies from a re-publish)", len(evs), len(seen))
	}
	return seen
}

// tokenText joins the token events' text.
func tokenText(t *testing.T, evs []storedEvent) (string, int) {
	t.Helper()
	var s []byte
	n := 0
	for _, e := range evs {
		if e.event == protocol.EventToken {
			s = append(s, e.content(t)...)
			n++
		}
	}
	return string(s), n
}

// faultyJS is a JetStream whose async acknowledgements a test controls:
// the publish really happens, but the future the publisher gets is
// answered only as the test says (held until released, lost, or failed).
type faultyJS struct {
	jetstream.JetStream

	mu sync.Mutex
	// gate, when not nil, holds every acknowledgement until it is closed.
	gate chan struct{}
	// lose says whether to lose the acknowledgement of event num (the
	// message itself is stored).
	lose func(num uint64) bool
	// refuse says whether to refuse event num the first time, as a stream
	// without a leader does (the message is not stored).
	refuse  func(num uint64) bool
	refused map[uint64]bool
	// published counts async publishes per event number; resent counts
	// synchronous ones (re-publishes).
	published map[uint64]int
	resent    atomic.Int64
}

func newFaulty(js jetstream.JetStream) *faultyJS {
	return &faultyJS{JetStream: js, published: map[uint64]int{}}
}

func (f *faultyJS) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	num, _ := strconv.ParseUint(m.Header.Get(protocol.HeaderEventNum), 10, 64)
	f.mu.Lock()
	f.published[num]++
	gate, lose := f.gate, f.lose != nil && f.lose(num)
	refuse := f.refuse != nil && f.refuse(num) && !f.refused[num]
	if refuse {
		if f.refused == nil {
			f.refused = map[uint64]bool{}
		}
		f.refused[num] = true
	}
	f.mu.Unlock()
	if refuse {
		fut := &heldFuture{msg: m, ok: make(chan *jetstream.PubAck, 1), err: make(chan error, 1)}
		fut.err <- jetstream.ErrNoStreamResponse
		return fut, nil
	}
	real, err := f.JetStream.PublishMsgAsync(m, opts...)
	if err != nil || (gate == nil && !lose) {
		return real, err
	}
	fut := &heldFuture{msg: m, ok: make(chan *jetstream.PubAck, 1), err: make(chan error, 1)}
	if lose {
		return fut, nil // answered never: the acknowledgement is lost
	}
	go func() {
		var ack *jetstream.PubAck
		var ferr error
		select {
		case ack = <-real.Ok():
		case ferr = <-real.Err():
		}
		<-gate
		if ferr != nil {
			fut.err <- ferr
		} else {
			fut.ok <- ack
		}
	}()
	return fut, nil
}

func (f *faultyJS) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	f.resent.Add(1)
	return f.JetStream.PublishMsg(ctx, m, opts...)
}

// asyncCount is how many times event num was published asynchronously.
func (f *faultyJS) asyncCount(num uint64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.published[num]
}

// heldFuture is a PubAckFuture answered by faultyJS.
type heldFuture struct {
	msg *nats.Msg
	ok  chan *jetstream.PubAck
	err chan error
}

func (h *heldFuture) Ok() <-chan *jetstream.PubAck { return h.ok }
func (h *heldFuture) Err() <-chan error            { return h.err }
func (h *heldFuture) Msg() *nats.Msg               { return h.msg }

// within fails t unless done is closed in time.
func within(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(testWait):
		t.Fatalf("%s: not done in %s", what, testWait)
	}
}
