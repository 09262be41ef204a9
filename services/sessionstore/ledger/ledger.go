// Package ledger is the session store's usage ledger and agent settings:
// per-turn token usage summed over every runner and kept across restarts,
// and the current agent model.
//
// The ledger is an append-only JSONL file (<data-dir>/usage.jsonl): one
// line per recorded turn, and a reset marker line per cost reset, so
// history is never rewritten while totals restart. Sums are kept in memory
// and rebuilt from the file at start.
package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/jsonl"
)

// File names under the data directory.
const (
	// UsageFile is the append-only usage ledger.
	UsageFile = "usage.jsonl"
	// StateFile holds the agent settings (the current model).
	StateFile = "agent-state.json"
)

// maxModelLength bounds a model name; anything longer is not a model id.
const maxModelLength = 256

// Config configures the ledger.
type Config struct {
	// DataDir is the data directory. Required.
	DataDir string
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Validate checks c and fills defaults.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("ledger: DataDir is required")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Register opens the ledger under cfg.DataDir and adds its endpoints to svc.
func Register(svc *bus.Service, cfg Config, log *slog.Logger) error {
	l, err := Open(cfg, log)
	if err != nil {
		return err
	}
	return errors.Join(
		bus.AddEndpoint(svc, "usage-record", protocol.SubjStoreUsageRecord,
			func(_ context.Context, r protocol.UsageRecord) (protocol.Empty, error) {
				return protocol.Empty{}, l.Record(r)
			}),
		bus.AddEndpoint(svc, "usage-summary", protocol.SubjStoreUsageSummary,
			func(_ context.Context, r protocol.UsageSummaryRequest) (protocol.UsageSummary, error) {
				return l.Summary(r.Since)
			}),
		bus.AddEndpoint(svc, "usage-reset", protocol.SubjStoreUsageReset,
			func(context.Context, protocol.Empty) (protocol.UsageReset, error) { return l.Reset() }),
		bus.AddEndpoint(svc, "model-get", protocol.SubjStoreModelGet,
			func(context.Context, protocol.Empty) (protocol.AgentModel, error) {
				return protocol.AgentModel{Model: l.Model()}, nil
			}),
		bus.AddEndpoint(svc, "model-set", protocol.SubjStoreModelSet,
			func(_ context.Context, m protocol.AgentModel) (protocol.AgentModel, error) {
				return l.SetModel(m.Model)
			}),
	)
}

// line is one ledger line: a usage record or a reset marker.
type line struct {
	Type string `json:"type"` // "usage" or "reset"
	protocol.UsageRecord
}

// entry is a usage record as kept in memory for Since queries.
type entry struct {
	at     time.Time
	model  string
	input  int
	output int
	cost   float64
}

// Ledger is the usage ledger and agent settings of one data directory. It is
// safe for concurrent use.
type Ledger struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	entries []entry
	// sinceReset is the index of the first entry after the last reset.
	sinceReset int
	model      string
}

// Open loads the ledger and settings from cfg.DataDir, repairing a torn
// last ledger line left by a crash.
func Open(cfg Config, log *slog.Logger) (*Ledger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	l := &Ledger{cfg: cfg, log: log, model: protocol.DefaultAgentModel}
	if err := l.load(); err != nil {
		return nil, err
	}
	if err := l.loadState(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Ledger) usagePath() string { return filepath.Join(l.cfg.DataDir, UsageFile) }
func (l *Ledger) statePath() string { return filepath.Join(l.cfg.DataDir, StateFile) }

func (l *Ledger) load() error {
	data, err := os.ReadFile(l.usagePath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ledger: read %s: %w", UsageFile, err)
	}
	good := 0 // length of the prefix made of complete lines
	for off := 0; off < len(data); {
		nl := bytes.IndexByte(data[off:], '\n')
		if nl < 0 {
			break // torn tail: the crash happened mid-write
		}
		raw := data[off : off+nl]
		off += nl + 1
		good = off
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		var ln line
		if err := json.Unmarshal(raw, &ln); err != nil {
			l.log.Warn("ledger: skipping unreadable line", "offset", off-nl-1, "err", err)
			continue
		}
		l.apply(ln)
	}
	if good < len(data) {
		// Cut the torn tail now so the next append starts on a fresh line.
		if err := os.Truncate(l.usagePath(), int64(good)); err != nil {
			return fmt.Errorf("ledger: repair %s: %w", UsageFile, err)
		}
		l.log.Warn("ledger: removed a torn last line", "bytes", len(data)-good)
	}
	return nil
}

func (l *Ledger) apply(ln line) {
	switch ln.Type {
	case "reset":
		l.sinceReset = len(l.entries)
	case "usage":
		at, _ := time.Parse(time.RFC3339Nano, ln.Timestamp)
		l.entries = append(l.entries, entry{at: at, model: ln.Model, input: ln.InputTokens, output: ln.OutputTokens, cost: ln.Cost})
	}
}

// append writes one line and fsyncs it before the caller's change is
// applied in memory, so totals never count what a crash could lose.
func (l *Ledger) append(ln line) error {
	b, err := json.Marshal(ln)
	if err != nil {
		return fmt.Errorf("ledger: encode: %w", err)
	}
	f, err := os.OpenFile(l.usagePath(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("ledger: open %s: %w", UsageFile, err)
	}
	_, werr := f.Write(append(b, '\n'))
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("ledger: append to %s: %w", UsageFile, err)
	}
	return nil
}

// Record adds one turn's usage. Negative or non-finite numbers are a 400;
// an empty model is recorded as "unknown" and an empty timestamp as now.
func (l *Ledger) Record(r protocol.UsageRecord) error {
	if r.InputTokens < 0 || r.OutputTokens < 0 || r.Cost < 0 || math.IsNaN(r.Cost) || math.IsInf(r.Cost, 0) {
		return protocol.Errorf(400, "usage must not be negative")
	}
	if r.Model == "" {
		r.Model = "unknown"
	}
	if _, err := time.Parse(time.RFC3339Nano, r.Timestamp); err != nil {
		r.Timestamp = l.now()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ln := line{Type: "usage", UsageRecord: r}
	if err := l.append(ln); err != nil {
		return err
	}
	l.apply(ln)
	return nil
}

// Reset restarts the totals: a reset marker is appended, so the records
// stay on disk and the reset survives restarts.
func (l *Ledger) Reset() (protocol.UsageReset, error) {
	at := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	ln := line{Type: "reset", UsageRecord: protocol.UsageRecord{Timestamp: at}}
	if err := l.append(ln); err != nil {
		return protocol.UsageReset{}, err
	}
	l.apply(ln)
	return protocol.UsageReset{ResetAt: at}, nil
}

// Summary totals the records since the last reset, or, when since is set
// (RFC 3339), every record at or after that time whatever the resets.
func (l *Ledger) Summary(since string) (protocol.UsageSummary, error) {
	var from time.Time
	if since != "" {
		t, err := time.Parse(time.RFC3339Nano, since)
		if err != nil {
			return protocol.UsageSummary{}, protocol.Errorf(400, "since must be an RFC 3339 time")
		}
		from = t
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	entries := l.entries[l.sinceReset:]
	if since != "" {
		entries = l.entries
	}
	sum := protocol.UsageSummary{ByModel: map[string]protocol.ModelUsage{}}
	for _, e := range entries {
		if since != "" && e.at.Before(from) {
			continue
		}
		sum.TotalInputTokens += e.input
		sum.TotalOutputTokens += e.output
		sum.EstimatedCost += e.cost
		sum.Turns++
		m := sum.ByModel[e.model]
		m.Input += e.input
		m.Output += e.output
		m.Cost += e.cost
		sum.ByModel[e.model] = m
	}
	return sum, nil
}

type state struct {
	Model string `json:"model"`
}

func (l *Ledger) loadState() error {
	data, err := os.ReadFile(l.statePath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ledger: read %s: %w", StateFile, err)
	}
	var s state
	if err := json.Unmarshal(data, &s); err != nil || s.Model == "" {
		// A damaged settings file must not stop the store: the default
		// model is a safe answer and the next set rewrites the file.
		l.log.Warn("ledger: ignoring unreadable agent state", "file", StateFile, "err", err)
		return nil
	}
	l.model = s.Model
	return nil
}

// Model returns the current agent model.
func (l *Ledger) Model() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.model
}

// SetModel persists model as the current agent model.
func (l *Ledger) SetModel(model string) (protocol.AgentModel, error) {
	if model == "" {
		return protocol.AgentModel{}, protocol.Errorf(400, "model is required")
	}
	if len(model) > maxModelLength {
		return protocol.AgentModel{}, protocol.Errorf(400, "model is too long (max %d characters)", maxModelLength)
	}
	data, err := json.MarshalIndent(state{Model: model}, "", "  ")
	if err != nil {
		return protocol.AgentModel{}, fmt.Errorf("ledger: encode state: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := jsonl.WriteFileAtomic(l.statePath(), append(data, '\n')); err != nil {
		return protocol.AgentModel{}, fmt.Errorf("ledger: write %s: %w", StateFile, err)
	}
	l.model = model
	return protocol.AgentModel{Model: model}, nil
}

func (l *Ledger) now() string { return l.cfg.Now().UTC().Format(time.RFC3339Nano) }
