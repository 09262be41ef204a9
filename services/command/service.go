// Package command is the command service of Waggle core.
package command

import (
	"context"
	"errors"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

// Config configures the command service.
type Config struct {
	// DataDir is the data directory. Required.
	DataDir string
}

// Validate checks c.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("command: DataDir is required")
	}
	return nil
}

// Service is the command service.
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
	return &Service{cfg: cfg, dial: dial, log: log.With("service", "command")}
}

// Start connects and serves.
func (s *Service) Start(ctx context.Context) error {
	if err := s.cfg.Validate(); err != nil {
		return err
	}
	nc, err := s.dial(protocol.ServiceCommand)
	if err != nil {
		return err
	}
	svc, err := bus.NewService(nc, bus.ServiceConfig{Name: protocol.ServiceCommand, Logger: s.log})
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
