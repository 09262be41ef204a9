package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/telemetry"
)

// Resending is how CallResending repeats a request.
type Resending struct {
	// After is how long the first send waits for a reply before the
	// request is sent again; each later wait is twice the one before, up
	// to 8×After.
	After time.Duration
	// Unanswered is how long a request nobody is subscribed to is sent
	// again before the call answers protocol.ErrUnavailable (as
	// RetryUnanswered); 0 answers at once.
	Unanswered time.Duration
	// Duplicate, when set, reports a refusal that says another send of
	// this very request got there first (the handler found the record
	// that send made). Such a refusal, from the first send too, is the
	// answer only once every send made so far has answered: until then
	// the send that got there first may still answer, with success.
	Duplicate func(error) bool
}

// CallResending is Call for a request whose handler refuses a second
// delivery of the same request (a start that creates its record only if
// it is new). Core NATS delivers a request at most once: one routed
// through a cluster node that dies on the way is gone, and a plain Call
// then waits out its whole deadline for a reply that cannot come. Here the
// request is sent again whenever r.After (then twice as long) passes
// without a reply. The first delivered send's reply is the answer,
// whatever it says; a resend's counts only when it succeeds (its refusal
// most likely means the first send is being handled, and that send's own
// answer is awaited). A request nobody is subscribed to is sent again too:
// nobody received it, so the next send counts as the first.
//
// A first send's refusal that r.Duplicate recognises is held back while
// a later send is unanswered: on a slow or sharded handler a resend can be
// handled before the first send (another instance, or the same one's
// queue), make the record, and answer success, while the first send then
// finds the record and refuses itself. The call answers the success; the
// held refusal only when no send is left to answer (a later send's own
// failure then, if one failed otherwise).
func CallResending[Req, Rep any](ctx context.Context, nc *nats.Conn, ep protocol.Endpoint[Req, Rep], req Req, r Resending) (Rep, error) {
	var rep Rep
	body, err := json.Marshal(req)
	if err != nil {
		return rep, fmt.Errorf("bus: encode request for %s: %w", ep.Subject, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	// Each send has its own reply subject under inbox, so a reply says
	// which send it answers.
	inbox := nc.NewInbox()
	var first string // the reply subject of the send whose refusal counts
	renew := true    // the next send is that one (none was delivered yet)
	// A channel subscription with a small buffer, not SubscribeSync: a
	// synchronous subscription allocates the connection's SubChanLen
	// (64 Ki pointers, 512 KiB) per call, which made every chat start and
	// every append cost half a megabyte of garbage (issue 23: ~65 MiB of
	// heap while 128 turns were being started at once). A call gets one
	// reply per send; one that overflows this buffer is dropped and the
	// send is repeated like a lost one.
	replies := make(chan *nats.Msg, replyBuffer)
	closed := make(chan struct{})
	sub, err := nc.ChanSubscribe(inbox+".*", replies)
	if err != nil {
		return rep, fmt.Errorf("bus: request %s: %w", ep.Subject, err)
	}
	// The connection closing releases the wait at once, as NextMsg on a
	// synchronous subscription did (the handler runs once: unsubscribe or
	// close).
	sub.SetClosedHandler(func(string) { close(closed) })
	defer func() { _ = sub.Unsubscribe() }()
	wait := max(r.After, 10*time.Millisecond)
	sends := 0
	// answered counts the sends that had their reply; held is the first
	// send's duplicate refusal, other a later send's other refusal (see
	// the doc comment).
	answered := 0
	var held, other error
	send := func() error {
		sends++
		msg := &nats.Msg{Subject: ep.Subject, Reply: inbox + "." + strconv.Itoa(sends), Data: body, Header: nats.Header{}}
		if renew {
			first, renew = msg.Reply, false
		} else {
			msg.Header.Set(ResendHeader, strconv.Itoa(sends))
		}
		msg.Header.Set(DeadlineHeader, strconv.FormatInt(max(time.Until(deadline).Milliseconds(), 0), 10))
		telemetry.InjectNATS(ctx, msg)
		return nc.PublishMsg(msg)
	}
	if err := send(); err != nil {
		return rep, fmt.Errorf("bus: request %s: %w", ep.Subject, err)
	}
	next := time.Now().Add(wait)
	var unansweredSince time.Time
	for {
		wctx, cancel := context.WithDeadline(ctx, next)
		msg, err := nextReply(wctx, nc, replies, closed)
		cancel()
		switch {
		case errors.Is(err, nats.ErrNoResponders) || err == nil && isNoResponders(msg):
			// Nobody got it: send again after a short pause, for a while.
			answered++
			if unansweredSince.IsZero() {
				unansweredSince = time.Now()
			}
			if time.Since(unansweredSince) >= r.Unanswered {
				telemetry.BusErrors.WithLabelValues("no_responders").Inc()
				return rep, fmt.Errorf("bus: %s: %w", ep.Subject, protocol.ErrUnavailable)
			}
			renew = true
			next = time.Now().Add(25 * time.Millisecond)
			continue
		case err == nil:
			answered++
			if e := replyError(msg); e != nil {
				dup := r.Duplicate != nil && r.Duplicate(e)
				switch {
				case msg.Subject == first && !dup:
					return rep, e
				case msg.Subject == first:
					held = e
				case !dup:
					other = e
				}
				if held != nil && answered >= sends {
					if other != nil {
						return rep, other
					}
					return rep, held
				}
				continue
			}
			if err := json.Unmarshal(msg.Data, &rep); err != nil {
				return rep, fmt.Errorf("bus: decode reply from %s: %w", ep.Subject, err)
			}
			return rep, nil
		case ctx.Err() != nil:
			telemetry.BusErrors.WithLabelValues("timeout").Inc()
			if !nc.IsConnected() {
				return rep, fmt.Errorf("bus: request %s while disconnected: %w", ep.Subject, protocol.ErrBusUnavailable)
			}
			return rep, fmt.Errorf("bus: request %s: %w: %w", ep.Subject, protocol.ErrBusTimeout, ctx.Err())
		case errors.Is(err, context.DeadlineExceeded):
			// No reply in time: the request (or its reply) may be lost.
			// A publish while reconnecting is buffered; one that fails
			// outright is tried again at the next turn of the loop.
			if send() != nil {
				telemetry.BusErrors.WithLabelValues("request").Inc()
			}
			wait = min(2*wait, 8*max(r.After, 10*time.Millisecond))
			next = time.Now().Add(wait)
		default:
			return rep, fmt.Errorf("bus: request %s: %w", ep.Subject, err)
		}
	}
}

// replyBuffer is how many replies one CallResending holds unread.
const replyBuffer = 16

// nextReply waits for the next reply on replies, the end of ctx or the
// closing of the connection, with NextMsgWithContext's answers.
func nextReply(ctx context.Context, nc *nats.Conn, replies <-chan *nats.Msg, closed <-chan struct{}) (*nats.Msg, error) {
	if nc.IsClosed() {
		return nil, nats.ErrConnectionClosed
	}
	select {
	case m := <-replies:
		return m, nil
	case <-closed:
		return nil, nats.ErrConnectionClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ResendHeader marks a request CallResending sent again (its value is the
// send's number, from 2).
const ResendHeader = "Waggle-Resend"

type resentKey struct{}

// Resent reports whether the request a Handle handler serves is a second
// (or later) delivery from CallResending: the first may have been handled
// already, even finished, so a handler that refuses duplicates by a record
// that ends with the work must look further (the work's own history).
func Resent(ctx context.Context) bool {
	v, _ := ctx.Value(resentKey{}).(bool)
	return v
}

// isNoResponders reports the server's "no responders" status reply.
func isNoResponders(m *nats.Msg) bool {
	return len(m.Data) == 0 && m.Header.Get("Status") == "503"
}
