// Package approval is the approval service of Waggle core: it decides
// whether a tool call may run (gate rules, autonomy, saved grants), keeps
// the approvals that wait for a human in a JetStream KV bucket so any
// gateway can list and resolve them and a restart loses none, times out
// stale ones even when the runner that waited is gone, and owns the grant
// file (it is the only reader and writer, so a revoked grant is gone for
// every runner's next call).
package approval

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/pgerr"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/approval/grants"
)

// Service is the approval service.
type Service struct {
	cfg  Config
	dial bus.Dialer
	log  *slog.Logger

	nc      *nats.Conn
	svc     *bus.Service
	single  *bus.Singleton // the grant file's single-writer lease
	grants  *grants.Store
	pool    *pgxpool.Pool // nil without PostgresURL
	pending *pendingStore
	storage *bus.StorageGuard // the grant file's disk

	stopSweep context.CancelFunc
	sweepWG   sync.WaitGroup
}

// New returns an unstarted service.
func New(cfg Config, dial bus.Dialer, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{cfg: cfg, dial: dial, log: log.With("service", "approval")}
}

// Start opens the grant file, makes sure the approvals bucket exists,
// starts the sweeper and serves.
func (s *Service) Start(ctx context.Context) error {
	if err := s.cfg.prepare(); err != nil {
		return err
	}
	nc, err := s.dial(protocol.ServiceApproval)
	if err != nil {
		return err
	}
	s.nc = nc
	js, err := jetstream.New(nc)
	if err != nil {
		s.Stop(ctx)
		return fmt.Errorf("approval: jetstream: %w", err)
	}
	// The grant file has one writer: a second approval service on this bus
	// waits until the first stops, then reads the file it left.
	if s.single, err = bus.AcquireSingleton(ctx, js, "approval-grants", bus.Holder("approval"), s.cfg.Bucket.Replicas, s.log); err != nil {
		s.Stop(ctx)
		return fmt.Errorf("approval: %w", err)
	}
	if s.cfg.PostgresURL != "" {
		if s.pool, err = openPool(ctx, s.cfg.PostgresURL); err != nil {
			s.Stop(ctx)
			return err
		}
	}
	gs, err := grants.Open(grants.Config{DataDir: s.cfg.DataDir, Now: s.cfg.Now, Logger: s.log, Pool: s.pool})
	if err != nil {
		s.Stop(ctx)
		return fmt.Errorf("approval: %w", err)
	}
	s.grants = gs
	kv, err := ensureBucket(ctx, js, s.cfg.Bucket)
	if err != nil {
		s.Stop(ctx)
		return err
	}
	s.pending = &pendingStore{kv: kv, decided: s.announce}

	sweepCtx, cancel := context.WithCancel(context.Background())
	s.stopSweep = cancel
	s.sweepWG.Add(1)
	go func() {
		defer s.sweepWG.Done()
		s.sweepLoop(sweepCtx)
	}()

	if s.pool == nil {
		s.storage = bus.NewStorageGuard(nc, bus.StorageGuardConfig{Source: "approval", Dir: s.cfg.DataDir, Logger: s.log})
		s.storage.Start()
	}
	svc, err := bus.NewService(nc, bus.ServiceConfig{Name: protocol.ServiceApproval, Logger: s.log, Storage: s.storage,
		// Grants in PostgreSQL: an outage answers 503 STORE_UNAVAILABLE.
		MapError: pgerr.Classify})
	if err != nil {
		s.Stop(ctx)
		return err
	}
	s.svc = svc
	for _, add := range []func() error{
		func() error { return bus.Handle(svc, protocol.CheckApproval, s.check) },
		func() error { return bus.Handle(svc, protocol.DecideApproval, s.decide) },
		func() error { return bus.Handle(svc, protocol.ResolveApproval, s.resolve) },
		func() error { return bus.Handle(svc, protocol.GetApprovalState, s.state) },
		func() error {
			return bus.Handle(svc, protocol.CancelTurnApprovals, s.cancelTurn)
		},
		func() error { return bus.Handle(svc, protocol.ListPendingApprovals, s.listPending) },
		func() error { return bus.Handle(svc, protocol.ListGrants, s.listGrants) },
		func() error { return bus.Handle(svc, protocol.RevokeGrant, s.revokeGrant) },
		func() error { return bus.Handle(svc, protocol.ClearGrants, s.clearGrants) },
	} {
		if err := add(); err != nil {
			s.Stop(ctx)
			return err
		}
	}
	// Started means reachable: the server has our subscriptions before
	// Start returns.
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		s.Stop(ctx)
		return fmt.Errorf("approval: flush: %w", err)
	}
	return nil
}

// Stop stops serving and sweeping and closes the connection. Pending
// approvals stay in the bucket for the next instance.
func (s *Service) Stop(ctx context.Context) error {
	var errs []error
	if s.svc != nil {
		errs = append(errs, s.svc.Stop(ctx))
	}
	if s.stopSweep != nil {
		s.stopSweep()
		s.sweepWG.Wait()
	}
	s.storage.Stop()
	s.single.Release(ctx)
	if s.nc != nil {
		errs = append(errs, bus.Drain(ctx, s.nc))
	}
	if s.pool != nil {
		s.pool.Close()
		s.pool = nil
	}
	return errors.Join(errs...)
}

// openPool connects to the grants' PostgreSQL database.
func openPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("approval: postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("approval: postgres: %w", err)
	}
	return pool, nil
}

// ensureBucket creates or updates protocol.BucketApprovals.
func ensureBucket(ctx context.Context, js jetstream.JetStream, cfg BucketConfig) (jetstream.KeyValue, error) {
	storage := jetstream.FileStorage
	if cfg.Memory {
		storage = jetstream.MemoryStorage
	}
	kv, err := bus.EnsureKeyValue(ctx, js, jetstream.KeyValueConfig{
		Bucket:      protocol.BucketApprovals,
		Description: "Tool approvals waiting for a human, keyed by request id",
		// One revision is all a compare-and-set needs.
		History:  1,
		Storage:  storage,
		Replicas: cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("approval: ensure bucket %s: %w", protocol.BucketApprovals, err)
	}
	return kv, nil
}
