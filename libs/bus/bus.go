// Package bus connects services to NATS and gives them typed request/reply:
// JSON bodies, errors that keep their protocol.Error kind across the wire
// (as nats micro error headers), and the JetStream setup every service
// shares.
package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/telemetry"
)

// DefaultTimeout bounds a request whose context has no deadline.
const DefaultTimeout = 10 * time.Second

// DeadlineHeader carries the time a request's caller will wait for the
// answer, in whole milliseconds, counted from when it sent the request: a
// duration rather than a time, so the clocks of a team server's hosts
// need not agree. Handle gives the handler a context that ends a little
// before (see handlerDeadline).
const DeadlineHeader = "Waggle-Timeout-Ms"

// Dialer opens a named connection to the bus. The composition root builds
// one (in-process for the embedded server, a URL otherwise) and every
// service dials its own connection with it in Start.
type Dialer func(name string) (*nats.Conn, error)

// URLDialer dials an external NATS server (or cluster: comma-separated URLs).
func URLDialer(url string, opts ...nats.Option) Dialer {
	return func(name string) (*nats.Conn, error) {
		nc, err := nats.Connect(url, append(baseOptions(name), opts...)...)
		if err != nil {
			return nil, fmt.Errorf("bus: connect %s as %s: %w", url, name, err)
		}
		return nc, nil
	}
}

// OptionDialer dials with a fixed option such as nats.InProcessServer.
func OptionDialer(opt nats.Option) Dialer {
	return func(name string) (*nats.Conn, error) {
		nc, err := nats.Connect("", append(baseOptions(name), opt)...)
		if err != nil {
			return nil, fmt.Errorf("bus: connect in-process as %s: %w", name, err)
		}
		return nc, nil
	}
}

func baseOptions(name string) []nats.Option {
	return []nats.Option{
		nats.Name(name),
		// A team server outlives NATS restarts; keep trying, every 250 ms
		// (plus nats.go's jitter), so service resumes within a second of
		// the server being back.
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		// No reconnect buffer: a publish while disconnected fails at once
		// (requests with ErrBusUnavailable, see RequestMsg) instead of
		// waiting to be sent after the reconnect. A buffered write outlives
		// the caller that gave up on it: a lease renewal or a session append
		// whose caller timed out and retried would land again, late, as a
		// ghost (a stale compare-and-set that then fails the next renewal,
		// a duplicated line).
		nats.ReconnectBufSize(-1),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			// Async errors (slow consumers, permission violations) would
			// otherwise only reach the default logger.
			telemetry.BusErrors.WithLabelValues("async").Inc()
			slog.Warn("bus: async error", "conn", name, "err", err)
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				telemetry.BusErrors.WithLabelValues("disconnect").Inc()
				slog.Warn("bus: disconnected", "conn", name, "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			slog.Info("bus: reconnected", "conn", name, "url", nc.ConnectedUrlRedacted())
			runReconnectHooks(nc)
		}),
		nats.ClosedHandler(dropReconnectHooks),
	}
}

// CallOption adjusts one Call.
type CallOption func(*callOptions)

type callOptions struct {
	timeout     time.Duration
	unanswered  time.Duration
	unavailable bool
}

// Within bounds the call by d, whatever ctx's own deadline (a context
// without one gets DefaultTimeout otherwise).
func Within(d time.Duration) CallOption {
	return func(o *callOptions) { o.timeout = d }
}

// RetryUnavailable sends the request again, within ctx, while the service
// answers 503 BUS_UNAVAILABLE: what it needed has no leader for now (a
// cluster electing one after a node loss, a few seconds). Only for requests
// that change nothing (reads): a write answered so may have landed. The
// last answer is returned when ctx has no time left for another try.
func RetryUnavailable() CallOption {
	return func(o *callOptions) { o.unavailable = true }
}

// RetryUnanswered sends the request again, for up to d (and within ctx),
// while no instance of the service is subscribed (no responders). Nobody
// received such a request, so sending it again is always safe. On a NATS
// cluster a service whose node died has no subscription until it has
// reconnected to another node (a moment, well under a second); a caller
// that knows the service is deployed rides that out instead of answering
// 503. Where "nobody there" is a normal answer (an optional service, a
// turn's owner), do not use it: it only delays that answer by d.
func RetryUnanswered(d time.Duration) CallOption {
	return func(o *callOptions) { o.unanswered = d }
}

// Call sends req to ep and decodes the reply. A service error comes back
// as *protocol.Error with its kind; no responders becomes
// protocol.ErrUnavailable, a request that failed while the connection is
// down protocol.ErrBusUnavailable.
func Call[Req, Rep any](ctx context.Context, nc *nats.Conn, ep protocol.Endpoint[Req, Rep], req Req, opts ...CallOption) (Rep, error) {
	var rep Rep
	var o callOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	body, err := json.Marshal(req)
	if err != nil {
		return rep, fmt.Errorf("bus: encode request for %s: %w", ep.Subject, err)
	}
	giveUp := time.Now().Add(o.unanswered)
	wait := 25 * time.Millisecond
	var msg *nats.Msg
	for {
		msg, err = RequestMsg(ctx, nc, &nats.Msg{Subject: ep.Subject, Data: body})
		if err == nil || !o.retry(ctx, err, time.Now().Add(wait), giveUp) {
			break
		}
		select {
		case <-ctx.Done():
			return rep, err
		case <-time.After(wait):
		}
		wait = min(2*wait, 400*time.Millisecond)
	}
	if err != nil {
		return rep, err
	}
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return rep, fmt.Errorf("bus: decode reply from %s: %w", ep.Subject, err)
	}
	return rep, nil
}

// retry says whether a call that failed with err is sent again at next.
func (o *callOptions) retry(ctx context.Context, err error, next, giveUp time.Time) bool {
	if errors.Is(err, protocol.ErrUnavailable) {
		return !next.After(giveUp)
	}
	if e := protocol.AsError(err); o.unavailable && e != nil && e.Code == protocol.ErrBusUnavailable.Code {
		// Another try needs time for its own answer, not only the wait.
		deadline, ok := ctx.Deadline()
		return !ok || next.Add(time.Second).Before(deadline)
	}
	return false
}

// Publish publishes v on ev.
func Publish[T any](nc *nats.Conn, ev protocol.Event[T], v T) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("bus: encode %s: %w", ev.Subject, err)
	}
	if err := nc.Publish(ev.Subject, body); err != nil {
		return fmt.Errorf("bus: publish %s: %w", ev.Subject, err)
	}
	return nil
}

// Probe sends v on ev as a request and reports whether anyone answered
// within ctx: on a subject only its owner listens on (a turn's control
// subject), whether that owner is alive.
func Probe[T any](ctx context.Context, nc *nats.Conn, ev protocol.Event[T], v T) bool {
	body, err := json.Marshal(v)
	if err != nil {
		return false
	}
	_, err = nc.RequestWithContext(ctx, ev.Subject, body)
	return err == nil
}

// Subscribe calls fn with every fact published on ev. A message that does
// not decode is dropped (and counted); fn runs on the subscription's
// goroutine, so it must not block.
func Subscribe[T any](nc *nats.Conn, ev protocol.Event[T], fn func(T)) (*nats.Subscription, error) {
	sub, err := nc.Subscribe(ev.Subject, func(m *nats.Msg) {
		var v T
		if err := json.Unmarshal(m.Data, &v); err != nil {
			telemetry.BusErrors.WithLabelValues("undecodable").Inc()
			return
		}
		fn(v)
	})
	if err != nil {
		return nil, fmt.Errorf("bus: subscribe %s: %w", ev.Subject, err)
	}
	return sub, nil
}

// RequestMsg sends msg and returns the raw reply, turning micro error
// headers into *protocol.Error. The time left until ctx's deadline goes
// with the request (DeadlineHeader), so a Handle handler stops when its
// caller does. A request nobody answered in time is
// protocol.ErrBusTimeout (a 503; errors.Is context.DeadlineExceeded still
// holds).
func RequestMsg(ctx context.Context, nc *nats.Conn, msg *nats.Msg) (*nats.Msg, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
		deadline, _ = ctx.Deadline()
	}
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	msg.Header.Set(DeadlineHeader, strconv.FormatInt(max(time.Until(deadline).Milliseconds(), 0), 10))
	telemetry.InjectNATS(ctx, msg)
	reply, err := nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			telemetry.BusErrors.WithLabelValues("no_responders").Inc()
			return nil, fmt.Errorf("bus: %s: %w", msg.Subject, protocol.ErrUnavailable)
		}
		if !nc.IsConnected() || errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionDraining) {
			// The request was buffered for a server that did not come
			// back in time: say so, rather than a bare timeout (a 500).
			telemetry.BusErrors.WithLabelValues("request").Inc()
			return nil, fmt.Errorf("bus: request %s while disconnected (%v): %w", msg.Subject, err, protocol.ErrBusUnavailable)
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
			telemetry.BusErrors.WithLabelValues("timeout").Inc()
			// Nobody answered in time: the service is overloaded or
			// stuck, which is a 503 to retry, not a 500. The handler had
			// the same deadline and does not commit after it.
			return nil, fmt.Errorf("bus: request %s: %w: %w", msg.Subject, protocol.ErrBusTimeout, err)
		}
		telemetry.BusErrors.WithLabelValues("request").Inc()
		return nil, fmt.Errorf("bus: request %s: %w", msg.Subject, err)
	}
	if e := replyError(reply); e != nil {
		return nil, e
	}
	return reply, nil
}

// replyError extracts the *protocol.Error a micro service put in a reply's
// headers, or nil for a normal reply.
func replyError(msg *nats.Msg) *protocol.Error {
	if msg.Header == nil {
		return nil
	}
	code := msg.Header.Get(micro.ErrorCodeHeader)
	if code == "" {
		return nil
	}
	e := &protocol.Error{}
	if len(msg.Data) == 0 || json.Unmarshal(msg.Data, e) != nil || e.Message == "" {
		e = &protocol.Error{Message: msg.Header.Get(micro.ErrorHeader)}
	}
	e.Kind = protocol.ParseKind(code)
	return e
}

// Drain drains nc (subscriptions finish their pending messages, then the
// connection closes) and waits for it to close, bounded by ctx. nats.go's
// Drain returns at once; a caller that stops the embedded server next must
// wait, or the drain fails on a closed pipe.
func Drain(ctx context.Context, nc *nats.Conn) error {
	if nc == nil || nc.IsClosed() {
		return nil
	}
	if err := nc.Drain(); err != nil {
		nc.Close()
		return fmt.Errorf("bus: drain: %w", err)
	}
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for !nc.IsClosed() {
		select {
		case <-ctx.Done():
			nc.Close()
			return fmt.Errorf("bus: drain: %w", ctx.Err())
		case <-t.C:
		}
	}
	return nil
}
