// Package lifecycle is the minds' background worker that lets memory age
// and grow: temporary frames nobody used decay to deprecated, frames used
// often are strengthened to important, near-duplicates are consolidated
// into the strongest of them, a finished session is distilled into one
// important frame and each finished day into one summary frame. Every
// change is logged, counted and can be undone for a day; nothing a user
// saved is deleted. On a cluster one store
// process leads (Config.Lead). See docs/memory.md.
package lifecycle

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/telemetry"
	"github.com/waggle-os/core/services/sessionstore/frames"
	"github.com/waggle-os/core/services/sessionstore/mindindex"
	"github.com/waggle-os/core/services/sessionstore/ranking"
)

// Steps of a change.
const (
	StepDecay      = "decay"
	StepStrengthen = "strengthen"
	// StepConsolidate deprecates a near-duplicate of a frame kept.
	StepConsolidate = "consolidate"
	StepUndo        = "undo"
)

// LogFile is the change log in the data dir: one JSON line per change.
const LogFile = "memory-lifecycle.jsonl"

// sweepLimit bounds the frames one sweep reads per mind.
const sweepLimit = 100_000

// Config configures a Worker.
type Config struct {
	// Backend holds the frames. Required.
	Backend frames.Backend
	// DataDir holds LogFile. Required.
	DataDir string
	// Interval between sweeps. Default 1h.
	Interval time.Duration
	// TemporaryAge is how long a temporary frame may go unused (never
	// accessed, not edited) before it decays to deprecated. Default 7 days.
	TemporaryAge time.Duration
	// StrengthenAt is the access count at which a normal frame becomes
	// important. Default 5.
	StrengthenAt int
	// UndoWindow is how long a change can be undone. Default 24h.
	UndoWindow time.Duration
	// Sessions lists the sessions to distil, read-only; nil: the distil
	// and daily steps do not run.
	Sessions SessionSource
	// FinishedAfter is how long a session must be idle to count as
	// finished and be distilled. Default 30 minutes.
	FinishedAfter time.Duration
	// DistilWithin is how far back the distil step looks: sessions idle
	// longer (say, all of them, the first time it runs) are not distilled.
	// Default 7 days.
	DistilWithin time.Duration
	// Lead, when set, blocks until this process leads the sweeps and
	// returns a release; nil: this process always leads (one store).
	Lead func(ctx context.Context) (release func(), err error)
	// Now is the clock. Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Change is one logged change of a frame: of its importance, or (From
// empty) a frame written by the distil or daily step, or (To empty) that
// frame deleted by an undo.
type Change struct {
	Step string `json:"step"`
	Mind string `json:"mind"`
	ID   string `json:"id"`
	From string `json:"from"`
	To   string `json:"to"`
	// Of is what a distil or daily frame was made of: the session id or
	// the UTC day (YYYY-MM-DD).
	Of string `json:"of,omitempty"`
	At string `json:"at"`
}

// Worker sweeps the minds.
type Worker struct {
	cfg Config
	log *slog.Logger

	stop context.CancelFunc
	done chan struct{}

	mu sync.Mutex // serialises sweeps, undos and log appends
}

// New returns an unstarted worker.
func New(cfg Config) *Worker {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Hour
	}
	if cfg.TemporaryAge <= 0 {
		cfg.TemporaryAge = 7 * 24 * time.Hour
	}
	if cfg.StrengthenAt <= 0 {
		cfg.StrengthenAt = 5
	}
	if cfg.UndoWindow <= 0 {
		cfg.UndoWindow = 24 * time.Hour
	}
	if cfg.FinishedAfter <= 0 {
		cfg.FinishedAfter = 30 * time.Minute
	}
	if cfg.DistilWithin <= 0 {
		cfg.DistilWithin = 7 * 24 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Worker{cfg: cfg, log: cfg.Logger.With("component", "memory-lifecycle")}
}

// Start runs the sweeps: after leadership is had, one at once, then one
// per Interval.
func (w *Worker) Start(ctx context.Context) {
	if w.done != nil {
		return
	}
	ctx, w.stop = context.WithCancel(context.WithoutCancel(ctx))
	w.done = make(chan struct{})
	go w.run(ctx)
}

// Stop ends the sweeps and waits for the worker.
func (w *Worker) Stop() {
	if w == nil || w.done == nil {
		return
	}
	w.stop()
	<-w.done
	w.done = nil
}

func (w *Worker) run(ctx context.Context) {
	defer close(w.done)
	if w.cfg.Lead != nil {
		release, err := w.cfg.Lead(ctx)
		if err != nil {
			if ctx.Err() == nil {
				w.log.Warn("memory lifecycle: no leadership; this process does not sweep", "err", err)
			}
			return
		}
		defer release()
	}
	tick := time.NewTicker(w.cfg.Interval)
	defer tick.Stop()
	for {
		if _, err := w.Sweep(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("memory lifecycle sweep failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Sweep runs the steps over every mind once and returns the changes.
func (w *Worker) Sweep(ctx context.Context) ([]Change, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	minds, err := w.cfg.Backend.Minds(ctx)
	if err != nil {
		return nil, fmt.Errorf("lifecycle: %w", err)
	}
	now := w.cfg.Now()
	recent, err := w.recent()
	if err != nil {
		return nil, err
	}
	// A change undone within the window is not made again meanwhile.
	undone := map[string]bool{}
	for _, c := range recent {
		if c.Step == StepUndo {
			undone[c.Mind+"\x00"+c.ID] = true
		}
	}
	// Distillation first: its frames are no candidates for this sweep's
	// other steps (they are new and important).
	out, err := w.distil(ctx, now)
	if err != nil {
		return out, err
	}
	for _, m := range minds {
		fs, err := w.cfg.Backend.Recent(ctx, m, frames.ListOptions{Limit: sweepLimit})
		if err != nil {
			return out, fmt.Errorf("lifecycle: read %s: %w", m.Key(), err)
		}
		dupes := duplicates(fs)
		for _, f := range fs {
			step, to := w.judge(f, now)
			if step == "" && dupes[f.ID] {
				step, to = StepConsolidate, protocol.ImportanceDeprecated
			}
			if step == "" || undone[m.Key()+"\x00"+f.ID] {
				continue
			}
			c, err := w.change(ctx, m, f.ID, step, f.Importance, to, now)
			if err != nil {
				return out, err
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// judge is the step a frame is due for ("" none) and its new importance.
func (w *Worker) judge(f frames.Frame, now time.Time) (step, to string) {
	switch f.Importance {
	case protocol.ImportanceTemporary:
		updated, err := time.Parse(time.RFC3339Nano, f.Updated)
		if err == nil && f.AccessCount == 0 && now.Sub(updated) >= w.cfg.TemporaryAge {
			return StepDecay, protocol.ImportanceDeprecated
		}
	case protocol.ImportanceNormal:
		if f.AccessCount >= w.cfg.StrengthenAt {
			return StepStrengthen, protocol.ImportanceImportant
		}
	}
	return "", ""
}

// change sets the importance, then logs and counts it (w.mu held).
func (w *Worker) change(ctx context.Context, m frames.Mind, id, step, from, to string, now time.Time) (Change, error) {
	if _, err := w.cfg.Backend.SetImportance(ctx, m, id, to); err != nil {
		return Change{}, fmt.Errorf("lifecycle: %s %s in %s: %w", step, id, m.Key(), err)
	}
	c := Change{Step: step, Mind: m.Key(), ID: id, From: from, To: to, At: protocol.Timestamp(now)}
	w.record(c)
	return c, nil
}

// record logs and counts a change made (w.mu held).
func (w *Worker) record(c Change) {
	if err := w.append(c); err != nil {
		// The change stands; only its trace is missing. Say so loudly.
		w.log.Error("memory lifecycle: change not logged", "step", c.Step, "mind", c.Mind, "id", c.ID, "from", c.From, "to", c.To, "of", c.Of, "err", err)
	}
	telemetry.MemoryLifecycle.WithLabelValues(c.Step).Inc()
	w.log.Info("memory lifecycle", "step", c.Step, "mind", c.Mind, "id", c.ID, "from", c.From, "to", c.To, "of", c.Of)
}

func (w *Worker) append(c Change) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(w.cfg.DataDir, LogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.Write(append(b, '\n'))
	return errors.Join(werr, f.Sync(), f.Close())
}

// Recent lists the logged changes still within the undo window, oldest
// first (a restart keeps them: they are read from the log).
func (w *Worker) Recent() ([]Change, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.recent()
}

func (w *Worker) recent() ([]Change, error) {
	f, err := os.Open(filepath.Join(w.cfg.DataDir, LogFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lifecycle: read log: %w", err)
	}
	defer f.Close()
	since := w.cfg.Now().Add(-w.cfg.UndoWindow)
	var out []Change
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c Change
		if json.Unmarshal(sc.Bytes(), &c) != nil {
			continue
		}
		if at, err := time.Parse(time.RFC3339Nano, c.At); err == nil && !at.Before(since) {
			out = append(out, c)
		}
	}
	return out, sc.Err()
}

// ErrTooLate is the answer to undoing a change older than the window or
// never made.
var ErrTooLate = protocol.Errorf(protocol.NotFound, "No change of this frame to undo within the undo window")

// Undo restores the importance the frame had before its latest change
// (within the undo window), when the frame still has the importance that
// change gave it; a frame the distil or daily step wrote is deleted (the
// session or day is not distilled again).
func (w *Worker) Undo(ctx context.Context, mindKey, id string) (Change, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	cs, err := w.recent()
	if err != nil {
		return Change{}, err
	}
	m, ok := frames.ParseMindKey(mindKey)
	if !ok {
		return Change{}, ErrTooLate
	}
	for i := len(cs) - 1; i >= 0; i-- {
		c := cs[i]
		if c.Mind != mindKey || c.ID != id {
			continue
		}
		if c.Step == StepUndo {
			return Change{}, ErrTooLate // already undone
		}
		f, err := w.cfg.Backend.Get(ctx, m, id)
		if err != nil {
			return Change{}, err
		}
		if c.Step == StepDistil || c.Step == StepDaily {
			if _, err := w.cfg.Backend.Delete(ctx, m, id); err != nil {
				return Change{}, fmt.Errorf("lifecycle: undo %s in %s: %w", id, mindKey, err)
			}
			u := Change{Step: StepUndo, Mind: mindKey, ID: id, From: f.Importance, Of: c.Of, At: protocol.Timestamp(w.cfg.Now())}
			w.record(u)
			return u, nil
		}
		if f.Importance != c.To {
			return Change{}, protocol.Errorf(protocol.Conflict, "The frame's importance changed since; nothing undone")
		}
		if c.Step == StepDecay {
			// Wanted back: that is a use, so the frame does not decay
			// again once the window has passed.
			if _, err := w.cfg.Backend.Access(ctx, m, id); err != nil {
				return Change{}, fmt.Errorf("lifecycle: undo %s in %s: %w", id, mindKey, err)
			}
		}
		return w.change(ctx, m, id, StepUndo, c.To, c.From, w.cfg.Now())
	}
	return Change{}, ErrTooLate
}

// minDupTerms is the fewest search terms a frame needs to be consolidated:
// short texts agree by chance.
const minDupTerms = 3

// Paraphrases: two frames whose vectors (of one model) are at least this
// similar say the same thing in other words. Only the newest
// maxParaphraseFrames frames with vectors of a mind are compared, pair by
// pair (an hourly sweep of 2,000 is 2 million dot products).
const (
	paraphraseCosine    = 0.95
	maxParaphraseFrames = 2000
)

// duplicates marks the frames that say what another frame of the mind
// says: the same set of search terms (case, punctuation, stopwords, word
// order and repetition aside), or vectors of one model at least
// paraphraseCosine alike. Of each group (linked by either, transitively)
// the strongest frame stays (by importance, then use, then age); the
// others are marked. Deprecated frames neither count nor are marked.
func duplicates(fs []frames.Frame) map[string]bool {
	live := slices.DeleteFunc(slices.Clone(fs), func(f frames.Frame) bool { return f.Importance == protocol.ImportanceDeprecated })
	parent := make([]int, len(live))
	for i := range parent {
		parent[i] = i
	}
	var root func(i int) int
	root = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	union := func(a, b int) { parent[root(a)] = root(b) }

	byTerms := map[string]int{}
	for i, f := range live {
		terms := mindindex.Tokens(f.Content)
		slices.Sort(terms)
		terms = slices.Compact(terms)
		if len(terms) < minDupTerms {
			continue
		}
		k := strings.Join(terms, " ")
		if j, ok := byTerms[k]; ok {
			union(i, j)
		} else {
			byTerms[k] = i
		}
	}
	paraphrases(live, union)

	groups := map[int][]frames.Frame{}
	for i, f := range live {
		groups[root(i)] = append(groups[root(i)], f)
	}
	out := map[string]bool{}
	for _, g := range groups {
		if len(g) < 2 {
			continue
		}
		slices.SortStableFunc(g, func(a, b frames.Frame) int {
			if c := cmp.Compare(ranking.ImportanceWorth(b.Importance), ranking.ImportanceWorth(a.Importance)); c != 0 {
				return c
			}
			if c := cmp.Compare(b.AccessCount, a.AccessCount); c != 0 {
				return c
			}
			return strings.Compare(a.Created, b.Created)
		})
		for _, f := range g[1:] {
			out[f.ID] = true
		}
	}
	return out
}

// paraphrases links (union) the frames of fs whose vectors of one model
// are at least paraphraseCosine alike, among the newest
// maxParaphraseFrames frames with vectors of each model.
func paraphrases(fs []frames.Frame, union func(a, b int)) {
	type vec struct {
		i int
		v []float32
	}
	byModel := map[string][]vec{}
	for i, f := range fs { // newest first (Backend.Recent)
		if len(f.Vector) == 0 || f.VectorModel == "" || len(byModel[f.VectorModel]) >= maxParaphraseFrames {
			continue
		}
		if n := norm(f.Vector); n > 0 {
			v := make([]float32, len(f.Vector))
			for k, x := range f.Vector {
				v[k] = x / n
			}
			byModel[f.VectorModel] = append(byModel[f.VectorModel], vec{i, v})
		}
	}
	for _, vs := range byModel {
		for a := range vs {
			for b := a + 1; b < len(vs); b++ {
				if len(vs[a].v) == len(vs[b].v) && dot(vs[a].v, vs[b].v) >= paraphraseCosine {
					union(vs[a].i, vs[b].i)
				}
			}
		}
	}
}

func dot(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func norm(v []float32) float32 { return float32(math.Sqrt(float64(dot(v, v)))) }
