package bus

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/protocol"
)

// Storage reports: how often a full store says so again, and how long a
// report stays believed without being repeated.
const (
	StorageReportInterval = time.Second
	StorageReportTTL      = 3 * time.Second
)

// IsNoSpace reports whether err is a write that failed for lack of space
// (ENOSPC, or the same error after it crossed a library that kept only its
// text, as nats-server does).
func IsNoSpace(err error) bool {
	if err == nil {
		return false
	}
	return errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), "no space left on device")
}

// StorageGuardConfig configures a StorageGuard.
type StorageGuardConfig struct {
	// Source names the store in reports (protocol.StorageStatus.Source).
	Source string
	// Dir is the directory the store writes. With Dir set the guard also
	// watches its free space: it reports full when less than LowFree is
	// left (before a write fails) and recovers by itself once MinFree is
	// free and a test write succeeds. Empty: the owner calls SetFull and
	// Clear itself.
	Dir string
	// LowFree is the free space below which Dir counts as full. Default
	// 256 KiB.
	LowFree int64
	// MinFree is the free space Dir needs before the guard recovers.
	// Default 1 MiB.
	MinFree int64
	// Interval is how often Dir is checked. Default 500ms.
	Interval time.Duration
	// Logger logs transitions. Default slog.Default().
	Logger *slog.Logger
}

// StorageGuard tracks whether one store is full and says so on
// protocol.StorageReports.Subject, so every gateway and runner refuses new work
// at once instead of timing out on a write that cannot land. Its owner
// starts and stops it; a nil guard ignores every call.
type StorageGuard struct {
	nc  *nats.Conn
	cfg StorageGuardConfig

	mu     sync.Mutex
	status protocol.StorageStatus

	stop chan struct{}
	done chan struct{}
}

// NewStorageGuard returns an unstarted guard publishing on nc.
func NewStorageGuard(nc *nats.Conn, cfg StorageGuardConfig) *StorageGuard {
	if cfg.LowFree <= 0 {
		cfg.LowFree = 256 << 10
	}
	if cfg.MinFree <= 0 {
		cfg.MinFree = 1 << 20
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 500 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &StorageGuard{nc: nc, cfg: cfg, status: protocol.StorageStatus{Source: cfg.Source}}
}

// Start runs the guard's loop (free-space checks, repeated reports).
func (g *StorageGuard) Start() {
	if g == nil || g.stop != nil {
		return
	}
	g.stop, g.done = make(chan struct{}), make(chan struct{})
	go g.loop()
}

// Stop ends the loop and waits for it (idempotent).
func (g *StorageGuard) Stop() {
	if g == nil || g.stop == nil {
		return
	}
	select {
	case <-g.stop:
	default:
		close(g.stop)
	}
	<-g.done
}

// Check looks at a failed write: out of space marks the store full (and
// says so at once). It reports whether it did.
func (g *StorageGuard) Check(err error) bool {
	if !IsNoSpace(err) {
		return false
	}
	g.SetFull(err.Error())
	return true
}

// SetFull marks the store full for reason (for the operator's eyes).
func (g *StorageGuard) SetFull(reason string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	was := g.status.Full
	g.status.Full, g.status.Reason = true, reason
	if !was {
		g.status.Since = time.Now().UnixMilli()
	}
	st := g.status
	g.mu.Unlock()
	if !was {
		g.cfg.Logger.Error("storage is full: refusing new work until space is freed", "store", g.cfg.Source, "reason", reason)
	}
	g.publish(st)
}

// Clear marks the store writable again.
func (g *StorageGuard) Clear() {
	if g == nil {
		return
	}
	g.mu.Lock()
	was := g.status.Full
	g.status = protocol.StorageStatus{Source: g.cfg.Source}
	st := g.status
	g.mu.Unlock()
	if was {
		g.cfg.Logger.Info("storage has space again: accepting work", "store", g.cfg.Source)
		g.publish(st)
	}
}

// Status is the guard's current view.
func (g *StorageGuard) Status() protocol.StorageStatus {
	if g == nil {
		return protocol.StorageStatus{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.status
}

func (g *StorageGuard) publish(st protocol.StorageStatus) {
	if g.nc == nil {
		return
	}
	if err := Publish(g.nc, protocol.StorageReports, st); err != nil {
		g.cfg.Logger.Warn("publish storage status", "store", g.cfg.Source, "err", err)
	}
}

func (g *StorageGuard) loop() {
	defer close(g.done)
	t := time.NewTicker(g.cfg.Interval)
	defer t.Stop()
	var lastReport time.Time
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
		}
		st := g.Status()
		if g.cfg.Dir != "" {
			free, known := FreeBytes(g.cfg.Dir)
			switch {
			case !st.Full && known && free < g.cfg.LowFree:
				g.SetFull(fmt.Sprintf("%s has %d bytes free", g.cfg.Dir, free))
				lastReport = time.Now()
				continue
			case st.Full && (!known || free >= g.cfg.MinFree) && writeProbe(g.cfg.Dir) == nil:
				g.Clear()
				continue
			}
		}
		if st.Full && time.Since(lastReport) >= StorageReportInterval {
			g.publish(st)
			lastReport = time.Now()
		}
	}
}

// writeProbe writes, fsyncs and removes a small file in dir: the proof
// that a write lands again.
func writeProbe(dir string) error {
	f, err := os.CreateTemp(dir, ".waggle-space-check-*")
	if err != nil {
		return err
	}
	name := f.Name()
	defer os.Remove(name)
	_, err = f.Write(make([]byte, 64<<10))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// StorageWatch follows every store's reports: gateways and runners ask it
// before they accept work.
type StorageWatch struct {
	sub       *nats.Subscription
	onRecover func(source string)

	mu      sync.Mutex
	reports map[string]storageReport
}

type storageReport struct {
	status protocol.StorageStatus
	at     time.Time
}

// WatchStorage subscribes to storage reports on nc. onRecover (optional)
// runs on the subscription's goroutine when a store reported full reports
// writable again (e.g. to re-create JetStream assets lost with it). The
// subscription belongs to nc: draining nc ends it.
func WatchStorage(nc *nats.Conn, onRecover func(source string)) (*StorageWatch, error) {
	w := &StorageWatch{onRecover: onRecover, reports: map[string]storageReport{}}
	sub, err := Subscribe(nc, protocol.StorageReports, w.onReport)
	if err != nil {
		return nil, err
	}
	w.sub = sub
	return w, nil
}

func (w *StorageWatch) onReport(st protocol.StorageStatus) {
	if st.Source == "" {
		return
	}
	w.mu.Lock()
	// A stale full report is kept (only ignored by Full), so the recovery
	// that follows it, however late, still runs onRecover.
	_, wasFull := w.reports[st.Source]
	if st.Full {
		w.reports[st.Source] = storageReport{status: st, at: time.Now()}
	} else {
		delete(w.reports, st.Source)
	}
	w.mu.Unlock()
	if !st.Full && wasFull && w.onRecover != nil {
		w.onRecover(st.Source)
	}
}

// Full returns a fresh report of a full store, if any.
func (w *StorageWatch) Full() (protocol.StorageStatus, bool) {
	if w == nil {
		return protocol.StorageStatus{}, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.reports {
		if time.Since(r.at) <= StorageReportTTL {
			return r.status, true
		}
	}
	return protocol.StorageStatus{}, false
}

// Err is protocol.ErrStorageFull while a store is full, else nil.
func (w *StorageWatch) Err() error {
	if _, full := w.Full(); full {
		return protocol.ErrStorageFull
	}
	return nil
}
