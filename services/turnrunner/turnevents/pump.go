package turnevents

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
)

// startPump starts the pump unless it runs. p.mu is held.
func (p *Publisher) startPump() {
	if p.pumping || p.closed || p.err != nil {
		return
	}
	p.pumping = true
	p.pump.Add(1)
	go p.run()
}

// run is the pump: it waits for the acknowledgement of the event in
// flight, re-publishes it when it is lost, and sends the next queued
// event. It ends when nothing is queued and nobody waits for an
// acknowledgement, so a turn between bursts costs no goroutine.
func (p *Publisher) run() {
	defer p.pump.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	p.mu.Lock()
	for !p.closed && p.err == nil {
		if p.lost {
			p.mu.Unlock()
			p.republish()
			p.mu.Lock()
			continue
		}
		if p.flight == nil {
			if !p.sendable() {
				break
			}
			p.advance()
			continue
		}
		if len(p.queue) == 0 && p.waiters == 0 {
			break // the next emit or wait looks at the flight again
		}
		e := *p.flight
		p.mu.Unlock()
		ok := p.await(e, timer)
		p.mu.Lock()
		if p.flight != nil && p.flight.num == e.num {
			if ok {
				p.landed()
			} else {
				p.lost = true
			}
		}
	}
	p.pumping = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// await waits for e's acknowledgement until it is suspectAfter old, and
// reports whether it came.
func (p *Publisher) await(e sentEvent, timer *time.Timer) bool {
	if e.f == nil {
		return false
	}
	wait := p.suspect - time.Since(e.at)
	if wait <= 0 {
		done, err := settled(e.f)
		return done && err == nil
	}
	timer.Reset(wait)
	select {
	case <-e.f.Ok():
		return true
	case <-e.f.Err():
		return false
	case <-timer.C:
		return false
	case <-p.done:
		return false
	}
}

// republish sends the event in flight again until the stream stores it
// (or reports it stored already: the Nats-Msg-Id makes it a duplicate),
// while nothing else is sent. A bus that stays away PublishWait fails the
// publisher.
func (p *Publisher) republish() {
	p.mu.Lock()
	e := p.flight
	p.mu.Unlock()
	if e == nil {
		return
	}
	err := p.resend(*e)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lost = false
	switch {
	case err == nil:
		if p.flight == e {
			p.landed()
		}
	case !errors.Is(err, ErrClosed):
		p.fail(fmt.Errorf("turnevents: re-publish event %d of %s: %w", e.num, p.turnID, err))
	}
	p.cond.Broadcast()
}

// resend publishes e synchronously until the stream acknowledges it,
// waiting for the connection and backing off between attempts, until
// PublishWait after it was first sent.
func (p *Publisher) resend(e sentEvent) error {
	nc := p.js.Conn()
	backoff := 25 * time.Millisecond
	start := e.at
	for {
		left := PublishWait - time.Since(start)
		ctx, cancel := context.WithTimeout(context.Background(), min(resendWait, max(left, time.Millisecond)))
		if !nc.IsConnected() {
			_ = bus.WaitConnected(ctx, nc)
		}
		// A copy: the client may set fields of the message it sends.
		m := &nats.Msg{Subject: e.m.Subject, Data: e.m.Data, Header: e.m.Header}
		_, err := p.js.PublishMsg(ctx, m)
		cancel()
		if err == nil {
			return nil
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.Code != 503 {
			return err // refused for good (too large, stream gone): no retry helps
		}
		if time.Since(start) >= PublishWait || nc.IsClosed() {
			return err
		}
		select {
		case <-p.done:
			return ErrClosed
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// waitAcked waits until every event up to number n is stored, at most d.
func (p *Publisher) waitAcked(n uint64, d time.Duration) error {
	expired := false
	t := time.AfterFunc(d, func() {
		p.mu.Lock()
		expired = true
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	defer t.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waiters++
	defer func() { p.waiters-- }()
	for p.acked < n {
		switch {
		case p.err != nil:
			return p.err
		case expired:
			return fmt.Errorf("no acknowledgement in %s", d)
		case p.closed:
			return ErrClosed
		}
		if !p.pumping {
			p.settle()
			p.advance()
			if p.acked >= n {
				break
			}
			p.startPump()
		}
		p.cond.Wait()
	}
	return nil
}
