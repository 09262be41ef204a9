// Package command is the command service of Waggle core: it runs slash
// commands (the slash registry) for the chat turn runner and the HTTP
// command route, lists them for autocomplete, and runs agent groups — each
// member's work is a real chat turn on a turn runner, and the run's
// progress lives in a JetStream KV bucket so any gateway can report it.
package command

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/command/slash"
)

// Service is the command service.
type Service struct {
	cfg  Config
	dial bus.Dialer
	log  *slog.Logger
	reg  *slash.Registry

	nc   *nats.Conn
	js   jetstream.JetStream
	jobs jetstream.KeyValue
	svc  *bus.Service
	// cancels receives GroupJobCancels: a cancel of a run of this
	// instance stops it.
	cancels *nats.Subscription

	// runs owns the goroutines of group runs: Stop cancels them and waits.
	runCtx    context.Context
	cancelRun context.CancelFunc
	runs      sync.WaitGroup
	// active are the runs of this instance by job id, for cancels.
	activeMu sync.Mutex
	active   map[string]*run
}

// New returns an unstarted service.
func New(cfg Config, dial bus.Dialer, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{cfg: cfg, dial: dial, log: log.With("service", "command"), reg: slash.New()}
}

// Start connects, ensures the job bucket and serves.
func (s *Service) Start(ctx context.Context) error {
	if err := s.cfg.prepare(); err != nil {
		return err
	}
	nc, err := s.dial(protocol.ServiceCommand)
	if err != nil {
		return err
	}
	s.nc = nc
	s.runCtx, s.cancelRun = context.WithCancel(context.Background())
	if err := s.start(ctx); err != nil {
		s.Stop(ctx)
		return err
	}
	return nil
}

func (s *Service) start(ctx context.Context) error {
	js, err := jetstream.New(s.nc)
	if err != nil {
		return fmt.Errorf("command: jetstream: %w", err)
	}
	s.js = js
	kv, err := bus.EnsureKeyValue(ctx, js, jetstream.KeyValueConfig{
		Bucket:      protocol.BucketGroupJobs,
		Description: "Agent-group run jobs, keyed by job id",
		History:     1,
		TTL:         s.cfg.JobTTL,
		Storage:     jetstream.FileStorage,
		Replicas:    max(s.cfg.Replicas, 1),
	})
	if err != nil {
		return fmt.Errorf("command: ensure bucket %s: %w", protocol.BucketGroupJobs, err)
	}
	s.jobs = kv
	// Subscribed before serving: a run started here can be cancelled as
	// soon as its job exists.
	cancels, err := bus.Subscribe(s.nc, protocol.GroupJobCancels, s.onJobCancel)
	if err != nil {
		return fmt.Errorf("command: subscribe job cancels: %w", err)
	}
	s.cancels = cancels
	svc, err := bus.NewService(s.nc, bus.ServiceConfig{Name: protocol.ServiceCommand, Logger: s.log})
	if err != nil {
		return err
	}
	s.svc = svc
	return errors.Join(
		bus.Handle(svc, protocol.ExecuteCommand, s.execute),
		bus.Handle(svc, protocol.ListCommands, s.list),
		bus.Handle(svc, protocol.RunGroup, s.groupRun),
		bus.Handle(svc, protocol.GetGroupJob, s.groupJob),
		bus.Handle(svc, protocol.CancelGroupJob, s.cancelJob),
		bus.Handle(svc, protocol.ListActiveAgents, s.agentsActive),
	)
}

// Stop stops serving, cancels running group runs (their jobs are marked
// failed and their member turns cancelled) and closes the connection.
func (s *Service) Stop(ctx context.Context) error {
	var errs []error
	if s.svc != nil {
		errs = append(errs, s.svc.Stop(ctx))
	}
	if s.cancels != nil {
		// Stop cancels every run below; a late cancel has nothing to do.
		_ = s.cancels.Unsubscribe()
	}
	if s.cancelRun != nil {
		s.cancelRun()
		done := make(chan struct{})
		go func() { s.runs.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("command: group runs still stopping: %w", ctx.Err()))
		}
	}
	if s.nc != nil {
		errs = append(errs, bus.Drain(ctx, s.nc))
	}
	return errors.Join(errs...)
}
