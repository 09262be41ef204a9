package turnevents

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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

// run is the pump: it waits for the oldest event's acknowledgement,
// re-publishes when one is lost, and sends the joined tokens as the window
// opens. It ends when nothing is joined and nobody waits for an
// acknowledgement, so an idle turn costs no goroutine.
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
		if len(p.pending) > 0 && p.windowOpen() {
			p.sendPending()
			continue
		}
		if len(p.unacked) == 0 || (len(p.pending) == 0 && p.waiters == 0) {
			break
		}
		e := p.unacked[0]
		p.mu.Unlock()
		ok := p.await(e, timer)
		p.mu.Lock()
		if len(p.unacked) > 0 && p.unacked[0].num == e.num {
			if ok {
				p.pop()
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

// republish sends every event not acknowledged again, oldest first, each
// waiting for its acknowledgement, while nothing new is sent. A bus that
// stays away PublishWait fails the publisher.
//
// The first event re-sent keeps its Nats-Msg-Id: if the stream did store
// it (only the acknowledgement was lost), it is not stored twice. Every
// later event of the window gets a new id and is stored again even if it
// was stored before: a stream that changed leader may have stored it ahead
// of the lost one (a new leader took it while the old one dropped the
// earlier event), and only a copy after the earlier event puts it back in
// order. Readers keep the first copy of a number that arrives in order
// (the gateway's relay, ReadLog); a copy out of order is followed by its
// missing predecessors and its own second copy.
func (p *Publisher) republish() {
	start := time.Now()
	p.mu.Lock()
	p.republishing = true
	p.epoch++
	resent := false
	for len(p.unacked) > 0 && !p.closed && p.err == nil {
		e := p.unacked[0]
		if !resent && e.f != nil {
			if done, err := settled(e.f); done && err == nil {
				p.pop() // stored, and so was everything before it
				continue
			}
		}
		if resent {
			e.m = retryCopy(e.m, p.turnID, e.num, p.epoch)
		}
		resent = true
		p.mu.Unlock()
		err := p.resend(e, start)
		p.mu.Lock()
		if err != nil {
			if !errors.Is(err, ErrClosed) {
				p.fail(fmt.Errorf("turnevents: re-publish event %d of %s: %w", e.num, p.turnID, err))
			}
			break
		}
		if len(p.unacked) > 0 && p.unacked[0].num == e.num {
			p.pop()
		}
	}
	p.lost, p.republishing = false, false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// retryCopy is m with a Nats-Msg-Id of its own for re-publish epoch: the
// stream stores it even if it stored m.
func retryCopy(m *nats.Msg, turnID string, num, epoch uint64) *nats.Msg {
	h := make(nats.Header, len(m.Header))
	for k, v := range m.Header {
		h[k] = v
	}
	h[jetstream.MsgIDHeader] = []string{MsgID(turnID, num) + ":r" + strconv.FormatUint(epoch, 10)}
	return &nats.Msg{Subject: m.Subject, Data: m.Data, Header: h}
}

// resend publishes e synchronously until the stream acknowledges it,
// waiting for the connection and backing off between attempts, until
// PublishWait after start.
func (p *Publisher) resend(e sentEvent, start time.Time) error {
	nc := p.js.Conn()
	backoff := 25 * time.Millisecond
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
			if p.acked >= n {
				break
			}
			p.startPump()
		}
		p.cond.Wait()
	}
	return nil
}
