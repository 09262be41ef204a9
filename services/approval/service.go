// Package approval is the approval service of Waggle core.
package approval

import (
	"context"
	"errors"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

// Config configures the approval service.
type Config struct {
	// DataDir is the data directory. Required.
	DataDir string
}

// Validate checks c.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("approval: DataDir is required")
	}
	return nil
}

// Service is the approval service.
type Service struct {
	cfg  Config
	dial bus.Dialer
	log  *slog.Logger

	nc  *nats.Conn
	svc *bus.Service
}

// New returns an unstarted service.
func New(cfg Config, dial bus.Dialer, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{cfg: cfg, dial: dial, log: log.With("service", "approval")}
}

// Start connects and serves.
func (s *Service) Start(ctx context.Context) error {
	if err := s.cfg.Validate(); err != nil {
		return err
	}
	nc, err := s.dial(protocol.ServiceApproval)
	if err != nil {
		return err
	}
	svc, err := bus.NewService(nc, bus.ServiceConfig{Name: protocol.ServiceApproval, Logger: s.log})
	if err != nil {
		nc.Close()
		return err
	}
	s.nc, s.svc = nc, svc
	return nil
}

// Stop stops serving and closes the connection.
func (s *Service) Stop(ctx context.Context) error {
	var errs []error
	if s.svc != nil {
		errs = append(errs, s.svc.Stop(ctx))
	}
	if s.nc != nil {
		errs = append(errs, s.nc.Drain())
	}
	return errors.Join(errs...)
}
