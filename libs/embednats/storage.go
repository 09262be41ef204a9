package embednats

import (
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// storageMonitor notices a JetStream store that ran out of space and
// brings JetStream back once there is room again, without a restart.
//
// nats-server 2.15 handles ENOSPC per stream: the stream's file store
// latches the write error and drops every later publish without a reply
// (clients time out), even after space is freed; in clustered mode the
// server shuts JetStream down instead. Either way it only says so in its
// log. The monitor reads that log and watches JetStreamEnabled; once the
// store has MinFree it shuts JetStream down and enables it again, which
// reloads every file-backed stream from disk with the latch cleared.
// Memory streams do not survive that: their owners re-create them when
// told the store recovered (Config.OnStorage).
type storageMonitor struct {
	srv  *Server
	wake chan struct{}
	quit chan struct{}
	done chan struct{}

	mu     sync.Mutex
	full   bool
	reason string
}

// noteLog looks at one warning or error the server logged. It runs on
// server goroutines (with server locks held), so it only records.
func (m *storageMonitor) noteLog(msg string) {
	if !strings.Contains(msg, "no space left on device") && !strings.Contains(msg, "JetStream out of") {
		return
	}
	m.mu.Lock()
	if !m.full {
		m.full, m.reason = true, msg
	}
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *storageMonitor) start(s *Server) {
	m.srv = s
	m.quit, m.done = make(chan struct{}), make(chan struct{})
	go m.loop()
}

func (m *storageMonitor) stop() {
	if m.quit == nil {
		return
	}
	close(m.quit)
	<-m.done
	m.quit = nil
}

func (m *storageMonitor) loop() {
	defer close(m.done)
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	reported := false
	for {
		select {
		case <-m.quit:
			return
		case <-m.wake:
		case <-t.C:
		}
		ns := m.srv.ns
		m.mu.Lock()
		if !m.full && !ns.JetStreamEnabled() {
			m.full, m.reason = true, "JetStream was disabled by the server"
		}
		full, reason := m.full, m.reason
		m.mu.Unlock()
		if full && !reported {
			reported = true
			m.srv.logError("JetStream store is full: writes fail until space is freed", reason)
			m.notify(true, reason)
		}
		if !full {
			continue
		}
		if free, known := freeBytes(m.srv.opts.StoreDir); known && free < m.srv.cfg.MinFree {
			continue
		}
		if err := m.restart(); err != nil {
			m.srv.logError("JetStream restart after a full store failed; retrying", err.Error())
			continue
		}
		m.mu.Lock()
		m.full, m.reason = false, ""
		m.mu.Unlock()
		reported = false
		m.srv.logInfo("JetStream store has space again: JetStream restarted")
		m.notify(false, "")
	}
}

// restart shuts JetStream down (keeping its state on disk) and enables it
// again with the server's own settings, as a config reload would.
func (m *storageMonitor) restart() error {
	ns, o := m.srv.ns, m.srv.opts
	if ns.JetStreamEnabled() {
		if err := ns.ShutdownJetStream(); err != nil {
			return err
		}
	}
	cfg := &server.JetStreamConfig{
		StoreDir:     o.StoreDir,
		SyncInterval: o.SyncInterval,
		SyncAlways:   o.SyncAlways,
		MaxMemory:    o.JetStreamMaxMemory,
		MaxStore:     o.JetStreamMaxStore,
		Domain:       o.JetStreamDomain,
		Strict:       !o.NoJetStreamStrict,
	}
	if err := ns.EnableJetStream(cfg); err != nil {
		// A half-started JetStream would answer "not enabled" forever.
		_ = ns.ShutdownJetStream()
		return err
	}
	return nil
}

func (m *storageMonitor) notify(full bool, reason string) {
	if f := m.srv.cfg.OnStorage; f != nil {
		f(full, reason)
	}
}

// StorageFull reports whether the JetStream store is out of space, and why.
func (s *Server) StorageFull() (bool, string) {
	s.storage.mu.Lock()
	defer s.storage.mu.Unlock()
	return s.storage.full, s.storage.reason
}

func (s *Server) logError(msg, reason string) {
	if s.cfg.Logger != nil {
		s.cfg.Logger.Error(msg, "reason", reason)
	}
}

func (s *Server) logInfo(msg string) {
	if s.cfg.Logger != nil {
		s.cfg.Logger.Info(msg)
	}
}
