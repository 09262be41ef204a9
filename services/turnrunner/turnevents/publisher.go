// Package turnevents writes one chat turn's events onto its JetStream
// subject (numbered, coalesced, bounded, re-published when an
// acknowledgement is lost) and reads back what a turn's stored events say.
package turnevents

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/protocol"
)

// JetStream is what a Publisher needs of a JetStream client
// (jetstream.JetStream has it; tests wrap one to lose acknowledgements).
type JetStream interface {
	PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error)
	PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
	Conn() *nats.Conn
}

const (
	// PublishWait is how long the bus may stay unable to store a turn's
	// events (no leader, no connection, no acknowledgement) before the
	// turn fails. It is also the runner connection's async ack timeout.
	PublishWait = 30 * time.Second
	// AsyncWindow is the runner connection's async publish window, shared
	// by every turn of the runner (each keeps at most tokenWindow token
	// events in it).
	AsyncWindow = 16384

	// maxPendingText bounds the token text a turn holds while the bus is
	// behind; past it the model read waits.
	maxPendingText = 64 << 10
	// tokenWindow and tokenWindowBytes bound the events of one turn
	// waiting for the stream before further tokens are joined: what a turn
	// holds (and may have to re-publish) while the bus is behind.
	tokenWindow      = 32
	tokenWindowBytes = 128 << 10
	// suspectAfter is how long an event may wait for its acknowledgement
	// before it counts as lost and everything not acknowledged is
	// re-published. Order does not depend on it (see republish); it is
	// the pause after a silent loss, and long enough that a stream that
	// is merely slow under load is not sent copies: about a cluster's
	// election time.
	suspectAfter = 5 * time.Second
	// resendWait bounds one synchronous re-publish.
	resendWait = 2 * time.Second
)

// asyncOpts turns off the client's own retry of a publish that found no
// stream: it re-sends the message later, behind the turn's newer events.
// The publisher re-publishes in order itself.
var asyncOpts = []jetstream.PublishOpt{jetstream.WithRetryAttempts(0), jetstream.WithStallWait(PublishWait)}

// ErrClosed is returned by a publish that had to wait for the bus after
// the publisher was closed.
var ErrClosed = errors.New("turnevents: publisher closed")

// Publisher puts one turn's events on its JetStream subject.
//
// Numbering: every event carries protocol.HeaderEventNum, 1, 2, 3, … with
// no hole, and a Nats-Msg-Id derived from the turn and that number (the
// terminal event: protocol.TurnEndMsgID), so a re-published event is
// stored once (the stream's duplicate window).
//
// Events are published asynchronously (never a round trip per token) and
// in order. Tokens are coalesced by acknowledgement, not by a timer: a
// token is its own event while fewer than tokenWindow events of the turn
// wait for the stream; past that, tokens are joined and go out as one
// event when the oldest is acknowledged. A bus that keeps up sees every
// token as its own event with no added delay; a slow one gets fewer,
// larger events instead of a growing backlog. Nothing but consecutive
// tokens is ever merged.
//
// Lost acknowledgements: an event that is refused (no stream leader, no
// connection) or not acknowledged within suspectAfter is taken as lost.
// The publisher then stops sending, re-publishes every event not
// acknowledged, oldest first, each waiting for its acknowledgement, and
// only then goes on (see republish). So a stream that loses its leader
// pauses the turn and, as its readers see it, loses, doubles and
// reorders nothing. Only a bus that stays away PublishWait fails it.
//
// Backpressure: when the joined text reaches maxPendingText the emitting
// goroutine (the model read) waits for the bus.
type Publisher struct {
	js      JetStream
	turnID  string
	subject string
	// onToken, when set, is called after each token is handed over.
	onToken func()
	// suspect is suspectAfter (tests shorten it).
	suspect time.Duration

	mu   sync.Mutex
	cond *sync.Cond // signalled on every change a waiter may wait for
	// n is the number of the last event built; acked the number up to
	// which every event is stored.
	n, acked uint64
	// pending is token text waiting to be sent as one event.
	pending []byte
	// unacked are the events sent and not known to be stored, oldest
	// first; unackedBytes the size of their data.
	unacked      []sentEvent
	unackedBytes int
	// pumping is set while the pump goroutine runs; it is then the only
	// reader of the futures.
	pumping bool
	// waiters counts goroutines waiting for an acknowledgement.
	waiters int
	// lost is set when an event must be re-published; republishing while
	// that runs (nothing new is sent meanwhile).
	lost, republishing bool
	// epoch counts re-publish rounds (the new ids of retryCopy).
	epoch uint64
	// err is the first failure; every later publish reports it.
	err error
	// held keeps every event back (in order, tokens joined) until Release
	// or Discard: the turn's work starts while the user's message is
	// being stored, but nothing reaches a client before it is durable.
	// heldN is the event number when the hold began.
	held       bool
	heldMsgs   []sentEvent
	heldTokens int // token events among heldMsgs
	heldN      uint64
	// done stops the pump when the turn ends; closed is set with it.
	done   chan struct{}
	closed bool
	pump   sync.WaitGroup
}

// sentEvent is an event waiting for its acknowledgement.
type sentEvent struct {
	m   *nats.Msg
	f   jetstream.PubAckFuture // nil when the send failed
	at  time.Time              // when it was sent
	num uint64
}

// New returns the publisher of turnID's events. onToken, if not nil, is
// called after each token is handed over. Nothing runs until an event is
// published.
func New(js JetStream, turnID string, onToken func()) *Publisher {
	p := &Publisher{js: js, turnID: turnID, subject: protocol.TurnEvents(turnID), onToken: onToken,
		suspect: suspectAfter, done: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// ContinueAt makes the next event number n+1: a turn taken over from
// another runner continues its numbering after the last event stored.
func (p *Publisher) ContinueAt(n uint64) {
	p.mu.Lock()
	p.n, p.acked = n, n
	p.mu.Unlock()
}

// Last is the number of the last event published (or held).
func (p *Publisher) Last() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// MsgID is the Nats-Msg-Id of turnID's event number n (the terminal event
// uses protocol.TurnEndMsgID instead).
func MsgID(turnID string, n uint64) string {
	return turnID + ":" + strconv.FormatUint(n, 10)
}

// next builds the next event. p.mu is held.
func (p *Publisher) next(event string, body []byte) sentEvent {
	p.n++
	m := &nats.Msg{Subject: p.subject, Data: body, Header: make(nats.Header, 3)}
	m.Header[protocol.HeaderEvent] = []string{event}
	m.Header[protocol.HeaderEventNum] = []string{strconv.FormatUint(p.n, 10)}
	m.Header[jetstream.MsgIDHeader] = []string{MsgID(p.turnID, p.n)}
	return sentEvent{m: m, num: p.n}
}

// send publishes e asynchronously. A send the bus refuses is kept and
// re-published by the pump. p.mu is held, and no re-publish is due
// (ready).
func (p *Publisher) send(e sentEvent) {
	e.at = time.Now()
	f, err := p.js.PublishMsgAsync(e.m, asyncOpts...)
	if err != nil {
		// The connection is reconnecting (it buffers nothing meanwhile) or
		// the window stayed full: re-published once the bus answers.
		p.lost = true
		p.startPump()
	}
	e.f = f
	p.unacked = append(p.unacked, e)
	p.unackedBytes += len(e.m.Data)
}

// fail records the publisher's first failure. p.mu is held.
func (p *Publisher) fail(err error) {
	if p.err == nil {
		p.err = err
	}
	p.cond.Broadcast()
}

// sendPending publishes the joined tokens, if any. p.mu is held.
func (p *Publisher) sendPending() {
	if len(p.pending) == 0 {
		return
	}
	body := tokenBody(p.pending)
	p.pending = p.pending[:0]
	p.send(p.next(protocol.EventToken, body))
	p.cond.Broadcast()
}

// pop drops the oldest event sent: it is stored. p.mu is held.
func (p *Publisher) pop() {
	e := p.unacked[0]
	p.unackedBytes -= len(e.m.Data)
	p.acked = e.num
	p.unacked[0] = sentEvent{}
	p.unacked = p.unacked[1:]
	if len(p.unacked) == 0 {
		p.unacked = p.unacked[:0:0] // let the backing array go
	}
	p.cond.Broadcast()
}

// windowOpen reports whether another token event may be sent now.
func (p *Publisher) windowOpen() bool {
	return len(p.unacked) < tokenWindow && p.unackedBytes < tokenWindowBytes
}

// settle drops the acknowledged events at the front of unacked and notes
// a lost one, without waiting. p.mu is held and the pump is not running.
func (p *Publisher) settle() {
	for len(p.unacked) > 0 {
		e := p.unacked[0]
		if e.f == nil {
			p.lost = true
			return
		}
		done, err := settled(e.f)
		if !done {
			if time.Since(e.at) > p.suspect {
				p.lost = true
			}
			return
		}
		if err != nil {
			p.lost = true
			return
		}
		p.pop()
	}
}

// settled reports, without waiting, whether f has its answer (and the
// error it failed with). Only one goroutine may read a future: its
// channels deliver once.
func settled(f jetstream.PubAckFuture) (bool, error) {
	select {
	case <-f.Ok():
		return true, nil
	case err := <-f.Err():
		return true, err
	default:
		return false, nil
	}
}

// ready waits until nothing is to be re-published, so a new event may be
// sent after every earlier one. p.mu is held.
func (p *Publisher) ready() error {
	for {
		if p.err != nil {
			return p.err
		}
		if !p.pumping {
			p.settle()
		}
		if !p.lost && !p.republishing {
			return nil
		}
		if p.closed {
			return ErrClosed
		}
		p.startPump()
		p.cond.Wait()
	}
}

// Token publishes one token of the reply (coalesced while the bus is
// behind, see Publisher).
func (p *Publisher) Token(content string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	if p.onToken != nil {
		defer p.onToken()
	}
	if p.held {
		// Held tokens are kept one event each, like tokens on a bus that
		// keeps up, up to the window; beyond it they are joined.
		if len(p.pending) == 0 && p.heldTokens < tokenWindow {
			p.heldMsgs = append(p.heldMsgs, p.next(protocol.EventToken, tokenBodyString(content)))
			p.heldTokens++
			return nil
		}
		p.pending = append(p.pending, content...)
		for len(p.pending) >= maxPendingText && p.held && p.err == nil && !p.closed {
			p.cond.Wait()
		}
		return p.err
	}
	if !p.pumping {
		p.settle()
	}
	if !p.lost && !p.republishing && len(p.pending) == 0 && p.windowOpen() {
		p.send(p.next(protocol.EventToken, tokenBodyString(content)))
		return nil
	}
	p.pending = append(p.pending, content...)
	p.startPump()
	for len(p.pending) >= maxPendingText && p.err == nil && !p.closed {
		p.cond.Wait()
	}
	return p.err
}

// event publishes a non-token event after the pending tokens and returns
// its number (0 while held).
func (p *Publisher) event(event string, data any) (uint64, error) {
	body, err := encode(data)
	if err != nil {
		return 0, fmt.Errorf("turnevents: encode %s event: %w", event, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return 0, p.err
	}
	if p.held {
		if len(p.pending) > 0 {
			p.heldMsgs = append(p.heldMsgs, p.next(protocol.EventToken, tokenBody(p.pending)))
			p.pending = p.pending[:0]
		}
		p.heldMsgs = append(p.heldMsgs, p.next(event, body))
		return 0, nil
	}
	if err := p.ready(); err != nil {
		return 0, err
	}
	p.sendPending()
	e := p.next(event, body)
	p.send(e)
	return e.num, nil
}

// Emit publishes an event without waiting. Token events go through Token.
func (p *Publisher) Emit(event string, data any) error {
	if event == protocol.EventToken {
		if t, ok := data.(protocol.TokenData); ok {
			return p.Token(t.Content)
		}
	}
	_, err := p.event(event, data)
	return err
}

// Note publishes an internal event without waiting. It is still stored
// before every event the turn publishes after it; only Mark's guarantee
// (durable before work with side effects begins) is not given.
func (p *Publisher) Note(event string, data any) error { return p.Emit(event, data) }

// Begin publishes the first event of a turn or run and waits for the
// stream to store it. It reports false when the stream already held it:
// the same start delivered a second time (a request sent again after its
// answer was lost on a dying cluster node), whose first delivery runs the
// work. The event's id, MsgID(turnID, 1), makes the stream the one judge
// across runners, for its duplicate window (minutes; a start is resent
// within seconds). Begin must come before any other event; a failure
// leaves the publisher unusable, as the start it belongs to failed.
func (p *Publisher) Begin(ctx context.Context, event string, data any) (first bool, err error) {
	body, err := encode(data)
	if err != nil {
		return false, fmt.Errorf("turnevents: encode %s event: %w", event, err)
	}
	p.mu.Lock()
	if p.n != 0 || p.held {
		p.mu.Unlock()
		return false, fmt.Errorf("turnevents: %s for %s is not the first event", event, p.turnID)
	}
	m := p.next(event, body).m
	p.mu.Unlock()
	ack, err := p.js.PublishMsg(ctx, m)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.fail(err)
		return false, fmt.Errorf("turnevents: publish %s for %s: %w", event, p.turnID, err)
	}
	p.acked = 1
	return !ack.Duplicate, nil
}

// Mark publishes an internal event and waits for the stream to store it
// (and with it every earlier event of the turn): a checkpoint must be
// durable before the work it describes begins.
func (p *Publisher) Mark(event string, data any) error {
	p.waitRelease()
	n, err := p.event(event, data)
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New("turnevents: publisher closed while held")
	}
	if err := p.waitAcked(n, PublishWait); err != nil {
		return fmt.Errorf("turnevents: publish %s for %s: %w", event, p.turnID, err)
	}
	return nil
}

// Finish publishes the terminal event and waits for the stream to store it
// (and so every earlier event). Its id, protocol.TurnEndMsgID, makes any
// second end of the turn (a retry, a reaper's) harmless.
func (p *Publisher) Finish(event string, data any) error {
	body, err := encode(data)
	if err != nil {
		return fmt.Errorf("turnevents: encode %s event: %w", event, err)
	}
	p.mu.Lock()
	if p.err != nil {
		// Earlier events were lost (the bus stayed away); the end must
		// still reach the followers once the bus is back, or they wait
		// forever. They see the hole in the numbering first.
		m := p.next(event, body).m
		m.Header[jetstream.MsgIDHeader] = []string{protocol.TurnEndMsgID(p.turnID)}
		p.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), PublishWait)
		defer cancel()
		if _, err := p.js.PublishMsg(ctx, m); err != nil {
			return fmt.Errorf("turnevents: publish %s for %s after a failure: %w", event, p.turnID, err)
		}
		return nil
	}
	if p.held {
		p.mu.Unlock()
		return errors.New("turnevents: terminal event while events are held")
	}
	if err := p.ready(); err != nil {
		p.mu.Unlock()
		return fmt.Errorf("turnevents: publish %s for %s: %w", event, p.turnID, err)
	}
	p.sendPending()
	e := p.next(event, body)
	e.m.Header[jetstream.MsgIDHeader] = []string{protocol.TurnEndMsgID(p.turnID)}
	p.send(e)
	n := e.num
	p.mu.Unlock()
	if err := p.waitAcked(n, PublishWait); err != nil {
		return fmt.Errorf("turnevents: publish %s for %s: %w", event, p.turnID, err)
	}
	return nil
}

// Drain waits (at most d) until every event published so far is stored,
// so a runner taking the turn over reads all of them.
func (p *Publisher) Drain(d time.Duration) {
	p.mu.Lock()
	if !p.held && p.ready() == nil {
		p.sendPending()
	}
	n := p.n
	p.mu.Unlock()
	_ = p.waitAcked(n, d)
}

// Hold keeps every event back until Release or Discard.
func (p *Publisher) Hold() {
	p.mu.Lock()
	p.held, p.heldN, p.heldTokens = true, p.n, 0
	p.mu.Unlock()
}

// Release publishes what was held, in order, and ends the hold.
func (p *Publisher) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.held {
		return
	}
	defer p.cond.Broadcast()
	// Still held while it waits for a re-publish: what is emitted
	// meanwhile joins the held events, behind them.
	err := p.ready()
	msgs := p.heldMsgs
	p.held, p.heldMsgs = false, nil
	if err != nil {
		return
	}
	for _, e := range msgs {
		p.send(e)
	}
	p.sendPending()
}

// Discard drops what was held (it must never be seen) and ends the hold;
// the numbering goes on as if those events never were.
func (p *Publisher) Discard() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.held {
		return
	}
	p.held, p.heldMsgs, p.pending, p.n = false, nil, p.pending[:0], p.heldN
	p.cond.Broadcast()
}

// waitRelease waits while events are held: work with side effects (a
// checkpointed tool call) must not begin before the hold's reason is
// settled.
func (p *Publisher) waitRelease() {
	p.mu.Lock()
	for p.held && p.err == nil && !p.closed {
		p.cond.Wait()
	}
	p.mu.Unlock()
}

// Close stops the pump (the turn is over) and waits for it. Events not
// acknowledged by then are not re-published.
func (p *Publisher) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.done)
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	p.pump.Wait()
}
