package benchsuite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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
	// ProfileDir, when set, runs the single-process model server under
	// ProfileBinary's profile-serve and writes CPU and allocation profiles
	// of the TTFT and throughput phases there.
	ProfileDir string
	// ProfileBinary is a binary whose first argument "profile-serve" runs
	// ProfileServe (wagglebench itself).
	ProfileBinary string
	// TTFTSamples is the number of timed turns per path. Default 400.
	TTFTSamples int
	// LongTokens is the length of the long stream. Default 10,000.
	LongTokens int
	// AggTurns × AggTokens is the aggregate-throughput load. Default 16 × 5,000.
	AggTurns, AggTokens int
	// Levels are the concurrency levels of the inter-token curve.
	// Default 1, 10, 100, 250, 1,000.
	Levels []int
	// IdleLevels are the idle-stream counts for memory. Default 1,000, 10,000.
	IdleLevels []int
	// Sessions is the number of seeded sessions. Default 10,000.
	Sessions int
	// EchoFor bounds each echo-throughput loop. Default 3s.
	EchoFor time.Duration
	// Progress receives one line per step (nil = discard).
	Progress io.Writer
}

func (c *Config) defaults() error {
	if c.Binary == "" || c.WorkDir == "" {
		return errors.New("benchsuite: Binary and WorkDir are required")
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
	def(&c.LongTokens, 10000, 2000)
	def(&c.AggTurns, 16, 4)
	def(&c.AggTokens, 5000, 500)
	def(&c.Sessions, 10000, 500)
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
	if c.EchoFor <= 0 {
		c.EchoFor = 3 * time.Second
		if c.Quick {
			c.EchoFor = 500 * time.Millisecond
		}
	}
	return nil
}

// run is the state of one suite run.
type run struct {
	cfg      Config
	rep      *Report
	stub     *Stub
	client   *http.Client
	extra    []string
	maxTurns int
	dirSeq   atomic.Int64
}

// Run measures everything and returns the report. Scenarios that cannot
// run (the agent path not wired, a runner cap) are reported as such, not
// as errors; an error means the suite itself could not work.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, rep: &Report{Started: time.Now()}, client: newClient(20000)}
	raiseNoFile(r.rep)
	r.maxTurns = 256
	if supportsFlag(cfg.Binary, "max-turns") {
		r.extra = []string{"--max-turns", "20000"}
		r.maxTurns = 20000
	}
	r.stub = StartStub()
	defer r.stub.Close()

	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"echo turns and sessions", r.echoAndSessions},
		{"model path (single process)", r.modelSingle},
		{"model path (distributed)", r.modelDistributed},
		{"inter-token delay vs concurrency", r.curve},
		{"idle streams", r.idleStreams},
	}
	for _, s := range steps {
		if ctx.Err() != nil {
			return r.rep, ctx.Err()
		}
		t0 := time.Now()
		r.logf("== %s", s.name)
		if err := s.fn(ctx); err != nil {
			r.rep.Took = time.Since(r.rep.Started)
			r.rep.Targets = checkTargets(r.rep)
			return r.rep, fmt.Errorf("benchsuite: %s: %w", s.name, err)
		}
		r.logf("   %s took %s", s.name, time.Since(t0).Round(time.Millisecond))
	}
	r.rep.Took = time.Since(r.rep.Started)
	r.rep.Targets = checkTargets(r.rep)
	return r.rep, nil
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.cfg.Progress, format+"\n", args...)
}

func (r *run) dir(name string) string {
	d := filepath.Join(r.cfg.WorkDir, fmt.Sprintf("%02d-%s", r.dirSeq.Add(1), name))
	_ = os.MkdirAll(d, 0o755)
	return d
}

// raiseNoFile lifts the soft open-files limit to the hard one; servers
// started later inherit it.
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

// supportsFlag reports whether `bin serve --help` lists flag.
func supportsFlag(bin, flag string) bool {
	out, _ := exec.Command(bin, "serve", "--help").CombinedOutput()
	return strings.Contains(string(out), "-"+flag+" ")
}

func (r *run) start(ctx context.Context, name string, spec ServerSpec) (*Server, error) {
	if spec.Binary == "" {
		spec.Binary, spec.Prefix = r.cfg.Binary, []string{"serve"}
	}
	spec.Dir = r.dir(name)
	spec.Extra = append(spec.Extra, r.extra...)
	return StartServer(ctx, spec)
}

// ---- echo mode and sessions ----

func (r *run) echoAndSessions(ctx context.Context) error {
	srv, err := r.start(ctx, "echo", ServerSpec{Topology: Single, EchoDelay: 0, Prepare: func(d string) error {
		return SeedSessions(d, r.cfg.Sessions)
	}})
	if err != nil {
		return err
	}
	defer srv.Stop()
	base := startEchoBaseline()
	defer base.Close()

	for _, clients := range []int{1, 4} {
		srvRate, srvErr := r.echoLoop(ctx, srv.URL, clients)
		baseRate, baseErr := r.echoLoop(ctx, base.URL, clients)
		if err := errors.Join(srvErr, baseErr); err != nil {
			return err
		}
		r.rep.add(Row{Group: "echo", Metric: fmt.Sprintf("echo turns/s, %d client(s), delay 0", clients),
			Server: fmt.Sprintf("%.0f", srvRate), Baseline: fmt.Sprintf("%.0f", baseRate), Ratio: Ratio(srvRate, baseRate),
			Note: "baseline: bare net/http SSE handler streaming the same events"})
		if clients == 1 {
			r.rep.EchoTurnsPerSec = srvRate
		}
	}

	// Listing and search: the server's HTTP answer against reading the same
	// files straight from disk in this process (page cache warm for both).
	queries := []struct{ metric, path, term string }{
		{fmt.Sprintf("sessions list, %d sessions", r.cfg.Sessions), "/api/workspaces/" + BenchWorkspace + "/sessions", ""},
		{fmt.Sprintf("sessions search (1%% hit), %d sessions", r.cfg.Sessions), "/api/workspaces/" + BenchWorkspace + "/sessions/search?q=" + Needle + "&limit=50", Needle},
		{fmt.Sprintf("sessions search (no hit), %d sessions", r.cfg.Sessions), "/api/workspaces/" + BenchWorkspace + "/sessions/search?q=zzqxv&limit=50", "zzqxv"},
	}
	for _, q := range queries {
		var srvT, baseT []time.Duration
		status, size := 0, 0
		for i := range 6 {
			st, d, n, err := timedGet(ctx, r.client, srv.URL+q.path)
			if err != nil {
				return err
			}
			status, size = st, n
			t0 := time.Now()
			if _, _, err := scanSessions(srv.StoreDir, q.term); err != nil {
				return err
			}
			bd := time.Since(t0)
			if i > 0 { // the first pair warms caches
				srvT, baseT = append(srvT, d), append(baseT, bd)
			}
		}
		s, b := Summarize(srvT), Summarize(baseT)
		row := Row{Group: "sessions", Metric: q.metric + " (p50 of 5)", Server: ms(s.P50), Baseline: ms(b.P50),
			Ratio: Ratio(float64(s.P50), float64(b.P50)), Note: fmt.Sprintf("HTTP %d, %d bytes; baseline: read and scan every file", status, size)}
		if status != http.StatusOK {
			row.Ratio = math.NaN()
			row.Note = fmt.Sprintf("HTTP %d: route not answering (owner: sessions)", status)
		}
		r.rep.add(row)
	}
	return nil
}

// echoLoop runs echo turns from clients goroutines for EchoFor (at most
// 5,000 turns each) and returns turns per second.
func (r *run) echoLoop(ctx context.Context, url string, clients int) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.EchoFor+30*time.Second)
	defer cancel()
	deadline := time.Now().Add(r.cfg.EchoFor)
	var total atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	t0 := time.Now()
	for c := range clients {
		wg.Go(func() {
			for i := 0; i < 5000 && time.Now().Before(deadline); i++ {
				tr, err := ChatTurn(ctx, r.client, url, fmt.Sprintf("echo bench %d", i), fmt.Sprintf("e%d-%d", c, i%16), traceOpts{})
				if err == nil && (tr.Status != http.StatusOK || tr.Terminal != "done") {
					err = fmt.Errorf("echo turn: status %d terminal %q %s", tr.Status, tr.Terminal, tr.Body)
				}
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				total.Add(1)
			}
		})
	}
	wg.Wait()
	return Rate(int(total.Load()), time.Since(t0)), firstErr
}

// ---- model path ----

// modelServer starts a server whose runner talks to the stub; when
// ProfileDir is set the single-process one runs under profile-serve.
func (r *run) modelServer(ctx context.Context, name string, topo Topology, profile bool) (*Server, error) {
	spec := ServerSpec{Topology: topo, LLMURL: r.stub.URL()}
	if profile && r.cfg.ProfileDir != "" && topo == Single {
		if err := os.MkdirAll(r.cfg.ProfileDir, 0o755); err != nil {
			return nil, err
		}
		spec.Binary, spec.Prefix = r.cfg.ProfileBinary, []string{"profile-serve", "-dir", r.cfg.ProfileDir, "--"}
	}
	return r.start(ctx, name, spec)
}

// modelPathActive sends one turn and reports whether the stub's tokens
// came back (the agent path) rather than the echo reply.
func (r *run) modelPathActive(ctx context.Context, srv *Server) (bool, error) {
	for range 50 { // the distributed runner may still be subscribing
		tr, err := ChatTurn(ctx, r.client, srv.URL, FastMessage(3), "probe", traceOpts{})
		if err != nil {
			return false, err
		}
		if tr.Status == http.StatusServiceUnavailable {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if tr.Status != http.StatusOK {
			return false, fmt.Errorf("probe turn: HTTP %d %s", tr.Status, tr.Body)
		}
		return tr.Events == 3 && tr.Bytes == 3*len("tok "), nil
	}
	return false, errors.New("probe turn: no runner answered")
}

func (r *run) modelSingle(ctx context.Context) error {
	srv, err := r.modelServer(ctx, "model-single", Single, true)
	if err != nil {
		return err
	}
	defer srv.Stop()
	active, err := r.modelPathActive(ctx, srv)
	if err != nil {
		return err
	}
	r.rep.ModelPath = active
	if !active {
		r.logf("   the runner answered in echo mode: the agent path is not wired; model-path rows are skipped")
		return nil
	}
	prof := r.profiler(srv)
	if err := prof.begin("ttft"); err != nil {
		return err
	}
	ttft, err := r.ttft(ctx, srv, Single)
	if err != nil {
		return err
	}
	r.rep.TTFT = append(r.rep.TTFT, ttft)
	if err := prof.end(); err != nil {
		return err
	}
	if err := prof.begin("throughput"); err != nil {
		return err
	}
	if err := r.longStream(ctx, srv, Single); err != nil {
		return err
	}
	if err := r.aggregate(ctx, srv); err != nil {
		return err
	}
	return prof.end()
}

func (r *run) modelDistributed(ctx context.Context) error {
	if !r.rep.ModelPath {
		return nil
	}
	srv, err := r.modelServer(ctx, "model-dist", Distributed, false)
	if err != nil {
		return err
	}
	defer srv.Stop()
	if _, err := r.modelPathActive(ctx, srv); err != nil {
		return err
	}
	ttft, err := r.ttft(ctx, srv, Distributed)
	if err != nil {
		return err
	}
	r.rep.TTFT = append(r.rep.TTFT, ttft)
	return r.longStream(ctx, srv, Distributed)
}

// TTFTResult is the added time to first token of one topology.
type TTFTResult struct {
	Topology       Topology
	Server, Direct Summary
}

// AddedP50 and AddedP99 are the server's percentiles minus the direct ones.
func (t TTFTResult) AddedP50() time.Duration { return Added(t.Server.P50, t.Direct.P50) }

// AddedP99 is the added p99.
func (t TTFTResult) AddedP99() time.Duration { return Added(t.Server.P99, t.Direct.P99) }

// ttft alternates a turn through the server and a direct stub request, so
// both see the same machine state, and compares their first-token times.
func (r *run) ttft(ctx context.Context, srv *Server, topo Topology) (TTFTResult, error) {
	msg := FastMessage(5)
	var viaSrv, direct []time.Duration
	n := r.cfg.TTFTSamples
	for i := range n + n/10 { // the first tenth warms connections and caches
		ts, err := ChatTurn(ctx, r.client, srv.URL, msg, fmt.Sprintf("ttft-%d", i), traceOpts{})
		if err != nil {
			return TTFTResult{}, err
		}
		if ts.Status != http.StatusOK || ts.Terminal != "done" || ts.Events != 5 {
			return TTFTResult{}, fmt.Errorf("ttft turn: status %d terminal %q events %d %s", ts.Status, ts.Terminal, ts.Events, ts.Body)
		}
		td, err := DirectTurn(ctx, r.client, r.stub.URL(), msg, traceOpts{})
		if err != nil {
			return TTFTResult{}, err
		}
		if i >= n/10 {
			viaSrv, direct = append(viaSrv, ts.First), append(direct, td.First)
		}
	}
	res := TTFTResult{Topology: topo, Server: Summarize(viaSrv), Direct: Summarize(direct)}
	for _, p := range []struct {
		name   string
		s, d   time.Duration
		target string
	}{{"p50", res.Server.P50, res.Direct.P50, "added ≤ 1 ms"}, {"p99", res.Server.P99, res.Direct.P99, "added ≤ 3 ms"}} {
		r.rep.add(Row{Group: "ttft-" + string(topo), Metric: fmt.Sprintf("time to first token %s, %s (%d turns)", p.name, topo, n),
			Server: ms(p.s), Baseline: ms(p.d), Ratio: Ratio(float64(p.s), float64(p.d)),
			Note: "added " + ms(Added(p.s, p.d)) + "; target " + p.target})
	}
	return res, nil
}

// longStream streams LongTokens tokens through the server and directly,
// three times each, and keeps each side's best run.
func (r *run) longStream(ctx context.Context, srv *Server, topo Topology) error {
	n := r.cfg.LongTokens
	best := func(f func() (Trace, error)) (Trace, error) {
		var b Trace
		for range 3 {
			tr, err := f()
			if err != nil {
				return tr, err
			}
			if tr.Bytes != n*len("tok ") {
				return tr, fmt.Errorf("long stream lost tokens: got %d bytes of %d (status %d, terminal %q %s)", tr.Bytes, n*len("tok "), tr.Status, tr.Terminal, tr.Body)
			}
			if b.Events == 0 || tr.Last-tr.First < b.Last-b.First {
				b = tr
			}
		}
		return b, nil
	}
	i := 0
	ts, err := best(func() (Trace, error) {
		i++
		return ChatTurn(ctx, r.client, srv.URL, FastMessage(n), fmt.Sprintf("long-%d", i), traceOpts{})
	})
	if err != nil {
		return err
	}
	td, err := best(func() (Trace, error) { return DirectTurn(ctx, r.client, r.stub.URL(), FastMessage(n), traceOpts{}) })
	if err != nil {
		return err
	}
	perS := (ts.Last - ts.First) / time.Duration(max(n-1, 1))
	perD := (td.Last - td.First) / time.Duration(max(n-1, 1))
	rateS, rateD := Rate(n-1, ts.Last-ts.First), Rate(n-1, td.Last-td.First)
	r.rep.add(Row{Group: "stream-" + string(topo), Metric: fmt.Sprintf("one stream of %d tokens: tokens/s, %s", n, topo),
		Server: fmt.Sprintf("%.0f", rateS), Baseline: fmt.Sprintf("%.0f", rateD), Ratio: Ratio(rateS, rateD),
		Note: fmt.Sprintf("%d SSE events for %d tokens", ts.Events, n)})
	r.rep.add(Row{Group: "stream-" + string(topo), Metric: fmt.Sprintf("one stream: time per token, %s", topo),
		Server: us(perS), Baseline: us(perD), Ratio: Ratio(float64(perS), float64(perD)),
		Note: "added " + us(Added(perS, perD)) + " per token"})
	if topo == Single {
		r.rep.PerTokenAdded = Added(perS, perD)
	} else {
		r.rep.PerTokenAddedDist = Added(perS, perD)
	}
	return nil
}

// aggregate runs AggTurns streams of AggTokens tokens at once through the
// server, then directly, and compares tokens delivered per second.
func (r *run) aggregate(ctx context.Context, srv *Server) error {
	c, n := r.cfg.AggTurns, r.cfg.AggTokens
	load := func(one func(i int) (Trace, error)) (float64, float64, error) {
		var events, bytes atomic.Int64
		errs := make([]error, c)
		var wg sync.WaitGroup
		t0 := time.Now()
		for i := range c {
			wg.Go(func() {
				tr, err := one(i)
				if err == nil && tr.Bytes != n*len("tok ") {
					err = fmt.Errorf("aggregate stream %d: %d of %d bytes (status %d %s)", i, tr.Bytes, n*len("tok "), tr.Status, tr.Body)
				}
				errs[i] = err
				events.Add(int64(tr.Events))
				bytes.Add(int64(tr.Bytes))
			})
		}
		wg.Wait()
		el := time.Since(t0)
		return Rate(int(bytes.Load())/len("tok "), el), Rate(int(events.Load()), el), errors.Join(errs...)
	}
	tokS, evS, err := load(func(i int) (Trace, error) {
		return ChatTurn(ctx, r.client, srv.URL, FastMessage(n), fmt.Sprintf("agg-%d", i), traceOpts{})
	})
	if err != nil {
		return err
	}
	tokD, _, err := load(func(int) (Trace, error) { return DirectTurn(ctx, r.client, r.stub.URL(), FastMessage(n), traceOpts{}) })
	if err != nil {
		return err
	}
	r.rep.AggTokensPerSec, r.rep.AggEventsPerSec = tokS, evS
	r.rep.add(Row{Group: "aggregate", Metric: fmt.Sprintf("aggregate tokens/s, %d concurrent turns × %d tokens", c, n),
		Server: fmt.Sprintf("%.0f", tokS), Baseline: fmt.Sprintf("%.0f", tokD), Ratio: Ratio(tokS, tokD),
		Note: fmt.Sprintf("%.0f SSE token events/s; target ≥ 100,000 events/s", evS)})
	return nil
}

// ---- concurrency ----

// CurvePoint is the inter-token delay the server adds at one concurrency.
type CurvePoint struct {
	// Want is the number of turns attempted, Open how many streamed.
	Want, Open int
	// Rejected counts turns refused (e.g. 503 RUNNER_BUSY).
	Rejected int
	// AddedP50 and AddedP99 are the added inter-token delays.
	AddedP50, AddedP99 time.Duration
	// RSSPerStream is the server's RSS growth per open stream, in bytes.
	RSSPerStream int64
	// Mode is "model" (held stub streams) or "echo" (echo-delay pacing).
	Mode string
}

// curve opens each level's streams against a slow model: every stub
// stream waits at a hold point until all are open (memory is read then),
// then sends its tokens 50 ms apart; the gaps at the client, minus the
// gaps of the same number of direct stub streams, are what the server
// adds. Without the agent path the runner's echo mode paces tokens with
// --echo-delay instead, and the nominal delay is the baseline.
func (r *run) curve(ctx context.Context) error {
	const tokens, interval = 12, 50 * time.Millisecond
	fdBudget := max(r.rep.NoFile/2-500, 100) // the server holds a client and a model connection per stream
	for _, c := range r.cfg.Levels {
		if r.rep.ModelPath && c > fdBudget {
			r.logf("   level %d skipped: a model stream needs two descriptors in the server (limit %d)", c, r.rep.NoFile)
			continue
		}
		pt, err := r.curveLevel(ctx, c, tokens, interval)
		if err != nil {
			return err
		}
		r.logf("   %d streams: %d open, %d rejected, added gap p50 %s p99 %s, %s/stream", c, pt.Open, pt.Rejected, ms(pt.AddedP50), ms(pt.AddedP99), mib(pt.RSSPerStream))
		r.rep.Curve = append(r.rep.Curve, pt)
		note := fmt.Sprintf("%s mode; %d of %d open", pt.Mode, pt.Open, c)
		if pt.Rejected > 0 {
			note += fmt.Sprintf(", %d refused (runner cap %d)", pt.Rejected, r.maxTurns)
		}
		r.rep.add(Row{Group: "concurrency", Metric: fmt.Sprintf("inter-token delay p99 added, %d streams (%s apart)", c, interval),
			Server: ms(pt.AddedP99), Baseline: "0", Ratio: math.NaN(), Note: note + fmt.Sprintf("; p50 added %s; RSS %s/stream", ms(pt.AddedP50), mib(pt.RSSPerStream))})
	}
	return nil
}

func (r *run) curveLevel(ctx context.Context, c, tokens int, interval time.Duration) (CurvePoint, error) {
	pt := CurvePoint{Want: c, Mode: "echo"}
	spec := ServerSpec{Topology: Single, EchoDelay: interval}
	msg := "slow echo"
	if r.rep.ModelPath {
		pt.Mode = "model"
		spec = ServerSpec{Topology: Single, LLMURL: r.stub.URL()}
		msg = HoldMessage(tokens, interval)
	}
	srv, err := r.start(ctx, fmt.Sprintf("curve-%d", c), spec)
	if err != nil {
		return pt, err
	}
	defer srv.Stop()
	if r.rep.ModelPath {
		if _, err := r.modelPathActive(ctx, srv); err != nil {
			return pt, err
		}
	}
	rss0, err := srv.RSS()
	if err != nil {
		return pt, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	serverGaps, open, rejected, rss, err := r.openMany(ctx, c, srv, msg, true)
	if err != nil {
		return pt, err
	}
	pt.Open, pt.Rejected = open, rejected
	if open > 0 {
		pt.RSSPerStream = (rss - rss0) / int64(open)
	}
	var baseP50, baseP99 time.Duration
	if r.rep.ModelPath {
		directGaps, _, _, _, err := r.openMany(ctx, c, nil, msg, true)
		if err != nil {
			return pt, err
		}
		d := Summarize(directGaps)
		baseP50, baseP99 = d.P50, d.P99
	} else {
		baseP50, baseP99 = interval, interval
	}
	s := Summarize(serverGaps)
	pt.AddedP50, pt.AddedP99 = Added(s.P50, baseP50), Added(s.P99, baseP99)
	return pt, nil
}

// openMany starts c streams (through srv, or straight to the stub when
// srv is nil), waits until every one is open (model mode: until every
// stub stream waits at the hold point), reads the server's RSS, releases
// the hold and collects the inter-token gaps of all streams.
func (r *run) openMany(ctx context.Context, c int, srv *Server, msg string, gaps bool) ([]time.Duration, int, int, int64, error) {
	var (
		mu       sync.Mutex
		all      []time.Duration
		open     atomic.Int64
		rejected atomic.Int64
		wg       sync.WaitGroup
		opened   sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	held0 := r.stub.held.Load()
	sem := make(chan struct{}, 128) // bounds connection setup, not streams
	opened.Add(c)
	for i := range c {
		wg.Go(func() {
			sem <- struct{}{}
			var once sync.Once
			signal := func() { once.Do(func() { <-sem; opened.Done() }) }
			defer signal()
			o := traceOpts{gaps: gaps, opened: func() { open.Add(1); signal() }}
			var tr Trace
			var err error
			if srv == nil {
				tr, err = DirectTurn(ctx, r.client, r.stub.URL(), msg, o)
			} else {
				tr, err = ChatTurn(ctx, r.client, srv.URL, msg, fmt.Sprintf("c%d", i), o)
			}
			if err == nil && tr.Status != http.StatusOK {
				rejected.Add(1)
				return
			}
			if err != nil {
				errOnce.Do(func() { firstErr = fmt.Errorf("stream %d: %w", i, err) })
				return
			}
			mu.Lock()
			all = append(all, tr.Gaps...)
			mu.Unlock()
		})
	}
	opened.Wait()
	var rss int64
	if r.rep.ModelPath && strings.HasPrefix(msg, "wb hold") {
		// Every open stream's model request must be waiting before memory
		// is read and the hold released.
		want := held0 + open.Load()
		deadline := time.Now().Add(60 * time.Second)
		for r.stub.held.Load() < want && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if srv != nil {
		var err error
		if rss, err = srv.RSS(); err != nil {
			return nil, 0, 0, 0, err
		}
	}
	r.stub.Release()
	wg.Wait()
	return all, int(open.Load()), int(rejected.Load()), rss, firstErr
}

// idleStreams opens each idle level's turns in echo mode with a very long
// echo delay — one token, then silence — and reads the server's RSS.
func (r *run) idleStreams(ctx context.Context) error {
	for _, c := range r.cfg.IdleLevels {
		if c > r.rep.NoFile-500 {
			r.logf("   idle level %d skipped: open-files limit %d", c, r.rep.NoFile)
			continue
		}
		pt, err := r.idleLevel(ctx, c)
		if err != nil {
			return err
		}
		r.rep.Idle = append(r.rep.Idle, pt)
		note := fmt.Sprintf("%d of %d open", pt.Open, c)
		if pt.Rejected > 0 {
			note += fmt.Sprintf(", %d refused (runner cap %d)", pt.Rejected, r.maxTurns)
		}
		r.rep.add(Row{Group: "idle", Metric: fmt.Sprintf("server RSS with %d idle streams", c),
			Server: mib(pt.RSS), Baseline: mib(pt.RSSBefore), Ratio: Ratio(float64(pt.RSS), float64(pt.RSSBefore)),
			Note: note + fmt.Sprintf("; %s per stream; baseline: same server idle", kib(pt.PerStream()))})
		r.logf("   %d idle: %d open, %d refused, RSS %s (before %s)", c, pt.Open, pt.Rejected, mib(pt.RSS), mib(pt.RSSBefore))
	}
	return nil
}

// IdlePoint is the memory of one idle-stream level.
type IdlePoint struct {
	Want, Open, Rejected int
	RSSBefore, RSS       int64
}

// PerStream is the RSS growth per open stream.
func (p IdlePoint) PerStream() int64 {
	if p.Open == 0 {
		return 0
	}
	return (p.RSS - p.RSSBefore) / int64(p.Open)
}

func (r *run) idleLevel(ctx context.Context, c int) (IdlePoint, error) {
	pt := IdlePoint{Want: c}
	spec := ServerSpec{Topology: Single, EchoDelay: time.Hour}
	profiled := r.cfg.ProfileDir != "" && c == r.cfg.IdleLevels[0]
	if profiled {
		spec.Binary, spec.Prefix = r.cfg.ProfileBinary, []string{"profile-serve", "-dir", r.cfg.ProfileDir, "--"}
	}
	srv, err := r.start(ctx, fmt.Sprintf("idle-%d", c), spec)
	if err != nil {
		return pt, err
	}
	prof := &profiler{r: r, srv: srv}
	if !profiled {
		prof = &profiler{r: &run{}, srv: srv} // disabled: no profile dir
	}
	if err := prof.begin("idle"); err != nil {
		return pt, err
	}
	// Cancelling thousands of turns persists thousands of partial replies;
	// the measurement is over, so the server is killed instead.
	defer srv.kill()
	if pt.RSSBefore, err = srv.RSS(); err != nil {
		return pt, err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var (
		wg       sync.WaitGroup
		ready    sync.WaitGroup
		open     atomic.Int64
		rejected atomic.Int64
	)
	sem := make(chan struct{}, 128)
	ready.Add(c)
	streams, stop := context.WithCancel(ctx)
	defer stop()
	for i := range c {
		wg.Go(func() {
			sem <- struct{}{}
			var once sync.Once
			done := func() { once.Do(func() { <-sem; ready.Done() }) }
			defer done()
			tr, _ := ChatTurn(streams, r.client, srv.URL, "idle stream", fmt.Sprintf("i%d", i), traceOpts{firstToken: func() { open.Add(1); done() }})
			if tr.Status != 0 && tr.Status != http.StatusOK {
				rejected.Add(1)
			}
		})
	}
	ready.Wait()
	pt.Open, pt.Rejected = int(open.Load()), int(rejected.Load())
	if pt.RSS, err = srv.RSS(); err != nil {
		return pt, err
	}
	if err := prof.end(); err != nil {
		return pt, err
	}
	stop()
	wg.Wait()
	return pt, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }
func us(d time.Duration) string { return fmt.Sprintf("%.2f µs", float64(d)/float64(time.Microsecond)) }
func mib(b int64) string        { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
func kib(b int64) string        { return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10)) }
