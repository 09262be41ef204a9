package gateway

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/respond"
)

// storageState follows the stores' full/recovered reports
// (protocol.StorageReports.Subject): while one is full the gateway refuses
// chats at once (507 STORAGE_FULL) instead of letting each wait out a
// write timeout, and /health says which store and why.
type storageState struct {
	watch *bus.StorageWatch
	// mu serialises re-creating what a JetStream restart dropped.
	mu sync.Mutex
}

// watchStorage subscribes to storage reports (on s.nc, so draining it
// ends the subscription).
func (s *Service) watchStorage() error {
	w, err := bus.WatchStorage(s.nc, s.storageRecovered)
	if err != nil {
		return err
	}
	s.storage.watch = w
	return nil
}

// refuseIfStorageFull answers 507 STORAGE_FULL (before any stream byte)
// while a store is full, and reports whether it did.
func (s *Service) refuseIfStorageFull(w http.ResponseWriter) bool {
	if err := s.storage.watch.Err(); err != nil {
		respond.Error(w, s.log, err)
		return true
	}
	return false
}

// storageFailure turns a failed start into 507 STORAGE_FULL when a store
// reports full by the time it failed: a chat that raced the first failing
// write (and waited out its timeout, a 503 BUS_TIMEOUT otherwise, or met
// a write JetStream no longer answered: BUS_UNAVAILABLE) then
// says why, not "internal error".
func (s *Service) storageFailure(err error) error {
	if err == nil || protocol.KindOf(err) != protocol.Internal && !errors.Is(err, protocol.ErrBusTimeout) &&
		!hasCode(err, protocol.ErrBusUnavailable.Code) {
		return err
	}
	if _, full := s.storage.watch.Full(); full {
		return protocol.ErrStorageFull
	}
	return err
}

// storageRecovered runs when a full store is writable again. The embedded
// server recovers by restarting JetStream, which drops memory streams
// (the turn stream by default) and every consumer: the turn stream is
// created again and the live consumer restarted on it, since an ordered
// consumer would resume after the old stream's last sequence and miss the
// new stream's first events.
func (s *Service) storageRecovered(source string) {
	if source != "nats" {
		return
	}
	s.storage.mu.Lock()
	defer s.storage.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := bus.EnsureTurnStream(ctx, s.js, s.cfg.Stream); err != nil {
		s.log.Error("re-create the turn stream after the store recovered", "err", err)
		return
	}
	s.hub.stop()
	if err := s.hub.start(ctx, s.js); err != nil {
		s.log.Error("restart the live event consumer after the store recovered", "err", err)
		return
	}
	s.log.Info("turn stream and live consumer restored after the store recovered")
}

// hasCode reports whether err is a protocol error with code (one decoded
// from a service's reply is a new value, so errors.Is cannot tell).
func hasCode(err error, code string) bool {
	e := protocol.AsError(err)
	return e != nil && e.Code == code
}
