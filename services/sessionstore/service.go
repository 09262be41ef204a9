// Package sessionstore is the session-store service: the system of record
// for sessions (JSONL files under the data dir), their history and tool
// events, answered over NATS. No other service reads the files.
package sessionstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/groups"
	"github.com/waggle-os/core/services/sessionstore/jsonl"
	"github.com/waggle-os/core/services/sessionstore/ledger"
	"github.com/waggle-os/core/services/sessionstore/memory"
	"github.com/waggle-os/core/services/sessionstore/sessions"
	"github.com/waggle-os/core/services/sessionstore/workspaces"
)

// Config configures the session store.
type Config struct {
	// DataDir is the root of all stored data (sessions under
	// <DataDir>/workspaces/<ws>/sessions). Required.
	DataDir string
	// Concurrency bounds requests served at once. Default 64.
	Concurrency int
	// Location renders dates in session exports. Default: time.Local.
	Location *time.Location
}

// Validate checks c and fills defaults.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("sessionstore: DataDir is required")
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 64
	}
	return nil
}

// Service is the session-store service.
type Service struct {
	cfg   Config
	dial  bus.Dialer
	log   *slog.Logger
	files *jsonl.Store
	wss   *workspaces.Store
	mem   *memory.Store
	sess  *sessions.Store

	nc  *nats.Conn
	svc *bus.Service
}

// New returns an unstarted service.
func New(cfg Config, dial bus.Dialer, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{cfg: cfg, dial: dial, log: log.With("service", "session-store")}
}

// Start checks the data dir is writable, connects and serves.
func (s *Service) Start(ctx context.Context) error {
	if err := s.cfg.Validate(); err != nil {
		return err
	}
	if err := checkWritable(filepath.Join(s.cfg.DataDir, "workspaces")); err != nil {
		return err
	}
	s.files = jsonl.New(s.cfg.DataDir)
	s.wss = workspaces.New(s.cfg.DataDir)
	s.mem = memory.New(s.cfg.DataDir)
	s.sess = sessions.New(s.files, s.wss, sessions.Config{Location: s.cfg.Location, Logger: s.log})
	if err := s.wss.EnsureDefault(); err != nil {
		return fmt.Errorf("sessionstore: default workspace: %w", err)
	}
	nc, err := s.dial(protocol.ServiceSessionStore)
	if err != nil {
		return err
	}
	svc, err := bus.NewService(nc, bus.ServiceConfig{Name: protocol.ServiceSessionStore, Concurrency: s.cfg.Concurrency, Logger: s.log})
	if err != nil {
		nc.Close()
		return err
	}
	s.nc, s.svc = nc, svc
	if err := s.register(); err != nil {
		s.Stop(ctx)
		return err
	}
	return nil
}

func (s *Service) register() error {
	return errors.Join(
		bus.AddEndpoint(s.svc, "history", protocol.SubjStoreHistory, s.history),
		bus.AddEndpoint(s.svc, "append", protocol.SubjStoreAppend, s.append),
		bus.AddEndpoint(s.svc, "clear", protocol.SubjStoreClear, s.clear),
		bus.AddEndpoint(s.svc, "memory-save", protocol.SubjStoreMemorySave, s.memorySave),
		bus.AddEndpoint(s.svc, "memory-search", protocol.SubjStoreMemorySearch, s.memorySearch),
		bus.AddEndpoint(s.svc, "workspace-get", protocol.SubjStoreWorkspaceGet, s.workspaceGet),
		bus.AddEndpoint(s.svc, "workspace-list", protocol.SubjWorkspaceList, s.workspaceList),
		bus.AddEndpoint(s.svc, "workspace-doc", protocol.SubjWorkspaceDoc, s.workspaceDoc),
		bus.AddEndpoint(s.svc, "workspace-create", protocol.SubjWorkspaceCreate, s.workspaceCreate),
		bus.AddEndpoint(s.svc, "workspace-update", protocol.SubjWorkspaceUpdate, s.workspaceUpdate),
		bus.AddEndpoint(s.svc, "workspace-delete", protocol.SubjWorkspaceDelete, s.workspaceDelete),
		bus.AddEndpoint(s.svc, "session-list", protocol.SubjSessionList, s.sessionList),
		bus.AddEndpoint(s.svc, "session-search", protocol.SubjSessionSearch, s.sessionSearch),
		bus.AddEndpoint(s.svc, "session-export", protocol.SubjSessionExport, s.sessionExport),
		bus.AddEndpoint(s.svc, "session-timeline", protocol.SubjSessionTimeline, s.sessionTimeline),
		bus.AddEndpoint(s.svc, "session-create", protocol.SubjSessionCreate, s.sessionCreate),
		bus.AddEndpoint(s.svc, "session-rename", protocol.SubjSessionRename, s.sessionRename),
		bus.AddEndpoint(s.svc, "session-delete", protocol.SubjSessionDelete, s.sessionDelete),
		bus.AddEndpoint(s.svc, "session-summary", protocol.SubjSessionSummary, s.sessionSummary),
		ledger.Register(s.svc, ledger.Config{DataDir: s.cfg.DataDir}, s.log),
		groups.Register(s.svc, groups.Config{DataDir: s.cfg.DataDir}, s.log),
	)
}

// Stop stops serving, finishes running requests (their writes are
// fsynced before they answer) and closes the connection.
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

func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("sessionstore: data dir not writable: %w", err)
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("sessionstore: data dir not writable: %w", err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

func validRef(ref protocol.SessionRef) error {
	if !protocol.ValidID(ref.Workspace) || !protocol.ValidID(ref.Session) {
		return protocol.Errorf(400, "invalid workspace or session id")
	}
	return nil
}

func publishJSON(nc *nats.Conn, subject string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return nc.Publish(subject, b)
}
