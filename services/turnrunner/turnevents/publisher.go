// Package turnevents writes one chat turn's events onto its JetStream
// subject (numbered, in order, coalesced, bounded, re-published when an
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
	// by every turn of the runner (each has at most one event in it).
	AsyncWindow = 16384

	// maxQueued bounds what a turn holds while the bus is behind (queued
	// events and joined token text, in bytes); past it the emitting
	// goroutine (the model read) waits.
	maxQueued = 64 << 10
	// suspectAfter is how long the event in flight may wait for its
	// acknowledgement before it counts as lost and is re-published. A
	// stream that is merely slow stores nothing twice (every event carries
	// a Nats-Msg-Id), so this can be far below PublishWait.
	suspectAfter = 2 * time.Second
	// resendWait bounds one synchronous re-publish.
	resendWait = 2 * time.Second
)

// asyncOpts turns off the client's own retry of a publish that found no
// stream (it would re-send the message later, on its own clock); the
// publisher re-publishes itself, in order.
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
// Order: a turn has at most one event in flight. The next is sent when the
// stream has acknowledged the previous one; what is emitted meanwhile
// waits in a queue where consecutive tokens are joined into one event. So
// a stream that keeps up gets every token as its own event (an ack takes
// a fraction of a millisecond, far less than a model's gap between
// tokens), a slow one gets fewer, larger events instead of a backlog, and
// a later event can never be stored before an earlier one: pipelining
// several would let a new stream leader store event n+1 while event n,
// sent to the old leader, was lost. Nothing but consecutive tokens is ever
// merged. No emit waits for a round trip.
//
// Lost acknowledgements: the event in flight counts as lost when the bus
// refuses it (no stream leader, no connection) or does not acknowledge it
// within suspectAfter. It is then re-published, synchronously and with
// backoff, until the stream stores it (or says it had: a duplicate); only
// then does the next event go. A stream that loses its leader pauses the
// turn and loses, doubles and reorders nothing. Only a bus that stays away
// PublishWait fails the turn.
//
// Backpressure: when the queue reaches maxQueued bytes the emitting
// goroutine waits for the bus.
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
	// n is the number of the last event sent; acked the number up to
	// which every event is stored.
	n, acked uint64
	// flight is the event sent and not yet acknowledged (nil: none).
	flight *sentEvent
	// lost is set when flight must be re-published (the pump does it).
	lost bool
	// queue holds what waits for flight's acknowledgement, in order;
	// queuedBytes is its size.
	queue       []queued
	queuedBytes int
	// pumping is set while the pump goroutine runs; it is then the only
	// reader of flight's future.
	pumping bool
	// waiters counts goroutines waiting for an acknowledgement.
	waiters int
	// err is the first failure; every later publish reports it.
	err error
	// held keeps events back (the turn's work starts while the user's
	// message is being stored, but nothing reaches a client before it is
	// durable): queue[beforeHold:] waits until Release, or is dropped by
	// Discard.
	held       bool
	beforeHold int
	// done stops the pump when the turn ends; closed is set with it.
	done   chan struct{}
	closed bool
	pump   sync.WaitGroup
}

// queued is an event waiting to be sent: a run of tokens (text) or another
// event (body).
type queued struct {
	event string
	body  []byte
	text  []byte // token runs only
	end   bool   // the terminal event (its Nats-Msg-Id is TurnEndMsgID)
}

func (q *queued) size() int { return len(q.body) + len(q.text) }

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

// Last is the number of the last event emitted (sent or waiting to be).
func (p *Publisher) Last() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n + uint64(len(p.queue))
}

// MsgID is the Nats-Msg-Id of turnID's event number n (the terminal event
// uses protocol.TurnEndMsgID instead).
func MsgID(turnID string, n uint64) string {
	return turnID + ":" + strconv.FormatUint(n, 10)
}

// sendable reports whether the front of the queue may be sent now. p.mu
// is held.
func (p *Publisher) sendable() bool {
	return p.flight == nil && !p.lost && p.err == nil && len(p.queue) > 0 && !(p.held && p.beforeHold == 0)
}

// advance sends the front of the queue if nothing is in flight. p.mu is
// held.
func (p *Publisher) advance() {
	if !p.sendable() {
		return
	}
	q := p.queue[0]
	p.queue[0] = queued{}
	p.queue = p.queue[1:]
	if len(p.queue) == 0 {
		p.queue = p.queue[:0:0] // let the backing array go
	}
	p.queuedBytes -= q.size()
	if p.beforeHold > 0 {
		p.beforeHold--
	}
	p.send(q)
	p.cond.Broadcast()
}

// send numbers q and publishes it asynchronously as the event in flight.
// A send the bus refuses is re-published by the pump. p.mu is held.
func (p *Publisher) send(q queued) {
	p.n++
	body := q.body
	if q.event == protocol.EventToken && q.text != nil {
		body = tokenBody(q.text)
	}
	id := protocol.TurnEndMsgID(p.turnID)
	if !q.end {
		id = MsgID(p.turnID, p.n)
	}
	m := &nats.Msg{Subject: p.subject, Data: body, Header: make(nats.Header, 3)}
	m.Header[protocol.HeaderEvent] = []string{q.event}
	m.Header[protocol.HeaderEventNum] = []string{strconv.FormatUint(p.n, 10)}
	m.Header[jetstream.MsgIDHeader] = []string{id}
	f, err := p.js.PublishMsgAsync(m, asyncOpts...)
	if err != nil {
		// The connection is reconnecting (it buffers nothing meanwhile) or
		// its window stayed full: re-published once the bus answers.
		f = nil
		p.lost = true
		p.startPump()
	}
	p.flight = &sentEvent{m: m, f: f, at: time.Now(), num: p.n}
}

// enqueue adds q behind everything waiting, joining a token run to the
// run before it. p.mu is held.
func (p *Publisher) enqueue(q queued) {
	if n := len(p.queue); q.text != nil && n > 0 && n > p.heldBoundary() {
		if last := &p.queue[n-1]; last.text != nil {
			last.text = append(last.text, q.text...)
			p.queuedBytes += len(q.text)
			return
		}
	}
	if q.text != nil {
		q.text = append(make([]byte, 0, max(len(q.text), 64)), q.text...) // owned, room to join
	}
	p.queue = append(p.queue, q)
	p.queuedBytes += q.size()
}

// heldBoundary is the index in queue before which events were queued
// before the hold (0 when nothing is held). p.mu is held.
func (p *Publisher) heldBoundary() int {
	if p.held {
		return p.beforeHold
	}
	return 0
}

// fail records the publisher's first failure. p.mu is held.
func (p *Publisher) fail(err error) {
	if p.err == nil {
		p.err = err
	}
	p.cond.Broadcast()
}

// settle notes, without waiting, whether the event in flight was
// acknowledged (then the next may go) or is lost. p.mu is held and the
// pump is not running.
func (p *Publisher) settle() {
	e := p.flight
	if e == nil || p.lost {
		return
	}
	if e.f == nil {
		p.lost = true
		return
	}
	done, err := settled(e.f)
	switch {
	case !done:
		if time.Since(e.at) > p.suspect {
			p.lost = true
		}
	case err != nil:
		p.lost = true
	default:
		p.landed()
	}
}

// landed records that the event in flight is stored. p.mu is held.
func (p *Publisher) landed() {
	p.acked = p.flight.num
	p.flight = nil
	p.cond.Broadcast()
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

// emit sends q at once when nothing is in flight or waiting (the common
// case: no queue, no goroutine), else queues it for the pump. It returns
// q's event number. p.mu is held.
func (p *Publisher) emit(q queued) uint64 {
	if !p.pumping {
		p.settle()
	}
	if len(p.queue) == 0 && !p.held && p.flight == nil && !p.lost {
		p.send(q)
		return p.n
	}
	p.enqueue(q)
	n := p.n + uint64(len(p.queue)) // queue[i] will be number p.n+i+1
	p.advance()
	if len(p.queue) > 0 || p.lost {
		p.startPump()
	}
	return n
}

// backpressure waits while the queue is over its bound. p.mu is held.
func (p *Publisher) backpressure() error {
	for p.queuedBytes >= maxQueued && p.err == nil && !p.closed {
		p.cond.Wait()
	}
	return p.err
}

// Token publishes one token of the reply (joined with the tokens around
// it while the bus is behind, see Publisher).
func (p *Publisher) Token(content string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	if p.onToken != nil {
		defer p.onToken()
	}
	if !p.pumping {
		p.settle()
	}
	if len(p.queue) == 0 && !p.held && p.flight == nil && !p.lost {
		p.send(queued{event: protocol.EventToken, body: tokenBodyString(content)})
		return nil
	}
	p.emit(queued{event: protocol.EventToken, text: []byte(content)})
	return p.backpressure()
}

// event publishes a non-token event after everything before it and returns
// its number.
func (p *Publisher) event(event string, data any, end bool) (uint64, error) {
	body, err := encode(data)
	if err != nil {
		return 0, fmt.Errorf("turnevents: encode %s event: %w", event, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return 0, p.err
	}
	n := p.emit(queued{event: event, body: body, end: end})
	return n, p.backpressure()
}

// Emit publishes an event without waiting. Token events go through Token.
func (p *Publisher) Emit(event string, data any) error {
	if event == protocol.EventToken {
		if t, ok := data.(protocol.TokenData); ok {
			return p.Token(t.Content)
		}
	}
	_, err := p.event(event, data, false)
	return err
}

// Note publishes an internal event without waiting. It is still stored
// before every event the turn publishes after it; only Mark's guarantee
// (durable before work with side effects begins) is not given.
func (p *Publisher) Note(event string, data any) error { return p.Emit(event, data) }

// Mark publishes an internal event and waits for the stream to store it
// (and with it every earlier event of the turn): a checkpoint must be
// durable before the work it describes begins.
func (p *Publisher) Mark(event string, data any) error {
	p.waitRelease()
	n, err := p.event(event, data, false)
	if err != nil {
		return err
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
	p.mu.Lock()
	failed, held := p.err != nil, p.held
	p.mu.Unlock()
	if held {
		return errors.New("turnevents: terminal event while events are held")
	}
	if failed {
		return p.finishAfterFailure(event, data)
	}
	n, err := p.event(event, data, true)
	if err == nil {
		err = p.waitAcked(n, PublishWait)
	}
	if err != nil {
		return fmt.Errorf("turnevents: publish %s for %s: %w", event, p.turnID, err)
	}
	return nil
}

// finishAfterFailure publishes the end of a turn whose publisher failed
// (the bus stayed away): earlier events may be lost, but the end must
// still reach the followers once the bus is back, or they wait forever.
// They see the hole in the numbering first.
func (p *Publisher) finishAfterFailure(event string, data any) error {
	body, err := encode(data)
	if err != nil {
		return fmt.Errorf("turnevents: encode %s event: %w", event, err)
	}
	p.mu.Lock()
	num := p.n + uint64(len(p.queue)) + 1
	p.mu.Unlock()
	m := &nats.Msg{Subject: p.subject, Data: body, Header: nats.Header{}}
	m.Header.Set(protocol.HeaderEvent, event)
	m.Header.Set(protocol.HeaderEventNum, strconv.FormatUint(num, 10))
	m.Header.Set(jetstream.MsgIDHeader, protocol.TurnEndMsgID(p.turnID))
	ctx, cancel := context.WithTimeout(context.Background(), PublishWait)
	defer cancel()
	if _, err := p.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("turnevents: publish %s for %s after a failure: %w", event, p.turnID, err)
	}
	return nil
}

// Drain waits (at most d) until every event emitted so far is stored, so
// a runner taking the turn over reads all of them.
func (p *Publisher) Drain(d time.Duration) {
	_ = p.waitAcked(p.Last(), d)
}

// Hold keeps every event emitted from now on back until Release or
// Discard.
func (p *Publisher) Hold() {
	p.mu.Lock()
	p.held, p.beforeHold = true, len(p.queue)
	p.mu.Unlock()
}

// Release publishes what was held, in order, and ends the hold.
func (p *Publisher) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.held {
		return
	}
	p.held, p.beforeHold = false, 0
	p.advance()
	if len(p.queue) > 0 {
		p.startPump()
	}
	p.cond.Broadcast()
}

// Discard drops what was held (it must never be seen) and ends the hold;
// the numbering goes on as if those events never were.
func (p *Publisher) Discard() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.held {
		return
	}
	for _, q := range p.queue[p.beforeHold:] {
		p.queuedBytes -= q.size()
	}
	clear(p.queue[p.beforeHold:])
	p.queue = p.queue[:p.beforeHold]
	p.held, p.beforeHold = false, 0
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
// stored by then are not re-published.
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
