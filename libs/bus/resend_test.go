package bus

import (
	"context"
	"encoding/json"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
)

var errTaken = &protocol.Error{Kind: protocol.Conflict, Code: "TAKEN", Message: "already taken"}

// A request lost on the way (here: the first delivery dropped, as when the
// node routing it dies) is sent again and answered, long before the
// caller's deadline.
func TestCallResendingSurvivesALostRequest(t *testing.T) {
	srv := natstest.Start(t)
	s := serve(t, srv, ServiceConfig{})
	var got atomic.Int32
	lost, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the service stops
	ep := endpointOn[greetRequest, greetReply](s, "greet", "bustest.resend")
	err := Handle(s, ep, func(ctx context.Context, req greetRequest) (greetReply, error) {
		if got.Add(1) == 1 {
			close(lost)
			<-release // never answers in time: as good as lost
			return greetReply{}, ctx.Err()
		}
		return greetReply{Greeting: "hello " + req.Name}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := CallResending(ctx, srv.Conn("client"), ep, greetRequest{Name: "olga"}, Resending{After: 50 * time.Millisecond})
	if err != nil || rep.Greeting != "hello olga" {
		t.Fatalf("reply %+v, %v", rep, err)
	}
	<-lost
	if ctx.Err() != nil {
		t.Fatal("answered only at the deadline")
	}
}

// A resend refused because the first delivery is being handled is
// ignored: the caller gets the first delivery's own (slower) answer.
func TestCallResendingKeepsTheFirstAnswer(t *testing.T) {
	srv := natstest.Start(t)
	s := serve(t, srv, ServiceConfig{Concurrency: 4})
	var got atomic.Int32
	second := make(chan struct{})
	ep := endpointOn[greetRequest, greetReply](s, "greet", "bustest.taken")
	err := Handle(s, ep, func(ctx context.Context, req greetRequest) (greetReply, error) {
		if got.Add(1) == 1 {
			<-second // slow: answers after the resend was refused
			return greetReply{Greeting: "first"}, nil
		}
		defer func() {
			if got.Load() == 2 {
				close(second)
			}
		}()
		return greetReply{}, errTaken
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := CallResending(ctxT(t), srv.Conn("client"), ep, greetRequest{}, Resending{After: 50 * time.Millisecond})
	if err != nil || rep.Greeting != "first" {
		t.Fatalf("reply %+v, %v; want the first delivery's answer", rep, err)
	}
}

// With nobody subscribed the call says so after Unanswered, not at the
// deadline.
func TestCallResendingWithoutResponder(t *testing.T) {
	srv := natstest.Start(t)
	ep := protocol.Endpoint[greetRequest, greetReply]{Subject: "bustest.nobody"}
	ctx := ctxT(t)
	_, err := CallResending(ctx, srv.Conn("client"), ep, greetRequest{}, Resending{After: time.Second, Unanswered: 200 * time.Millisecond})
	if protocol.KindOf(err) != protocol.Unavailable || ctx.Err() != nil {
		t.Fatalf("err %v, want unavailable before the deadline", err)
	}
}

// The first delivery's refusal is the answer even when it comes after a
// resend was refused: a slow "session busy" is not lost to the resending.
func TestCallResendingKeepsTheFirstRefusal(t *testing.T) {
	srv := natstest.Start(t)
	s := serve(t, srv, ServiceConfig{Concurrency: 4})
	var got atomic.Int32
	second := make(chan struct{})
	busy := &protocol.Error{Kind: protocol.Conflict, Code: "BUSY", Message: "busy"}
	ep := endpointOn[greetRequest, greetReply](s, "greet", "bustest.refusal")
	err := Handle(s, ep, func(ctx context.Context, req greetRequest) (greetReply, error) {
		if got.Add(1) == 1 {
			<-second
			return greetReply{}, busy
		}
		if got.Load() == 2 {
			defer close(second)
		}
		return greetReply{}, errTaken
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = CallResending(ctxT(t), srv.Conn("client"), ep, greetRequest{}, Resending{After: 50 * time.Millisecond})
	if e := protocol.AsError(err); e == nil || e.Code != "BUSY" {
		t.Fatalf("err %v, want the first delivery's BUSY", err)
	}
}

// A resend handled before its first send (another instance took it, or
// the first waited longer in a queue) makes the record and succeeds; the
// first send then finds that record and refuses itself as a duplicate.
// The caller gets the success, not the first send's refusal; and when the
// other sends fail too, it gets an answer as soon as all of them have
// answered (never waits for its deadline).
func TestCallResendingAwaitsTheSendThatGotThereFirst(t *testing.T) {
	busy := &protocol.Error{Kind: protocol.Unavailable, Code: "BUSY", Message: "busy"}
	for _, tc := range []struct {
		name   string
		resend *protocol.Error // the resend's answer (nil: success)
		want   string          // the call's error code ("": success)
	}{
		{"resend succeeds", nil, ""},
		{"resend refused as a duplicate too", errTaken, "TAKEN"},
		{"resend failed otherwise", busy, "BUSY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Start(t)
			handler := srv.Conn("handler")
			sub, err := handler.SubscribeSync("bustest.dup")
			if err != nil {
				t.Fatal(err)
			}
			if err := handler.Flush(); err != nil {
				t.Fatal(err)
			}
			ctx := ctxT(t)
			answer := func(m *nats.Msg, e *protocol.Error) {
				if e == nil {
					_ = m.Respond([]byte(`{"greeting":"made by the resend"}`))
					return
				}
				body, _ := json.Marshal(e)
				_ = m.RespondMsg(&nats.Msg{Subject: m.Reply, Data: body, Header: nats.Header{
					micro.ErrorHeader: {e.Message}, micro.ErrorCodeHeader: {e.Kind.String()},
				}})
			}
			served := make(chan struct{})
			go func() {
				defer close(served)
				first, err := sub.NextMsgWithContext(ctx)
				if err != nil {
					return
				}
				second, err := sub.NextMsgWithContext(ctx)
				if err != nil {
					return
				}
				if first.Header.Get(ResendHeader) != "" || second.Header.Get(ResendHeader) == "" {
					t.Errorf("sends out of order: %v then %v", first.Header, second.Header)
				}
				// The resend made the record: the first send, handled
				// after it, is the duplicate (and answers first).
				answer(first, errTaken)
				answer(second, tc.resend)
				for {
					m, err := sub.NextMsgWithContext(ctx)
					if err != nil {
						return
					}
					answer(m, errTaken)
				}
			}()
			rep, err := CallResending(ctx, srv.Conn("client"), protocol.Endpoint[greetRequest, greetReply]{Subject: "bustest.dup"}, greetRequest{},
				Resending{After: 20 * time.Millisecond, Duplicate: func(err error) bool {
					e := protocol.AsError(err)
					return e != nil && e.Code == errTaken.Code
				}})
			switch e := protocol.AsError(err); {
			case ctx.Err() != nil:
				t.Fatalf("answered only at the deadline: %v", err)
			case tc.want == "" && (err != nil || rep.Greeting != "made by the resend"):
				t.Fatalf("reply %+v, %v; want the resend's success", rep, err)
			case tc.want != "" && (e == nil || e.Code != tc.want):
				t.Fatalf("err %v, want %s", err, tc.want)
			}
			_ = sub.Unsubscribe()
			<-served
		})
	}
}

// A call costs a few KiB, not the connection's 64 Ki-entry pending
// channel (512 KiB) that SubscribeSync allocates: a server starting
// thousands of turns at once held that much per turn being started, and
// its heap (and RSS) grew with it (issue 23).
func TestCallResendingAllocatesLittle(t *testing.T) {
	srv := natstest.Start(t)
	s := serve(t, srv, ServiceConfig{})
	ep := endpointOn[greetRequest, greetReply](s, "greet", "bustest.cheap")
	if err := Handle(s, ep, func(_ context.Context, req greetRequest) (greetReply, error) {
		return greetReply{Greeting: "hello " + req.Name}, nil
	}); err != nil {
		t.Fatal(err)
	}
	nc := srv.Conn("client")
	call := func() {
		if rep, err := CallResending(ctxT(t), nc, ep, greetRequest{Name: "olga"}, Resending{After: time.Second}); err != nil || rep.Greeting != "hello olga" {
			t.Fatalf("reply %+v, %v", rep, err)
		}
	}
	call() // warm-up: the connection's reply machinery, the handler's pools
	const calls = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range calls {
		call()
	}
	runtime.ReadMemStats(&after)
	// Everything the process allocated meanwhile counts (the embedded
	// server and the handler's side too): still far below one 512 KiB
	// channel per call.
	if per := (after.TotalAlloc - before.TotalAlloc) / calls; per > 64<<10 {
		t.Fatalf("%d bytes allocated per call, want ≤ 64 KiB", per)
	}
}
