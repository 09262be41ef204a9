package benchsuite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"time"
)

// Config configures one run of the suite. Zero fields take the defaults
// documented on them (Quick shrinks every count for a smoke run).
type Config struct {
	// Binary is the waggle binary under test. Required.
	Binary string
	// WorkDir holds data dirs and server logs. Required.
	WorkDir string
	// Quick runs every scenario with small counts (seconds, not minutes).
	Quick bool
	// SkipBig leaves out the 10,000-stream capacity level (the rest runs).
	SkipBig bool
	// Only, when not empty, runs just the scenarios named (see Scenarios).
	Only []string
	// ProfileDir, when set, runs the single-process model server under
	// ProfileBinary's profile-serve and writes CPU and allocation profiles
	// of the TTFT and throughput phases there.
	ProfileDir string
	// ProfileBinary is a binary whose first argument "profile-serve" runs
	// ProfileServe (wagglebench itself).
	ProfileBinary string
	// TTFTSamples is the number of timed turns per path. Default 400.
	TTFTSamples int
	// TurnSamples is the number of timed whole turns per path (after a
	// quarter as many warm-up turns). Default 200.
	TurnSamples int
	// LongTokens is the length of the long stream. Default 10,000.
	LongTokens int
	// AggTurns × AggTokens is the aggregate-throughput load. Default 16 × 5,000.
	AggTurns, AggTokens int
	// Levels are the concurrency levels of the inter-token curve.
	// Default 1, 10, 100, 250, 1,000.
	Levels []int
	// IdleLevels are the idle-stream counts for memory and admission.
	// Default 1,000, 10,000 (10,000 left out with SkipBig).
	IdleLevels []int
	// Sessions is the number of seeded sessions. Default 10,000.
	Sessions int
	// EchoFor bounds each echo-throughput loop. Default 3s.
	EchoFor time.Duration
	// Stalled × StalledTokens is the stalled-reader load, with
	// StalledNormal ordinary turns beside it. Default 200 × 20,000 and 20.
	Stalled, StalledTokens, StalledNormal int
	// StalledSettle is how long memory is watched after the stalled
	// clients close. Default 30s.
	StalledSettle time.Duration
	// Progress receives one line per step (nil = discard).
	Progress io.Writer
}

// Scenarios are the names Config.Only accepts, in the order they run.
var Scenarios = []string{"startup", "echo", "single", "distributed", "curve", "capacity", "stalled"}

func (c *Config) defaults() error {
	if c.Binary == "" || c.WorkDir == "" {
		return errors.New("benchsuite: Binary and WorkDir are required")
	}
	for _, name := range c.Only {
		if !slices.Contains(Scenarios, name) {
			return fmt.Errorf("benchsuite: unknown scenario %q (have %v)", name, Scenarios)
		}
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	def := func(v *int, full, quick int) {
		if *v <= 0 {
			*v = full
			if c.Quick {
				*v = quick
			}
		}
	}
	def(&c.TTFTSamples, 400, 40)
	def(&c.TurnSamples, 200, 40)
	def(&c.LongTokens, 10000, 2000)
	def(&c.AggTurns, 16, 4)
	def(&c.AggTokens, 5000, 500)
	def(&c.Sessions, 10000, 500)
	def(&c.Stalled, 200, 20)
	def(&c.StalledTokens, 20000, 2000)
	def(&c.StalledNormal, 20, 5)
	if c.Levels == nil {
		c.Levels = []int{1, 10, 100, 250, 1000}
		if c.Quick {
			c.Levels = []int{1, 10}
		}
	}
	if c.IdleLevels == nil {
		c.IdleLevels = []int{1000, 10000}
		if c.Quick {
			c.IdleLevels = []int{50}
		}
	}
	if c.SkipBig {
		c.IdleLevels = slices.DeleteFunc(slices.Clone(c.IdleLevels), func(n int) bool { return n >= 10000 })
	}
	if c.EchoFor <= 0 {
		c.EchoFor = 3 * time.Second
		if c.Quick {
			c.EchoFor = 500 * time.Millisecond
		}
	}
	if c.StalledSettle <= 0 {
		c.StalledSettle = 30 * time.Second
		if c.Quick {
			c.StalledSettle = 5 * time.Second
		}
	}
	return nil
}

func (c *Config) wants(name string) bool { return len(c.Only) == 0 || slices.Contains(c.Only, name) }

// run is the state of one suite run.
type run struct {
	cfg    Config
	rep    *Report
	stub   *Stub
	client *http.Client
	dirSeq atomic.Int64
	// modelKnown is set once ModelPath has been probed.
	modelKnown bool
}

// scenarioTimeout bounds one scenario, so a hang in one still leaves the
// others their time.
const scenarioTimeout = 5 * time.Minute

// Run measures everything and returns the report. A scenario that fails
// (a server that does not start, a stream that breaks) is recorded in the
// report as a failure row and the suite goes on with the next one; the
// returned error then says how many failed. Scenarios that cannot run
// (the agent path not wired) are reported as such.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, rep: &Report{Started: time.Now()}, client: newClient(20000)}
	raiseNoFile(r.rep)
	r.stub = StartStub()
	defer r.stub.Close()

	steps := []struct {
		name, title string
		fn          func(context.Context) error
	}{
		{"startup", "start to healthy and idle memory", r.startup},
		{"echo", "echo turns and sessions", r.echoAndSessions},
		{"single", "model path (single process)", r.modelSingle},
		{"distributed", "model path (distributed)", r.modelDistributed},
		{"curve", "inter-token delay vs concurrency", r.curve},
		{"capacity", "capacity and idle streams", r.idleStreams},
		{"stalled", "stalled readers", r.stalled},
	}
	for _, s := range steps {
		if !cfg.wants(s.name) {
			continue
		}
		if ctx.Err() != nil {
			r.rep.fail(s.title, fmt.Errorf("not run: %w", ctx.Err()))
			continue
		}
		t0 := time.Now()
		r.logf("== %s", s.title)
		sctx, cancel := context.WithTimeout(ctx, scenarioTimeout)
		err := s.fn(sctx)
		cancel()
		if err != nil {
			r.logf("   %s failed: %v", s.title, err)
			r.rep.fail(s.title, err)
		}
		r.logf("   %s took %s", s.title, time.Since(t0).Round(time.Millisecond))
	}
	r.rep.Took = time.Since(r.rep.Started)
	if n := len(r.rep.Failures); n > 0 {
		return r.rep, fmt.Errorf("benchsuite: %d scenario part(s) failed (see the report)", n)
	}
	return r.rep, nil
}

// try runs one part of a scenario; its failure is recorded and the
// scenario goes on with its next part.
func (r *run) try(what string, fn func() error) {
	if err := fn(); err != nil {
		r.logf("   %s failed: %v", what, err)
		r.rep.fail(what, err)
	}
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.cfg.Progress, format+"\n", args...)
}

func (r *run) dir(name string) string {
	d := filepath.Join(r.cfg.WorkDir, fmt.Sprintf("%02d-%s", r.dirSeq.Add(1), name))
	_ = os.MkdirAll(d, 0o755)
	return d
}

// raiseNoFile lifts the soft open-files limit to the hard one (an
// unprivileged process can go no higher); servers started later inherit
// it.
func raiseNoFile(rep *Report) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return
	}
	lim.Cur = lim.Max
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	rep.NoFile = int(lim.Cur)
}

// start starts a server with the flags of spec and otherwise the server's
// defaults: capacity is measured as a user gets it, so no limit is lifted
// (no --max-turns).
func (r *run) start(ctx context.Context, name string, spec ServerSpec) (*Server, error) {
	if spec.Binary == "" {
		spec.Binary, spec.Prefix = r.cfg.Binary, []string{"serve"}
	}
	spec.Dir = r.dir(name)
	return StartServer(ctx, spec)
}

// modelPath reports whether the runner reaches the model stub (the agent
// path) rather than answering in echo mode; it probes once, with a server
// of its own when no model scenario has run yet.
func (r *run) modelPath(ctx context.Context) (bool, error) {
	if r.modelKnown {
		return r.rep.ModelPath, nil
	}
	srv, err := r.start(ctx, "probe", ServerSpec{Topology: Single, LLMURL: r.stub.URL()})
	if err != nil {
		return false, err
	}
	defer srv.Stop()
	return r.probeModel(ctx, srv)
}

// probeModel sends one turn to srv and records whether the stub's tokens
// came back.
func (r *run) probeModel(ctx context.Context, srv *Server) (bool, error) {
	active, err := r.modelPathActive(ctx, srv)
	if err != nil {
		return false, err
	}
	r.modelKnown, r.rep.ModelPath = true, active
	return active, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }
func us(d time.Duration) string { return fmt.Sprintf("%.2f µs", float64(d)/float64(time.Microsecond)) }
func mib(b int64) string        { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
func kib(b int64) string        { return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10)) }

// Printers for targets, taking the float64 the checks compare.
func msF(v float64) string  { return ms(time.Duration(v)) }
func mibF(v float64) string { return mib(int64(v)) }
func numF(v float64) string { return fmt.Sprintf("%.0f", v) }
func ratF(v float64) string { return fmt.Sprintf("%.2f", v) }
