package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
)

type greetRequest struct {
	Name string `json:"name"`
}

type greetReply struct {
	Greeting string `json:"greeting"`
}

// ctxT is a request context that cannot outlive a stuck test.
func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// endpointOn is an endpoint of s for a test subject.
func endpointOn[Req, Rep any](s *Service, name, subject string) protocol.Endpoint[Req, Rep] {
	return protocol.Endpoint[Req, Rep]{Service: s.name, Name: name, Subject: subject}
}

// call is Call to a test subject, the request type inferred.
func call[Rep, Req any](ctx context.Context, nc *nats.Conn, subject string, req Req) (Rep, error) {
	return Call(ctx, nc, protocol.Endpoint[Req, Rep]{Subject: subject}, req)
}

// serve starts a Service on its own connection and stops it at cleanup.
func serve(t *testing.T, srv *natstest.Server, cfg ServiceConfig) *Service {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "bustest"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := NewService(srv.Conn(cfg.Name), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

func TestDialers(t *testing.T) {
	srv := natstest.Start(t)
	tests := []struct {
		name string
		dial Dialer
	}{
		{"url", URLDialer(srv.URL())},
		{"in-process", OptionDialer(srv.ConnectOption())},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := tc.dial("svc-" + tc.name)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			// The name is what a server's connz (and a NATS operator) shows.
			if nc.Opts.Name != "svc-"+tc.name || nc.Opts.MaxReconnect != -1 {
				t.Fatalf("options: name %q, max reconnects %d", nc.Opts.Name, nc.Opts.MaxReconnect)
			}
			if err := nc.Flush(); err != nil {
				t.Fatalf("round trip: %v", err)
			}
		})
	}
}

func TestURLDialerNamesTheFailure(t *testing.T) {
	// A port nothing listens on: take one, then free it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + l.Addr().String()
	l.Close()
	_, err = URLDialer(url)("gateway")
	if err == nil || !strings.Contains(err.Error(), "bus: connect "+url+" as gateway") || !errors.Is(err, nats.ErrNoServers) {
		t.Fatalf("dial a dead server: %v", err)
	}
}

func TestRequestRoundTrip(t *testing.T) {
	srv := natstest.Start(t)
	s := serve(t, srv, ServiceConfig{})
	err := Handle(s, endpointOn[greetRequest, greetReply](s, "greet", "bustest.greet"), func(_ context.Context, req greetRequest) (greetReply, error) {
		return greetReply{Greeting: "hello " + req.Name}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := call[greetReply](ctxT(t), srv.Conn("client"), "bustest.greet", greetRequest{Name: "olga"})
	if err != nil || rep.Greeting != "hello olga" {
		t.Fatalf("reply %+v, %v", rep, err)
	}
}

// A handler's error reaches the caller as the *protocol.Error it returned
// (kind, message, code); any other error is a bare 500, its text stays
// in the service's log.
func TestRequestErrors(t *testing.T) {
	srv := natstest.Start(t)
	s := serve(t, srv, ServiceConfig{})
	fails := map[string]error{
		"notfound": protocol.Errorf(protocol.NotFound, "Session not found"),
		"coded":    protocol.Errorf(protocol.Conflict, "Already decided").WithCode("ALREADY_DECIDED"),
		"wrapped":  fmt.Errorf("store: %w", protocol.Errorf(protocol.TooLarge, "Too large")),
		"internal": errors.New("open /var/lib/waggle/secret.json: permission denied"),
	}
	for name, err := range fails {
		err := err
		if e := Handle(s, endpointOn[protocol.Empty, protocol.Empty](s, name, "bustest.fail."+name), func(context.Context, protocol.Empty) (protocol.Empty, error) {
			return protocol.Empty{}, err
		}); e != nil {
			t.Fatal(e)
		}
	}
	if err := Handle(s, endpointOn[greetRequest, greetReply](s, "typed", "bustest.typed"), func(_ context.Context, req greetRequest) (greetReply, error) {
		return greetReply{Greeting: req.Name}, nil
	}); err != nil {
		t.Fatal(err)
	}
	nc := srv.Conn("client")
	tests := []struct {
		name    string
		subject string
		body    []byte
		kind    protocol.Kind
		message string
		code    string
	}{
		{"not found", "bustest.fail.notfound", []byte(`{}`), protocol.NotFound, "Session not found", ""},
		{"code survives", "bustest.fail.coded", []byte(`{}`), protocol.Conflict, "Already decided", "ALREADY_DECIDED"},
		{"wrapped kind survives", "bustest.fail.wrapped", []byte(`{}`), protocol.TooLarge, "Too large", ""},
		{"internal hides detail", "bustest.fail.internal", []byte(`{}`), protocol.Internal, "Internal server error", ""},
		{"malformed body", "bustest.typed", []byte(`{"name":`), protocol.Invalid, "malformed request", ""},
		{"wrong type", "bustest.typed", []byte(`{"name":42}`), protocol.Invalid, "malformed request", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RequestMsg(ctxT(t), nc, &nats.Msg{Subject: tc.subject, Data: tc.body})
			e := protocol.AsError(err)
			if e == nil || e.Kind != tc.kind || e.Message != tc.message || e.Code != tc.code {
				t.Fatalf("error %#v, want %s %q %q", err, tc.kind, tc.message, tc.code)
			}
			if strings.Contains(err.Error(), "permission denied") {
				t.Fatalf("internal detail reached the caller: %v", err)
			}
		})
	}
}

func TestRequestWithoutResponderIsUnavailable(t *testing.T) {
	srv := natstest.Start(t)
	_, err := call[greetReply](ctxT(t), srv.Conn("client"), "bustest.nobody", greetRequest{})
	if !errors.Is(err, protocol.ErrUnavailable) || protocol.KindOf(err) != protocol.Unavailable {
		t.Fatalf("no responders: %v, want unavailable", err)
	}
}

// A service that is reconnecting (its node died) is not subscribed for a
// moment: RetryUnanswered sends the request again until it is, and the
// request is served once; a call without it answers unavailable at once.
func TestRetryUnanswered(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Conn("client")
	ep := protocol.Endpoint[greetRequest, greetReply]{Subject: "bustest.late"}
	if _, err := Call(ctxT(t), nc, ep, greetRequest{}); !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("without the option: %v, want unavailable at once", err)
	}
	var served atomic.Int32
	go func() {
		// The service comes back a moment later (the assertions hold
		// whenever it does).
		time.Sleep(100 * time.Millisecond)
		late := srv.Conn("late")
		_, _ = late.Subscribe("bustest.late", func(m *nats.Msg) {
			served.Add(1)
			_ = m.Respond([]byte(`{"greeting":"back"}`))
		})
	}()
	rep, err := Call(ctxT(t), nc, ep, greetRequest{}, RetryUnanswered(10*time.Second))
	if err != nil || rep.Greeting != "back" || served.Load() != 1 {
		t.Fatalf("%+v %v (served %d times)", rep, err, served.Load())
	}
	began := time.Now()
	if _, err := Call(ctxT(t), nc, protocol.Endpoint[greetRequest, greetReply]{Subject: "bustest.never"}, greetRequest{}, RetryUnanswered(200*time.Millisecond)); !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("nobody ever: %v", err)
	} else if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("gave up after %s", took)
	}
}

// A read whose service answers BUS_UNAVAILABLE (what it reads is electing
// a leader) is asked again with RetryUnavailable until it is answered;
// without it the caller gets the 503 at once.
func TestRetryUnavailable(t *testing.T) {
	srv := natstest.Start(t)
	s := serve(t, srv, ServiceConfig{})
	var calls atomic.Int32
	ep := endpointOn[greetRequest, greetReply](s, "electing", "bustest.electing")
	if err := Handle(s, ep, func(_ context.Context, r greetRequest) (greetReply, error) {
		if calls.Add(1) <= 2 {
			return greetReply{}, protocol.ErrBusUnavailable
		}
		return greetReply{Greeting: "led"}, nil
	}); err != nil {
		t.Fatal(err)
	}
	nc := srv.Conn("client")
	if _, err := Call(ctxT(t), nc, ep, greetRequest{}); protocol.AsError(err) == nil || protocol.AsError(err).Code != "BUS_UNAVAILABLE" {
		t.Fatalf("without the option: %v, want BUS_UNAVAILABLE", err)
	}
	rep, err := Call(ctxT(t), nc, ep, greetRequest{}, RetryUnavailable())
	if err != nil || rep.Greeting != "led" || calls.Load() != 3 {
		t.Fatalf("%+v %v after %d calls", rep, err, calls.Load())
	}
	// A deadline too close for another try returns the answer as it is.
	calls.Store(0)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := Call(ctx, nc, ep, greetRequest{}, RetryUnavailable()); protocol.AsError(err) == nil || protocol.AsError(err).Code != "BUS_UNAVAILABLE" || calls.Load() != 1 {
		t.Fatalf("near its deadline: %v after %d calls", err, calls.Load())
	}
}

func TestRequestEncodeAndDecodeFailures(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Conn("client")
	if _, err := call[greetReply](ctxT(t), nc, "bustest.x", func() {}); err == nil || !strings.Contains(err.Error(), "bus: encode request for bustest.x") {
		t.Fatalf("unencodable request: %v", err)
	}
	plain := srv.Conn("plain")
	if _, err := plain.Subscribe("bustest.plain", func(m *nats.Msg) { _ = m.Respond([]byte("not json")) }); err != nil {
		t.Fatal(err)
	}
	if err := plain.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := call[greetReply](ctxT(t), nc, "bustest.plain", greetRequest{}); err == nil || !strings.Contains(err.Error(), "bus: decode reply from bustest.plain") {
		t.Fatalf("undecodable reply: %v", err)
	}
}

// The caller's deadline bounds a request to a handler that does not answer
// in time; the handler still finishes before Stop returns.
func TestRequestHonoursTheCallersDeadline(t *testing.T) {
	srv := natstest.Start(t)
	s := serve(t, srv, ServiceConfig{})
	release := make(chan struct{})
	if err := Handle(s, endpointOn[protocol.Empty, protocol.Empty](s, "slow", "bustest.slow"), func(context.Context, protocol.Empty) (protocol.Empty, error) {
		<-release
		return protocol.Empty{}, nil
	}); err != nil {
		t.Fatal(err)
	}
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err := call[protocol.Empty](ctx, srv.Conn("client"), "bustest.slow", protocol.Empty{})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(began) > 5*time.Second {
		t.Fatalf("after %s: %v, want the deadline", time.Since(began), err)
	}
}

// replyError reads the micro error headers of any responder, ours or not.
func TestReplyError(t *testing.T) {
	hdr := func(code, desc string) nats.Header {
		return nats.Header{micro.ErrorCodeHeader: {code}, micro.ErrorHeader: {desc}}
	}
	tests := []struct {
		name string
		msg  *nats.Msg
		want *protocol.Error
	}{
		{"plain reply", &nats.Msg{Data: []byte(`{"error":"x"}`)}, nil},
		{"other headers", &nats.Msg{Header: nats.Header{"X": {"1"}}}, nil},
		{"body carries the message", &nats.Msg{Header: hdr("not_found", "header text"), Data: []byte(`{"error":"Not here","code":"NOPE"}`)},
			&protocol.Error{Kind: protocol.NotFound, Message: "Not here", Code: "NOPE"}},
		{"header when the body is empty", &nats.Msg{Header: hdr("conflict", "Conflict")}, &protocol.Error{Kind: protocol.Conflict, Message: "Conflict"}},
		{"header when the body is not ours", &nats.Msg{Header: hdr("invalid", "bad"), Data: []byte("oops")}, &protocol.Error{Kind: protocol.Invalid, Message: "bad"}},
		{"unknown kind", &nats.Msg{Header: hdr("E_BAD", "bad")}, &protocol.Error{Kind: protocol.Internal, Message: "bad"}},
		{"a foreign service's status code", &nats.Msg{Header: hdr("404", "gone?")}, &protocol.Error{Kind: protocol.Internal, Message: "gone?"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := replyError(tc.msg)
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Fatalf("replyError = %#v, want %#v", got, tc.want)
			}
		})
	}
}

// Drain lets a subscription finish the messages it already has before the
// connection closes, and returns only once it is closed.
func TestDrainFinishesPendingMessages(t *testing.T) {
	srv := natstest.Start(t)
	nc, err := srv.Dial("drained")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var mu sync.Mutex
	var got []string
	gate := make(chan struct{})
	if _, err := nc.Subscribe("bustest.drain", func(m *nats.Msg) {
		<-gate // hold the first message so the rest queue up
		mu.Lock()
		got = append(got, string(m.Data))
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	pub := srv.Conn("publisher")
	for _, d := range []string{"1", "2", "3"} {
		if err := pub.Publish("bustest.drain", []byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	close(gate)
	if err := Drain(ctxT(t), nc); err != nil {
		t.Fatal(err)
	}
	if !nc.IsClosed() {
		t.Fatal("Drain returned before the connection closed")
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, ",") != "1,2,3" {
		t.Fatalf("handled %v, want 1,2,3", got)
	}
}

// A drain that cannot finish in time closes the connection and says so.
func TestDrainBoundedByContext(t *testing.T) {
	srv := natstest.Start(t)
	nc, err := srv.Dial("stuck")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	release := make(chan struct{})
	handled := make(chan struct{})
	if _, err := nc.Subscribe("bustest.stuck", func(*nats.Msg) { close(handled); <-release }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Conn("publisher").Publish("bustest.stuck", nil); err != nil {
		t.Fatal(err)
	}
	<-handled
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = Drain(ctx, nc)
	close(release)
	if !errors.Is(err, context.DeadlineExceeded) || !nc.IsClosed() {
		t.Fatalf("drain: %v, closed %v", err, nc.IsClosed())
	}
}

func TestDrainOfNothing(t *testing.T) {
	if err := Drain(context.Background(), nil); err != nil {
		t.Fatalf("nil conn: %v", err)
	}
	srv := natstest.Start(t)
	nc := srv.Conn("closed")
	nc.Close()
	if err := Drain(context.Background(), nc); err != nil {
		t.Fatalf("closed conn: %v", err)
	}
}

func natsMsg(subject, data string) *nats.Msg { return &nats.Msg{Subject: subject, Data: []byte(data)} }

// Within bounds a call even when the caller's context would wait longer.
func TestCallWithin(t *testing.T) {
	srv := natstest.Start(t)
	s := serve(t, srv, ServiceConfig{})
	release := make(chan struct{})
	defer close(release)
	if err := Handle(s, endpointOn[protocol.Empty, protocol.Empty](s, "slow", "bustest.within"), func(context.Context, protocol.Empty) (protocol.Empty, error) {
		<-release
		return protocol.Empty{}, nil
	}); err != nil {
		t.Fatal(err)
	}
	ep := protocol.Endpoint[protocol.Empty, protocol.Empty]{Subject: "bustest.within"}
	began := time.Now()
	_, err := Call(ctxT(t), srv.Conn("client"), ep, protocol.Empty{}, Within(100*time.Millisecond))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(began) > 5*time.Second {
		t.Fatalf("after %s: %v, want the 100ms bound", time.Since(began), err)
	}
}

// A service refuses to serve another service's endpoint.
func TestHandleRefusesAnotherServicesEndpoint(t *testing.T) {
	srv := natstest.Start(t)
	s := serve(t, srv, ServiceConfig{})
	err := Handle(s, protocol.ListSessions, func(context.Context, protocol.SessionListRequest) (protocol.SessionListReply, error) {
		return protocol.SessionListReply{}, nil
	})
	if err == nil || !strings.Contains(err.Error(), "belongs to "+protocol.ServiceSessionStore) {
		t.Fatalf("Handle of a session-store endpoint on %q: %v", s.name, err)
	}
}

// Events arrive typed; a body that is not the event's type is dropped.
func TestPublishSubscribe(t *testing.T) {
	srv := natstest.Start(t)
	ev := protocol.Event[greetRequest]{Subject: "bustest.evt.greet"}
	got := make(chan greetRequest, 2)
	listener := srv.Conn("listener")
	sub, err := Subscribe(listener, ev, func(g greetRequest) { got <- g })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	// The server has the subscription once the listener's flush returns.
	if err := listener.Flush(); err != nil {
		t.Fatal(err)
	}
	pub := srv.Conn("publisher")
	if err := pub.Publish(ev.Subject, []byte(`{"name":42}`)); err != nil {
		t.Fatal(err)
	}
	if err := Publish(pub, ev, greetRequest{Name: "olga"}); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-got:
		if g.Name != "olga" {
			t.Fatalf("got %+v, want the typed event only", g)
		}
	case <-ctxT(t).Done():
		t.Fatal("no event")
	}
}

// Probe tells whether the one listener of a subject answers.
func TestProbe(t *testing.T) {
	srv := natstest.Start(t)
	ev := protocol.Event[protocol.Empty]{Subject: "bustest.owner"}
	nc := srv.Conn("client")
	if Probe(ctxT(t), nc, ev, protocol.Empty{}) {
		t.Fatal("a probe with no listener was answered")
	}
	owner := srv.Conn("owner")
	if _, err := owner.Subscribe(ev.Subject, func(m *nats.Msg) { _ = m.Respond(nil) }); err != nil {
		t.Fatal(err)
	}
	if err := owner.Flush(); err != nil {
		t.Fatal(err)
	}
	if !Probe(ctxT(t), nc, ev, protocol.Empty{}) {
		t.Fatal("the owner did not answer the probe")
	}
}
