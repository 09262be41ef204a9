package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/jsonl"
)

// entry is a usage record as kept in memory for Since queries.
type entry struct {
	at        time.Time
	workspace string
	model     string
	input     int
	output    int
	cost      float64
	// reset says a later reset covers the line although it follows the
	// file's last reset marker: a line moved from PostgreSQL (split.go)
	// that PostgreSQL had already reset.
	reset bool
}

// fileBackend is the ledger under a data directory: usage.jsonl with sums
// kept in memory, and agent-state.json.
type fileBackend struct {
	dir string
	log *slog.Logger

	mu      sync.Mutex
	entries []entry
	// sinceReset is the index of the first entry after the last reset.
	sinceReset int
	current    string
	// fromPG holds the PostgreSQL seq of every line that came from there
	// (split.go: moved lines and the copies of PostgreSQL's resets), so a
	// move repeated after a crash writes none of them twice; resetSeq is
	// the highest such seq of a reset marker.
	fromPG   map[int64]bool
	resetSeq int64
}

func (f *fileBackend) usagePath() string { return filepath.Join(f.dir, UsageFile) }
func (f *fileBackend) statePath() string { return filepath.Join(f.dir, StateFile) }

func (f *fileBackend) load() error {
	data, err := os.ReadFile(f.usagePath())
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
			f.log.Warn("ledger: skipping unreadable line", "offset", off-nl-1, "err", err)
			continue
		}
		f.apply(ln)
	}
	if good < len(data) {
		// Cut the torn tail now so the next append starts on a fresh line.
		if err := os.Truncate(f.usagePath(), int64(good)); err != nil {
			return fmt.Errorf("ledger: repair %s: %w", UsageFile, err)
		}
		f.log.Warn("ledger: removed a torn last line", "bytes", len(data)-good)
	}
	return nil
}

func (f *fileBackend) apply(ln line) {
	if ln.PGSeq > 0 {
		if f.fromPG == nil {
			f.fromPG = map[int64]bool{}
		}
		f.fromPG[ln.PGSeq] = true
	}
	switch ln.Type {
	case "reset":
		f.sinceReset = len(f.entries)
		f.resetSeq = max(f.resetSeq, ln.PGSeq)
	case "usage":
		at, _ := time.Parse(time.RFC3339Nano, ln.Timestamp)
		f.entries = append(f.entries, entry{at: at, workspace: ln.Workspace, model: ln.Model, input: ln.InputTokens, output: ln.OutputTokens, cost: ln.Cost,
			reset: ln.PGSeq > 0 && ln.PGSeq < f.resetSeq})
	}
}

// hasPG reports whether the line of PostgreSQL seq is in the file.
func (f *fileBackend) hasPG(seq int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fromPG[seq]
}

// append writes one line and fsyncs it before the change is applied in
// memory, so totals never count what a crash could lose.
func (f *fileBackend) append(_ context.Context, ln line) error {
	return f.appendAll([]line{ln})
}

// appendAll writes lns in one write and one fsync, then applies them. A
// crash leaves a prefix of them (a torn last line is cut at the next load).
func (f *fileBackend) appendAll(lns []line) error {
	var buf []byte
	for _, ln := range lns {
		b, err := json.Marshal(ln)
		if err != nil {
			return fmt.Errorf("ledger: encode: %w", err)
		}
		buf = append(append(buf, b...), '\n')
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fh, err := os.OpenFile(f.usagePath(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("ledger: open %s: %w", UsageFile, err)
	}
	_, werr := fh.Write(buf)
	serr := fh.Sync()
	cerr := fh.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("ledger: append to %s: %w", UsageFile, err)
	}
	for _, ln := range lns {
		f.apply(ln)
	}
	return nil
}

func (f *fileBackend) summary(_ context.Context, from *time.Time, workspace string) (protocol.UsageSummary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	entries := f.entries[f.sinceReset:]
	if from != nil {
		entries = f.entries
	}
	sum := protocol.UsageSummary{ByModel: map[string]protocol.ModelUsage{}}
	for _, e := range entries {
		if (from != nil && e.at.Before(*from)) || (from == nil && e.reset) || (workspace != "" && e.workspace != workspace) {
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

func (f *fileBackend) loadState() error {
	data, err := os.ReadFile(f.statePath())
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
		f.log.Warn("ledger: ignoring unreadable agent state", "file", StateFile, "err", err)
		return nil
	}
	f.current = s.Model
	return nil
}

func (f *fileBackend) model(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.current, nil
}

func (f *fileBackend) setModel(_ context.Context, model string) error {
	data, err := json.MarshalIndent(state{Model: model}, "", "  ")
	if err != nil {
		return fmt.Errorf("ledger: encode state: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := jsonl.WriteFileAtomic(f.statePath(), append(data, '\n')); err != nil {
		return fmt.Errorf("ledger: write %s: %w", StateFile, err)
	}
	f.current = model
	return nil
}
