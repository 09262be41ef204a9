package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
)

func TestNewServiceNeedsAName(t *testing.T) {
	srv := natstest.Start(t)
	if _, err := NewService(srv.Conn("x"), ServiceConfig{}); err == nil {
		t.Fatal("a service without a name was added")
	}
}

// The service is visible to micro discovery under its name and version,
// with the endpoints it serves.
func TestServiceDiscovery(t *testing.T) {
	srv := natstest.Start(t)
	s := serve(t, srv, ServiceConfig{Name: "discovered"})
	if err := Handle(s, endpointOn[greetRequest, greetReply](s, "greet", "bustest.greet"), func(_ context.Context, r greetRequest) (greetReply, error) { return greetReply{}, nil }); err != nil {
		t.Fatal(err)
	}
	info, err := call[micro.Info, any](ctxT(t), srv.Conn("client"), "$SRV.INFO.discovered", nil)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "discovered" || info.Version != "0.1.0" || len(info.Endpoints) != 1 ||
		info.Endpoints[0].Name != "greet" || info.Endpoints[0].Subject != "bustest.greet" {
		t.Fatalf("info %+v", info)
	}
}

// Handlers run on their own goroutines, up to Concurrency at once: a slow
// request does not hold up the next one, and no more than Concurrency run.
func TestHandlersRunConcurrentlyUpToTheBound(t *testing.T) {
	const bound, requests = 3, 9
	srv := natstest.Start(t)
	s := serve(t, srv, ServiceConfig{Concurrency: bound})
	var running, most atomic.Int32
	release := make(chan struct{})
	if err := Handle(s, endpointOn[greetRequest, greetReply](s, "slow", "bustest.slow"), func(_ context.Context, r greetRequest) (greetReply, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		<-release
		return greetReply{Greeting: r.Name}, nil
	}); err != nil {
		t.Fatal(err)
	}
	nc := srv.Conn("client")
	var wg sync.WaitGroup
	errs := make(chan error, requests)
	for range requests {
		wg.Go(func() {
			if _, err := call[greetReply](ctxT(t), nc, "bustest.slow", greetRequest{Name: "x"}); err != nil {
				errs <- err
			}
		})
	}
	// All slots fill although no handler has returned: they are not run
	// one after another on the subscription's goroutine.
	waitfor.True(t, "every slot busy", func() bool { return running.Load() == bound })
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("request: %v", err)
	}
	if m := most.Load(); m != bound {
		t.Fatalf("at most %d handlers ran at once, want %d", m, bound)
	}
}

// Stop stops taking requests and waits for the running handlers: a request
// in progress gets its real reply, and one sent while Stop waits is
// answered "unavailable" without reaching a handler.
func TestStopWaitsForRunningHandlers(t *testing.T) {
	srv := natstest.Start(t)
	s := serve(t, srv, ServiceConfig{})
	started, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	var finished atomic.Bool
	if err := Handle(s, endpointOn[greetRequest, greetReply](s, "slow", "bustest.slow"), func(_ context.Context, r greetRequest) (greetReply, error) {
		if calls.Add(1) > 1 {
			return greetReply{Greeting: "late"}, nil
		}
		close(started)
		<-release
		finished.Store(true)
		return greetReply{Greeting: "done " + r.Name}, nil
	}); err != nil {
		t.Fatal(err)
	}
	nc := srv.Conn("client")
	reply := make(chan error, 1)
	go func() {
		rep, err := call[greetReply](ctxT(t), nc, "bustest.slow", greetRequest{Name: "a"})
		if err == nil && rep.Greeting != "done a" {
			err = errors.New("reply " + rep.Greeting)
		}
		reply <- err
	}()
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(ctxT(t)) }()
	waitfor.True(t, "micro service stopped", s.svc.Stopped)
	// Either no responders or the stopping instance's own 503: both are
	// "unavailable", neither reaches a handler.
	if _, err := call[greetReply](ctxT(t), nc, "bustest.slow", greetRequest{Name: "b"}); protocol.KindOf(err) != protocol.Unavailable {
		t.Fatalf("request while stopping: %v, want unavailable", err)
	}
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) with a handler running", err)
	default:
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if !finished.Load() || calls.Load() != 1 {
		t.Fatalf("at Stop's return: first handler finished %v, %d handlers called", finished.Load(), calls.Load())
	}
	if err := <-reply; err != nil {
		t.Fatalf("request in progress at Stop: %v", err)
	}
}

// When Stop's context ends first, the handlers' context is cancelled and
// Stop still waits for them to return: no handler outlives its Service.
func TestStopCancelsHandlersWhenItsContextEnds(t *testing.T) {
	srv := natstest.Start(t)
	s := serve(t, srv, ServiceConfig{})
	started := make(chan struct{})
	var cause atomic.Value
	if err := Handle(s, endpointOn[protocol.Empty, protocol.Empty](s, "stubborn", "bustest.stubborn"), func(ctx context.Context, _ protocol.Empty) (protocol.Empty, error) {
		close(started)
		<-ctx.Done()
		cause.Store(ctx.Err())
		return protocol.Empty{}, ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	nc := srv.Conn("client")
	reply := make(chan error, 1)
	go func() {
		_, err := call[protocol.Empty](ctxT(t), nc, "bustest.stubborn", protocol.Empty{})
		reply <- err
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := cause.Load().(error); !errors.Is(got, context.Canceled) {
		t.Fatalf("handler context ended with %v, want cancelled", got)
	}
	// Cut short by the stop, not failed: the caller may try elsewhere.
	// (A new error value, not protocol.ErrUnavailable itself: that one
	// means no responder at all, and callers such as the gateway retry
	// only a 503 an instance sent.)
	err := <-reply
	if pe := protocol.AsError(err); pe == nil || errors.Is(err, protocol.ErrUnavailable) || *pe != *protocol.ErrUnavailable {
		t.Fatalf("reply to the cancelled request: %v, want the service's 503", err)
	}
}

// Requests that reach the service while it stops are answered "unavailable"
// at once, and none of them starts a handler after Stop returned: micro
// drains the subscription asynchronously, so it still delivers requests
// after its Stop.
func TestNoHandlerStartsAfterStop(t *testing.T) {
	srv := natstest.Start(t)
	s := serve(t, srv, ServiceConfig{Concurrency: 1})
	first, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var afterStop, running atomic.Int32
	var stopDone atomic.Bool
	if err := Handle(s, endpointOn[protocol.Empty, protocol.Empty](s, "one", "bustest.one"), func(context.Context, protocol.Empty) (protocol.Empty, error) {
		running.Add(1)
		defer running.Add(-1)
		if stopDone.Load() {
			afterStop.Add(1)
		}
		once.Do(func() { close(first) })
		<-release
		return protocol.Empty{}, nil
	}); err != nil {
		t.Fatal(err)
	}
	nc := srv.Conn("client")
	const queued = 20
	var wg sync.WaitGroup
	outcomes := make(chan string, queued+1)
	for range queued + 1 {
		wg.Go(func() {
			_, err := call[protocol.Empty](ctxT(t), nc, "bustest.one", protocol.Empty{})
			outcomes <- outcome(err)
		})
	}
	// One request runs, the others wait for its slot in the subscription.
	<-first
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(ctxT(t)); stopDone.Store(true) }()
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if n := running.Load(); n != 0 {
		t.Fatalf("%d handlers still running after Stop", n)
	}
	wg.Wait()
	close(outcomes)
	counts := map[string]int{}
	for st := range outcomes {
		counts[st]++
	}
	if afterStop.Load() != 0 {
		t.Fatalf("%d handlers started after Stop returned", afterStop.Load())
	}
	if counts["ok"] < 1 || counts["ok"]+counts[protocol.Unavailable.String()] != queued+1 {
		t.Fatalf("replies by outcome %v: want the running one served, the rest unavailable", counts)
	}
}

func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	return protocol.KindOf(err).String()
}

// A handler slower than its caller's deadline: the caller gets a 503
// (protocol.ErrBusTimeout, not a bare timeout that the gateway answers
// 500), and the handler's context carries the caller's deadline, so it is
// done by the time the handler would commit, and the write does not
// happen. Told "failed", the caller can trust that nothing was written.
func TestHandlerMissingItsCallersDeadlineDoesNotCommit(t *testing.T) {
	srv := natstest.Start(t)
	s := serve(t, srv, ServiceConfig{})
	started, proceed, finished := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var committed atomic.Bool
	var handlerDeadline time.Time
	if err := Handle(s, endpointOn[greetRequest, greetReply](s, "save", "bustest.save"), func(ctx context.Context, r greetRequest) (greetReply, error) {
		defer close(finished)
		handlerDeadline, _ = ctx.Deadline()
		close(started)
		<-proceed // the slow part (sanitising, an fsync)
		if err := ctx.Err(); err != nil {
			return greetReply{}, err
		}
		committed.Store(true)
		return greetReply{Greeting: r.Name}, nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctxT(t), 300*time.Millisecond)
	defer cancel()
	callerDeadline, _ := ctx.Deadline()
	_, err := call[greetReply](ctx, srv.Conn("client"), "bustest.save", greetRequest{Name: "x"})
	<-started
	close(proceed)
	<-finished
	if pe := protocol.AsError(err); pe == nil || pe.Kind != protocol.Unavailable || !errors.Is(err, protocol.ErrBusTimeout) {
		t.Errorf("caller got %v (kind %s), want 503 %s", err, protocol.KindOf(err), protocol.ErrBusTimeout.Code)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("caller's error %v is not a context.DeadlineExceeded any more", err)
	}
	if handlerDeadline.IsZero() || handlerDeadline.After(callerDeadline) {
		t.Errorf("handler's deadline %v, caller's %v: the handler may outlive its caller", handlerDeadline, callerDeadline)
	}
	if committed.Load() {
		t.Error("the handler committed after its caller was told the request failed")
	}
}

// A request that waited for a free slot until its caller's deadline had
// passed is not run at all.
func TestRequestWhoseDeadlinePassedInTheQueueIsNotRun(t *testing.T) {
	srv := natstest.Start(t)
	s := serve(t, srv, ServiceConfig{Concurrency: 1})
	release := make(chan struct{})
	var mu sync.Mutex
	var ran []string
	if err := Handle(s, endpointOn[greetRequest, greetReply](s, "save", "bustest.save"), func(_ context.Context, r greetRequest) (greetReply, error) {
		mu.Lock()
		ran = append(ran, r.Name)
		mu.Unlock()
		if r.Name == "first" {
			<-release
		}
		return greetReply{Greeting: r.Name}, nil
	}); err != nil {
		t.Fatal(err)
	}
	nc := srv.Conn("client")
	firstDone := make(chan error, 1)
	go func() {
		_, err := call[greetReply](ctxT(t), nc, "bustest.save", greetRequest{Name: "first"})
		firstDone <- err
	}()
	waitfor.True(t, "first request running", func() bool { mu.Lock(); defer mu.Unlock(); return len(ran) == 1 })
	ctx, cancel := context.WithTimeout(ctxT(t), 200*time.Millisecond)
	defer cancel()
	if _, err := call[greetReply](ctx, nc, "bustest.save", greetRequest{Name: "late"}); !errors.Is(err, protocol.ErrBusTimeout) {
		t.Errorf("queued request: %v, want %s", err, protocol.ErrBusTimeout.Code)
	}
	close(release)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	// Concurrency 1: "after" runs once "late" has been dealt with.
	if _, err := call[greetReply](ctxT(t), nc, "bustest.save", greetRequest{Name: "after"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(ran, []string{"first", "after"}) {
		t.Errorf("handlers ran for %v, want [first after]: a request its caller gave up on ran", ran)
	}
}

// A handler whose JetStream call found no leader (a cluster electing one
// after a node loss) answers 503 BUS_UNAVAILABLE, not a bare 500; other
// failures stay Internal.
func TestHandlerBusUnavailableIsA503(t *testing.T) {
	srv := natstest.Start(t)
	s := serve(t, srv, ServiceConfig{})
	fails := map[string]error{
		"no leader":    fmt.Errorf("store: append: %w", &jetstream.APIError{Code: 503, ErrorCode: jsErrNotAvailable, Description: "JetStream system temporarily unavailable"}),
		"no response":  fmt.Errorf("lease: %w", jetstream.ErrNoStreamResponse),
		"disconnected": fmt.Errorf("publish: %w", nats.ErrDisconnected),
		"other":        errors.New("boom"),
	}
	if err := Handle(s, endpointOn[greetRequest, greetReply](s, "fail", "bustest.fail"), func(_ context.Context, r greetRequest) (greetReply, error) {
		return greetReply{}, fails[r.Name]
	}); err != nil {
		t.Fatal(err)
	}
	for name := range fails {
		_, err := call[greetReply](ctxT(t), srv.Conn("client"), "bustest.fail", greetRequest{Name: name})
		e := protocol.AsError(err)
		want := protocol.ErrBusUnavailable
		if name == "other" {
			want = protocol.ErrInternal
		}
		if e == nil || e.Kind != want.Kind || e.Code != want.Code {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
}
