package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/telemetry"
)

// ServiceConfig configures a Service.
type ServiceConfig struct {
	// Name is the micro service name (protocol.Service*). Required.
	Name string
	// Version is reported in micro discovery. Default "0.1.0".
	Version string
	// Concurrency bounds how many requests run at once. micro calls a
	// handler on the subscription's goroutine, so without this a slow
	// request (an fsync) would hold up every other one. Default 64.
	Concurrency int
	// Logger logs handler failures. Default slog.Default().
	Logger *slog.Logger
	// Storage, when set, is told of every handler failure: a write that
	// failed for lack of space marks the store full. Such failures are
	// answered protocol.ErrStorageFull (507) with or without a guard.
	Storage *StorageGuard
	// MapError, when set, translates a handler's error before it is
	// answered: a store turns its database driver's connection errors into
	// a 503 (protocol.ErrStoreUnavailable) instead of a 500. An error it
	// changes is logged as a warning with the original.
	MapError func(error) error
}

// Service is a nats micro service whose endpoints are typed JSON handlers
// run on their own goroutines, all owned by the Service and waited for by
// Stop.
type Service struct {
	name    string
	nc      *nats.Conn
	svc     micro.Service
	log     *slog.Logger
	storage *StorageGuard
	mapErr  func(error) error
	ctx     context.Context
	cancel  context.CancelFunc
	sem     chan struct{}
	wg      sync.WaitGroup

	// mu orders handler starts (wg.Add) before Stop's wg.Wait: micro
	// drains an endpoint's subscription asynchronously, so requests still
	// arrive after its Stop, and one that found a free slot then would
	// start a handler nobody waits for.
	mu       sync.Mutex
	stopping chan struct{} // closed by Stop
	stopped  bool
}

// NewService registers a micro service on nc. Endpoints are added with
// Handle before or after; requests are served until Stop.
func NewService(nc *nats.Conn, cfg ServiceConfig) (*Service, error) {
	if cfg.Name == "" {
		return nil, errors.New("bus: service name is required")
	}
	if cfg.Version == "" {
		cfg.Version = "0.1.0"
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 64
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	svc, err := micro.AddService(nc, micro.Config{Name: cfg.Name, Version: cfg.Version})
	if err != nil {
		return nil, fmt.Errorf("bus: add service %s: %w", cfg.Name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Service{
		name: cfg.Name, nc: nc, svc: svc, log: cfg.Logger, storage: cfg.Storage, mapErr: cfg.MapError, ctx: ctx, cancel: cancel,
		sem: make(chan struct{}, cfg.Concurrency), stopping: make(chan struct{}),
	}, nil
}

// HandlerFunc handles one decoded request.
type HandlerFunc[Req, Rep any] func(ctx context.Context, req Req) (Rep, error)

// Handle serves ep on s with fn. The request body is decoded into Req (an
// undecodable body is Invalid); fn's *protocol.Error keeps its kind, any
// other error is logged and answered as Internal without detail. Serving
// an endpoint of another service is a programming error.
func Handle[Req, Rep any](s *Service, ep protocol.Endpoint[Req, Rep], fn HandlerFunc[Req, Rep]) error {
	if ep.Service != s.name {
		return fmt.Errorf("bus: endpoint %s belongs to %s, not %s", ep.Name, ep.Service, s.name)
	}
	name := ep.Name
	served := telemetry.BusRequests.MustCurryWith(prometheus.Labels{"service": s.name, "endpoint": name})
	took := telemetry.BusDuration.WithLabelValues(s.name, name)
	h := micro.HandlerFunc(func(r micro.Request) {
		// The caller's deadline counts from arrival, before the wait for
		// a free slot.
		deadline, bounded := handlerDeadline(time.Now(), r.Headers())
		s.dispatch(r, func(ctx context.Context) {
			began := time.Now()
			if bounded {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, deadline)
				defer cancel()
			}
			if r.Headers().Get(ResendHeader) != "" {
				ctx = context.WithValue(ctx, resentKey{}, true)
			}
			ctx, span := telemetry.Tracer().Start(telemetry.ExtractNATS(ctx, nats.Header(r.Headers())), s.name+"/"+name,
				trace.WithSpanKind(trace.SpanKindServer))
			defer span.End()
			defer func() { took.Observe(time.Since(began).Seconds()) }()
			if ctx.Err() != nil {
				// The caller has given up (it waited in the queue too
				// long): whatever this request would do, it must not
				// happen now that the caller was told it failed.
				served.WithLabelValues(s.fail(ctx, r, name, ctx.Err()).String()).Inc()
				return
			}
			var req Req
			if err := json.Unmarshal(r.Data(), &req); err != nil {
				served.WithLabelValues(protocol.Invalid.String()).Inc()
				respondError(r, protocol.Errorf(protocol.Invalid, "malformed request"))
				return
			}
			rep, err := fn(ctx, req)
			if err != nil {
				err = s.mapError(name, err)
				served.WithLabelValues(s.fail(ctx, r, name, err).String()).Inc()
				return
			}
			served.WithLabelValues("ok").Inc()
			if err := r.RespondJSON(rep); err != nil {
				s.log.Warn("bus: respond failed", "endpoint", name, "err", err)
			}
		})
	})
	return s.addEndpoint(name, ep.Subject, h)
}

// addEndpoint subscribes and flushes: the server has the subscription when
// this returns, so a request sent right after a service starts (from
// another connection) cannot find "no responders".
func (s *Service) addEndpoint(name, subject string, h micro.Handler) error {
	if err := s.svc.AddEndpoint(name, h, micro.WithEndpointSubject(subject)); err != nil {
		return fmt.Errorf("bus: add endpoint %s: %w", name, err)
	}
	if err := s.nc.FlushTimeout(5 * time.Second); err != nil {
		return fmt.Errorf("bus: add endpoint %s: flush: %w", name, err)
	}
	return nil
}

func (s *Service) dispatch(r micro.Request, fn func(ctx context.Context)) {
	select {
	case s.sem <- struct{}{}:
	case <-s.stopping:
		// Stopped while micro was still draining requests to us: answer
		// at once so the caller can go to another instance instead of
		// waiting for its timeout.
		respondError(r, protocol.ErrUnavailable)
		return
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		<-s.sem
		respondError(r, protocol.ErrUnavailable)
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer func() { <-s.sem; s.wg.Done() }()
		fn(s.ctx)
	}()
}

// mapError applies MapError, logging what it changed (the client gets
// no detail).
func (s *Service) mapError(name string, err error) error {
	if s.mapErr == nil {
		return err
	}
	mapped := s.mapErr(err)
	if mapped != err {
		s.log.Warn("bus: handler failed", "endpoint", name, "err", err, "answered", protocol.KindOf(mapped))
	}
	return mapped
}

// fail answers a handler's error and returns the kind it sent. ctx is the
// handler's.
func (s *Service) fail(ctx context.Context, r micro.Request, name string, err error) protocol.Kind {
	e := protocol.AsError(err)
	switch {
	case e != nil:
	case s.ctx.Err() != nil && errors.Is(err, context.Canceled):
		// Stop cut the handler short: not a failure of the request, and
		// another instance may still serve it.
		e = protocol.ErrUnavailable
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		// The caller's deadline passed (it has its own timeout by now
		// and will not read this): a 503 like the caller's, not a
		// failure to log.
		e = protocol.ErrBusTimeout
	case IsNoSpace(err):
		s.storage.Check(err)
		s.log.Error("bus: handler failed: storage full", "endpoint", name, "err", err)
		e = protocol.ErrStorageFull
	case Unavailable(err):
		// The bus could not answer the handler (a stream or bucket
		// without a leader while the cluster elects one, a connection
		// away): a 503 the caller can retry in a moment, not a 500.
		s.log.Warn("bus: handler failed: bus unavailable", "endpoint", name, "err", err)
		e = protocol.ErrBusUnavailable
	default:
		s.log.Error("bus: handler failed", "endpoint", name, "err", err)
		e = protocol.ErrInternal
	}
	respondError(r, e)
	return e.Kind
}

// handlerDeadline reads the caller's DeadlineHeader on a request that
// arrived at now. The handler's deadline is a little earlier than the
// caller's (a twentieth of the time, at most 100 ms): a write committed
// just before it still has time to reach the caller as a success, so a
// caller that was told "timed out" is much less likely to have had its
// write done. Without the header (a client other than RequestMsg) the
// handler is bounded only by the service's lifetime, as before.
func handlerDeadline(now time.Time, h micro.Headers) (time.Time, bool) {
	v := h.Get(DeadlineHeader)
	if v == "" {
		return time.Time{}, false
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 {
		return time.Time{}, false
	}
	budget := time.Duration(min(ms, int64(24*time.Hour/time.Millisecond))) * time.Millisecond
	return now.Add(budget - min(budget/20, 100*time.Millisecond)), true
}

func respondError(r micro.Request, e *protocol.Error) {
	body, _ := json.Marshal(e)
	// Respond with the error headers ourselves: micro's Request.Error
	// records the error on the request, which micro reads as soon as the
	// handler returns — and our handlers return before they respond.
	_ = r.Respond(body, micro.WithHeaders(micro.Headers{
		micro.ErrorHeader:     {e.Message},
		micro.ErrorCodeHeader: {e.Kind.String()},
	}))
}

// Stop stops taking requests, waits for running handlers (bounded by ctx:
// then their context is cancelled and Stop waits for them to return) and
// cancels their context. Requests still in flight to this instance, and
// handlers cut short by the cancellation, are answered with
// protocol.ErrUnavailable's 503, which callers may retry on another
// instance. Stop may be called more than once.
func (s *Service) Stop(ctx context.Context) error {
	err := s.svc.Stop()
	s.mu.Lock()
	if !s.stopped {
		s.stopped = true
		close(s.stopping)
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.cancel()
		<-done
	}
	s.cancel()
	if err != nil {
		return fmt.Errorf("bus: stop service: %w", err)
	}
	return nil
}
