package turnrunner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

// publisher puts one turn's events on its JetStream subject.
//
// Events are published asynchronously (never a round trip per token), in
// order: the stream stores one connection's messages in the order they
// were sent. Tokens are coalesced by acknowledgement, not by a timer: a
// token is published at once while fewer than tokenWindow of the turn's
// token events wait for the stream; past that, the tokens that arrive are
// joined and go out as one event when the oldest is acknowledged. A bus
// that keeps up therefore sees every token as its own event with no added
// delay (and the first token is never held), while a slow bus gets fewer,
// larger events instead of a growing backlog. Any other event first sends the
// joined tokens, so nothing is reordered and nothing but consecutive
// tokens is ever merged.
//
// Backpressure: when the joined text reaches maxPendingText the emitting
// goroutine (the model read) waits for the bus, and a publish that finds
// the connection's async window full waits for room up to publishWait.
// Only a bus that stays stuck that long fails the turn.
type publisher struct {
	js      jetstream.JetStream
	turnID  string
	subject string
	// onToken, when set, is called after each token is handed over.
	onToken func()

	mu    sync.Mutex
	space *sync.Cond // signalled when pending is sent or the publisher fails
	// n numbers the turn's events (protocol.HeaderEventNum), so a relay
	// can tell a contiguous stream from one with events discarded.
	n uint64
	// pending is the token text waiting for the in-flight token event.
	pending []byte
	// inflight are the token events not known to be stored, oldest first,
	// and inflightBytes the size of their data.
	inflight      []inflightToken
	inflightBytes int
	// flushing is set while a goroutine waits on inflight to send pending;
	// that goroutine is then the only reader of the futures.
	flushing bool
	// err is the first failure; every later publish reports it.
	err error
	// held keeps every event back (in order, tokens joined) until release
	// or discard: the turn's work starts while the user's message is being
	// stored, but nothing reaches a client before it is durable. heldN is
	// the event number when the hold began.
	held       bool
	heldMsgs   []*nats.Msg
	heldTokens int // token events among heldMsgs
	heldN      uint64
	// done stops a flusher when the turn ends; closed is set with it.
	done   chan struct{}
	closed bool
	// flusher is the goroutine that sends pending text, if any.
	flusher sync.WaitGroup
}

const (
	// maxPendingText bounds the token text a turn holds while the bus is
	// behind; past it the model read waits.
	maxPendingText = 64 << 10
	// publishWait is how long a publish may wait for the bus (a full async
	// window, an acknowledgement) before the turn fails: the bus is out.
	publishWait = 30 * time.Second
	// publishWindow is the runner connection's async publish window.
	publishWindow = 16384
	// tokenWindow and tokenWindowBytes bound the token events of one turn
	// waiting for the stream before further tokens are joined: what a turn
	// holds in the connection's buffers while the bus is behind.
	tokenWindow      = 32
	tokenWindowBytes = 128 << 10
)

func newPublisher(js jetstream.JetStream, turnID string) *publisher {
	p := &publisher{js: js, turnID: turnID, subject: protocol.TurnEvents(turnID), done: make(chan struct{})}
	p.space = sync.NewCond(&p.mu)
	return p
}

// continueAt makes the next event number n+1 (a turn taken over from
// another runner continues its numbering).
func (p *publisher) continueAt(n uint64) {
	p.mu.Lock()
	p.n = n
	p.mu.Unlock()
}

// encode marshals event data as single-line JSON without HTML escaping
// (clients compare text byte for byte; "<" must stay "<").
func encode(data any) ([]byte, error) {
	if raw, ok := data.(json.RawMessage); ok {
		return raw, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(data); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return b[:len(b)-1], nil // Encode appends '\n'
}

// msg builds the next event's message. p.mu is held.
func (p *publisher) msg(event string, body []byte) *nats.Msg {
	p.n++
	m := &nats.Msg{Subject: p.subject, Data: body, Header: nats.Header{}}
	m.Header[protocol.HeaderEvent] = []string{event}
	m.Header[protocol.HeaderEventNum] = []string{strconv.FormatUint(p.n, 10)}
	return m
}

// tokenBody is the data of a token event with text as content.
func tokenBody(text []byte) []byte {
	b := make([]byte, 0, len(text)+16)
	b = append(b, `{"content":`...)
	b = appendJSONString(b, text)
	return append(b, '}')
}

// appendJSONString appends s as a JSON string without HTML escaping.
func appendJSONString(b, s []byte) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// send publishes m asynchronously, waiting up to publishWait for room in
// the connection's window. p.mu is held: the turn's events leave in order.
func (p *publisher) send(m *nats.Msg) (jetstream.PubAckFuture, error) {
	f, err := p.js.PublishMsgAsync(m, jetstream.WithStallWait(publishWait))
	if err != nil && !p.js.Conn().IsConnected() && !p.js.Conn().IsClosed() {
		// The connection is reconnecting (it buffers nothing meanwhile):
		// wait for it, as for a full window, rather than fail the turn.
		ctx, cancel := context.WithTimeout(context.Background(), publishWait)
		if bus.WaitConnected(ctx, p.js.Conn()) == nil {
			f, err = p.js.PublishMsgAsync(m, jetstream.WithStallWait(publishWait))
		}
		cancel()
	}
	if err != nil {
		p.fail(fmt.Errorf("turnrunner: publish %s for %s: %w", m.Header.Get(protocol.HeaderEvent), p.turnID, err))
		return nil, p.err
	}
	return f, nil
}

// fail records the publisher's first failure. p.mu is held.
func (p *publisher) fail(err error) {
	if p.err == nil {
		p.err = err
	}
	p.space.Broadcast()
}

// sendPending publishes the joined tokens, if any. p.mu is held.
func (p *publisher) sendPending() error {
	if len(p.pending) == 0 {
		return nil
	}
	body := tokenBody(p.pending)
	f, err := p.send(p.msg(protocol.EventToken, body))
	p.pending = p.pending[:0]
	p.space.Broadcast()
	if err != nil {
		return err
	}
	p.track(f, len(body))
	return nil
}

// inflightToken is a token event waiting for its acknowledgement.
type inflightToken struct {
	f    jetstream.PubAckFuture
	size int
}

// track records a token event sent. p.mu is held.
func (p *publisher) track(f jetstream.PubAckFuture, n int) {
	p.inflight = append(p.inflight, inflightToken{f: f, size: n})
	p.inflightBytes += n
}

// untrack drops the oldest token event in flight. p.mu is held.
func (p *publisher) untrack() {
	p.inflightBytes -= p.inflight[0].size
	p.inflight[0] = inflightToken{}
	p.inflight = p.inflight[1:]
}

// windowOpen reports whether another token event may be sent now.
func (p *publisher) windowOpen() bool {
	return len(p.inflight) < tokenWindow && p.inflightBytes < tokenWindowBytes
}

// Token publishes one token of the reply (coalesced while the bus is
// behind, see publisher).
func (p *publisher) Token(content string) error {
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
		// keeps up, up to the in-flight window; beyond it they are joined.
		if len(p.pending) == 0 && p.heldTokens < tokenWindow {
			p.heldMsgs = append(p.heldMsgs, p.msg(protocol.EventToken, tokenBody([]byte(content))))
			p.heldTokens++
			return nil
		}
		p.pending = append(p.pending, content...)
		for len(p.pending) >= maxPendingText && p.held && p.err == nil && !p.closed {
			p.space.Wait()
		}
		return p.err
	}
	if !p.flushing {
		if err := p.settle(); err != nil {
			return err
		}
		if p.windowOpen() {
			body := tokenBody([]byte(content))
			f, err := p.send(p.msg(protocol.EventToken, body))
			if err != nil {
				return err
			}
			p.track(f, len(body))
			return nil
		}
	}
	p.pending = append(p.pending, content...)
	if !p.flushing {
		p.flushing = true
		p.flusher.Add(1)
		go p.flush()
	}
	for len(p.pending) >= maxPendingText && p.err == nil && !p.closed {
		p.space.Wait()
	}
	return p.err
}

// settle drops the acknowledged futures at the front of inflight. p.mu is
// held and no flusher runs.
func (p *publisher) settle() error {
	for len(p.inflight) > 0 {
		done, err := settled(p.inflight[0].f)
		if err != nil {
			p.fail(fmt.Errorf("turnrunner: publish token for %s: %w", p.turnID, err))
			return p.err
		}
		if !done {
			break
		}
		p.untrack()
	}
	return nil
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

// flush waits for the oldest in-flight token event and sends what joined
// it, until nothing is pending.
func (p *publisher) flush() {
	defer p.flusher.Done()
	timer := time.NewTimer(publishWait)
	defer timer.Stop()
	for {
		p.mu.Lock()
		var f jetstream.PubAckFuture
		if len(p.inflight) > 0 {
			f = p.inflight[0].f
		}
		p.mu.Unlock()
		var err error
		if f != nil {
			timer.Reset(publishWait)
			select {
			case <-f.Ok():
			case err = <-f.Err():
			case <-timer.C:
				err = errors.New("no acknowledgement")
			case <-p.done:
				p.mu.Lock()
				p.flushing = false
				p.mu.Unlock()
				return
			}
		}
		p.mu.Lock()
		if err != nil {
			p.fail(fmt.Errorf("turnrunner: publish token for %s: %w", p.turnID, err))
		}
		if f != nil && len(p.inflight) > 0 && p.inflight[0].f == f {
			p.untrack()
		}
		if len(p.pending) == 0 || p.err != nil {
			p.flushing = false
			p.mu.Unlock()
			return
		}
		_ = p.sendPending()
		p.mu.Unlock()
	}
}

// event publishes a non-token event after the pending tokens.
func (p *publisher) event(event string, data any) (jetstream.PubAckFuture, error) {
	body, err := encode(data)
	if err != nil {
		return nil, fmt.Errorf("turnrunner: encode %s event: %w", event, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return nil, p.err
	}
	if p.held {
		if len(p.pending) > 0 {
			p.heldMsgs = append(p.heldMsgs, p.msg(protocol.EventToken, tokenBody(p.pending)))
			p.pending = p.pending[:0]
		}
		p.heldMsgs = append(p.heldMsgs, p.msg(event, body))
		return nil, nil
	}
	if err := p.sendPending(); err != nil {
		return nil, err
	}
	return p.send(p.msg(event, body))
}

// hold keeps every event back until release or discard.
func (p *publisher) hold() {
	p.mu.Lock()
	p.held, p.heldN, p.heldTokens = true, p.n, 0
	p.mu.Unlock()
}

// release publishes what was held, in order, and ends the hold.
func (p *publisher) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.held {
		return
	}
	p.held = false
	msgs := p.heldMsgs
	p.heldMsgs = nil
	for _, m := range msgs {
		if _, err := p.send(m); err != nil {
			break
		}
	}
	if p.err == nil {
		_ = p.sendPending()
	}
	p.space.Broadcast()
}

// discard drops what was held (it must never be seen) and ends the hold;
// the numbering goes on as if those events never were.
func (p *publisher) discard() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.held {
		return
	}
	p.held, p.heldMsgs, p.pending, p.n = false, nil, p.pending[:0], p.heldN
	p.space.Broadcast()
}

// waitRelease waits while events are held: work with side effects (a
// checkpointed tool call) must not begin before the hold's reason is
// settled.
func (p *publisher) waitRelease() {
	p.mu.Lock()
	for p.held && p.err == nil && !p.closed {
		p.space.Wait()
	}
	p.mu.Unlock()
}

// Emit publishes an event without waiting. Token events go through Token.
func (p *publisher) Emit(event string, data any) error {
	if event == protocol.EventToken {
		if t, ok := data.(protocol.TokenData); ok {
			return p.Token(t.Content)
		}
	}
	_, err := p.event(event, data)
	return err
}

// Note publishes an internal event without waiting. It is still stored
// before every event the turn publishes after it; only Mark's guarantee —
// durable before work with side effects begins — is not given.
func (p *publisher) Note(event string, data any) error { return p.Emit(event, data) }

// Mark publishes an internal event and waits for the stream to store it
// (and with it every earlier event of the turn): a checkpoint must be
// durable before the work it describes begins.
func (p *publisher) Mark(event string, data any) error {
	p.waitRelease()
	f, err := p.event(event, data)
	if err != nil {
		return err
	}
	if f == nil {
		return errors.New("turnrunner: publisher closed while held")
	}
	return p.wait(event, f)
}

// wait waits for f's acknowledgement.
func (p *publisher) wait(event string, f jetstream.PubAckFuture) error {
	timer := time.NewTimer(publishWait)
	defer timer.Stop()
	select {
	case <-f.Ok():
		return nil
	case err := <-f.Err():
		return fmt.Errorf("turnrunner: publish %s for %s: %w", event, p.turnID, err)
	case <-timer.C:
		return fmt.Errorf("turnrunner: publish %s for %s: no acknowledgement in %s", event, p.turnID, publishWait)
	}
}

// drain waits (at most d) until every event published so far is stored,
// so a runner taking the turn over reads all of them.
func (p *publisher) drain(d time.Duration) {
	p.mu.Lock()
	_ = p.sendPending()
	p.mu.Unlock()
	select {
	case <-p.js.PublishAsyncComplete():
	case <-time.After(d):
	}
}

// Finish publishes the terminal event and waits for the stream to store it
// (the stream stores in order, so every earlier event is stored too). The
// message id makes a retried publish of the same end harmless.
func (p *publisher) Finish(event string, data any) error {
	body, err := encode(data)
	if err != nil {
		return fmt.Errorf("turnrunner: encode %s event: %w", event, err)
	}
	p.mu.Lock()
	if p.err != nil {
		// Earlier events were lost (the bus failed); the end must still
		// reach the followers once the bus is back, or they wait forever.
		// They see the gap in the numbering first.
		m := p.msg(event, body)
		m.Header[jetstream.MsgIDHeader] = []string{protocol.TurnEndMsgID(p.turnID)}
		p.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), publishWait)
		defer cancel()
		if _, err := p.js.PublishMsg(ctx, m); err != nil {
			return fmt.Errorf("turnrunner: publish %s for %s after a failure: %w", event, p.turnID, err)
		}
		return nil
	}
	if p.held {
		p.mu.Unlock()
		return errors.New("turnrunner: terminal event while events are held")
	}
	if err := p.sendPending(); err != nil {
		p.mu.Unlock()
		return err
	}
	m := p.msg(event, body)
	m.Header[jetstream.MsgIDHeader] = []string{protocol.TurnEndMsgID(p.turnID)}
	f, err := p.send(m)
	p.mu.Unlock()
	if err != nil {
		return err
	}
	return p.wait(event, f)
}

// close stops the flusher (the turn is over) and waits for it.
func (p *publisher) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.done)
	}
	p.space.Broadcast()
	p.mu.Unlock()
	p.flusher.Wait()
}
