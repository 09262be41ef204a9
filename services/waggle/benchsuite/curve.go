package benchsuite

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// CurvePoint is the inter-token delay the server adds at one concurrency.
type CurvePoint struct {
	// Want is the number of turns attempted, Open how many streamed.
	Want, Open int
	// Rejected counts turns refused with an HTTP error (503 RUNNER_BUSY).
	Rejected int
	// Failed counts streams that broke (no terminal event, transport error).
	Failed int
	// AddedP50 and AddedP99 are the added inter-token delays.
	AddedP50, AddedP99 time.Duration
	// RSSPerStream is the server's RSS growth per open stream, in bytes.
	RSSPerStream int64
	// Mode is "model" (held stub streams) or "echo" (echo-delay pacing).
	Mode string
}

// gapTarget is issue 11's limit on the added p99 inter-token delay, and
// the level it applies to.
const (
	gapTarget      = 5 * time.Millisecond
	gapTargetLevel = 1000
)

// curve opens each level's streams against a slow model: every stub
// stream waits at a hold point until all are open (memory is read then),
// then sends its tokens 50 ms apart; the gaps at the client, minus the
// gaps of the same number of direct stub streams, are what the server
// adds. Without the agent path the runner's echo mode paces tokens with
// --echo-delay instead, and the nominal delay is the baseline.
func (r *run) curve(ctx context.Context) error {
	const tokens, interval = 12, 50 * time.Millisecond
	model, err := r.modelPath(ctx)
	if err != nil {
		return err
	}
	fdBudget := max(r.rep.NoFile/2-500, 100) // the server holds a client and a model connection per stream
	for _, c := range r.cfg.Levels {
		if model && c > fdBudget {
			r.logf("   level %d skipped: a model stream needs two descriptors in the server (limit %d)", c, r.rep.NoFile)
			continue
		}
		r.try(fmt.Sprintf("inter-token delay, %d streams", c), func() error {
			pt, err := r.curveLevel(ctx, c, tokens, interval, model)
			if err != nil {
				return err
			}
			r.logf("   %d streams: %d open, %d refused, %d broke, added gap p50 %s p99 %s, %s/stream", c, pt.Open, pt.Rejected, pt.Failed, ms(pt.AddedP50), ms(pt.AddedP99), kib(pt.RSSPerStream))
			r.rep.Curve = append(r.rep.Curve, pt)
			note := fmt.Sprintf("%s mode; %d of %d open", pt.Mode, pt.Open, c)
			if pt.Rejected > 0 {
				note += fmt.Sprintf(", %d refused", pt.Rejected)
			}
			if pt.Failed > 0 {
				note += fmt.Sprintf(", %d broke", pt.Failed)
			}
			row := Row{Group: "concurrency", Metric: fmt.Sprintf("inter-token delay p99 added, %d streams (%s apart)", c, interval),
				Server: ms(pt.AddedP99), Baseline: "0", Ratio: math.NaN(),
				Note: note + fmt.Sprintf("; p50 added %s; RSS %s/stream", ms(pt.AddedP50), kib(pt.RSSPerStream))}
			if c == gapTargetLevel {
				target := fmt.Sprintf("≤ %s with all %d open", ms(gapTarget), c)
				row = row.atMost(target, float64(pt.AddedP99), float64(gapTarget), msF)
				if pt.Open < c || pt.Failed > 0 {
					row = row.missed(target, fmt.Sprintf("%d of %d open, %d refused, %d broke", pt.Open, c, pt.Rejected, pt.Failed))
				}
			}
			r.rep.add(row)
			return nil
		})
	}
	return nil
}

func (r *run) curveLevel(ctx context.Context, c, tokens int, interval time.Duration, model bool) (CurvePoint, error) {
	pt := CurvePoint{Want: c, Mode: "echo"}
	spec := ServerSpec{Topology: Single, EchoDelay: interval}
	msg := "slow echo"
	if model {
		pt.Mode = "model"
		spec = ServerSpec{Topology: Single, LLMURL: r.stub.URL()}
		msg = HoldMessage(tokens, interval)
	}
	srv, err := r.start(ctx, fmt.Sprintf("curve-%d", c), spec)
	if err != nil {
		return pt, err
	}
	defer srv.Stop()
	if model {
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

	res, err := r.openMany(ctx, c, srv, msg, model, tokens*len("tok "))
	if err != nil {
		return pt, err
	}
	pt.Open, pt.Rejected, pt.Failed = res.open, res.refused, res.failed
	if res.open > 0 {
		pt.RSSPerStream = (res.rss - rss0) / int64(res.open)
	}
	var baseP50, baseP99 time.Duration
	if model {
		direct, err := r.openMany(ctx, c, nil, msg, model, tokens*len("tok "))
		if err != nil {
			return pt, err
		}
		if direct.failed > 0 || direct.refused > 0 {
			return pt, fmt.Errorf("direct stub streams: %d broke, %d refused: %v", direct.failed, direct.refused, direct.firstErr)
		}
		d := Summarize(direct.gaps)
		baseP50, baseP99 = d.P50, d.P99
	} else {
		baseP50, baseP99 = interval, interval
	}
	s := Summarize(res.gaps)
	pt.AddedP50, pt.AddedP99 = Added(s.P50, baseP50), Added(s.P99, baseP99)
	return pt, nil
}

// manyResult is what c concurrent streams saw.
type manyResult struct {
	// gaps are the inter-token gaps of the complete streams.
	gaps []time.Duration
	// open streams got their headers; refused ones an HTTP error, counted
	// by status in statuses; failed ones broke or lost tokens.
	open, refused, failed int
	statuses              map[int]int
	firstErr              error
	// rss is the server's RSS with every stream open.
	rss int64
}

// openMany starts c streams (through srv, or straight to the stub when
// srv is nil), waits until every one is open (model mode: until every
// stub stream waits at the hold point), reads the server's RSS, releases
// the hold and collects the inter-token gaps of all streams that carried
// all want bytes.
func (r *run) openMany(ctx context.Context, c int, srv *Server, msg string, model bool, want int) (manyResult, error) {
	res := manyResult{statuses: map[int]int{}}
	var (
		mu     sync.Mutex
		open   atomic.Int64
		wg     sync.WaitGroup
		opened sync.WaitGroup
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
			o := traceOpts{gaps: true, opened: func() { open.Add(1); signal() }}
			var tr Trace
			var err error
			if srv == nil {
				tr, err = DirectTurn(ctx, r.client, r.stub.URL(), msg, o)
			} else {
				tr, err = ChatTurn(ctx, r.client, srv.URL, msg, fmt.Sprintf("c%d", i), o)
			}
			mu.Lock()
			defer mu.Unlock()
			if err == nil && tr.Status != http.StatusOK {
				res.refused++
				res.statuses[tr.Status]++
				return
			}
			if why := streamCheck(tr, err, want, srv == nil); why != "" && (model || err != nil) {
				res.failed++
				if res.firstErr == nil {
					res.firstErr = fmt.Errorf("stream %d: %s", i, why)
				}
				return
			}
			res.gaps = append(res.gaps, tr.Gaps...)
		})
	}
	opened.Wait()
	if model {
		// Every open stream's model request must be waiting before memory
		// is read and the hold released.
		want := held0 + open.Load()
		deadline := time.Now().Add(60 * time.Second)
		for r.stub.held.Load() < want && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
	}
	var rssErr error
	if srv != nil {
		res.rss, rssErr = srv.RSS()
	}
	r.stub.Release()
	wg.Wait()
	res.open = int(open.Load())
	return res, rssErr
}

// statusText lists refusals by status: "9744 × HTTP 503".
func statusText(statuses map[int]int) string {
	codes := make([]int, 0, len(statuses))
	for c := range statuses {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	parts := make([]string, 0, len(codes))
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d × HTTP %d", statuses[c], c))
	}
	return strings.Join(parts, ", ")
}

// idleLimit is issue 11's memory limit for 10,000 idle streams, in bytes
// (300 MB, decimal as the issue writes it).
const idleLimit = 300 * 1000 * 1000

// capacityLevel is the stream count issue 11 wants one server to hold.
const capacityLevel = 10000

// idleStreams opens each idle level's turns in echo mode with a very long
// echo delay — one token, then silence — against a server with default
// limits, counts refusals and reads the server's RSS.
func (r *run) idleStreams(ctx context.Context) error {
	for _, c := range r.cfg.IdleLevels {
		if c > r.rep.NoFile-500 {
			r.rep.add(Row{Group: "idle", Metric: fmt.Sprintf("server RSS with %d idle streams", c), Server: "—", Baseline: "—", Ratio: math.NaN()}.
				unmeasured("", fmt.Sprintf("open-files limit %d", r.rep.NoFile)))
			continue
		}
		r.try(fmt.Sprintf("idle streams, %d", c), func() error {
			pt, err := r.idleLevel(ctx, c)
			if err != nil {
				return err
			}
			r.rep.Idle = append(r.rep.Idle, pt)
			r.logf("   %d idle: %d open, %d refused, %d broke, RSS %s (before %s)", c, pt.Open, pt.Rejected, pt.Failed, mib(pt.RSS), mib(pt.RSSBefore))
			r.addIdleRows(pt)
			return nil
		})
	}
	return nil
}

// addIdleRows reports one idle level: its memory and, at the capacity
// level, how many turns the server refused.
func (r *run) addIdleRows(pt IdlePoint) {
	c := pt.Want
	note := fmt.Sprintf("%d of %d open", pt.Open, c)
	if pt.Rejected > 0 {
		note += fmt.Sprintf(", refused: %s", statusText(pt.Statuses))
	}
	if pt.Failed > 0 {
		note += fmt.Sprintf(", %d broke (%s)", pt.Failed, cell(pt.FirstErr))
	}
	if c == capacityLevel {
		row := Row{Group: "capacity", Metric: fmt.Sprintf("turns refused of %d concurrent streaming turns, default flags", c),
			Server: fmt.Sprintf("%d", pt.Rejected), Baseline: "—", Ratio: math.NaN(), Note: note}
		target := "0 refused, all open"
		row.Target, row.Verdict = target, Met
		if pt.Rejected > 0 || pt.Open < c {
			row = row.missed(target, fmt.Sprintf("%d refused, %d broke, %d of %d open", pt.Rejected, pt.Failed, pt.Open, c))
		}
		r.rep.add(row)
	}
	row := Row{Group: "idle", Metric: fmt.Sprintf("server RSS with %d idle streams", c),
		Server: mib(pt.RSS), Baseline: mib(pt.RSSBefore), Ratio: Ratio(float64(pt.RSS), float64(pt.RSSBefore)),
		Note: note + fmt.Sprintf("; %s per stream; baseline: same server idle", kib(pt.PerStream()))}
	if c == capacityLevel {
		target := fmt.Sprintf("< 300 MB (%s)", mib(idleLimit))
		if pt.Open < c {
			est := pt.RSSBefore + pt.PerStream()*int64(c)
			row = row.unmeasured(target, fmt.Sprintf("only %d of %d open; extrapolated %s", pt.Open, c, mib(est)))
		} else {
			row = row.atMost(target, float64(pt.RSS), idleLimit, mibF)
		}
	}
	r.rep.add(row)
}

// IdlePoint is the memory of one idle-stream level.
type IdlePoint struct {
	Want, Open, Rejected, Failed int
	// Statuses counts refusals by HTTP status.
	Statuses map[int]int
	// FirstErr is the first broken stream's error.
	FirstErr       string
	RSSBefore, RSS int64
}

// PerStream is the RSS growth per open stream.
func (p IdlePoint) PerStream() int64 {
	if p.Open == 0 {
		return 0
	}
	return (p.RSS - p.RSSBefore) / int64(p.Open)
}

func (r *run) idleLevel(ctx context.Context, c int) (IdlePoint, error) {
	pt := IdlePoint{Want: c, Statuses: map[int]int{}}
	spec := ServerSpec{Topology: Single, EchoDelay: time.Hour}
	// The largest level is profiled: the target's, where the per-stream
	// costs dominate the fixed ones.
	profiled := r.cfg.ProfileDir != "" && c == r.cfg.IdleLevels[len(r.cfg.IdleLevels)-1]
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
		mu    sync.Mutex
		wg    sync.WaitGroup
		ready sync.WaitGroup
		open  atomic.Int64
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
			tr, err := ChatTurn(streams, r.client, srv.URL, "idle stream", fmt.Sprintf("i%d", i), traceOpts{firstToken: func() { open.Add(1); done() }})
			if streams.Err() != nil {
				return // the measurement is over; the stream was cut on purpose
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && tr.Status != http.StatusOK:
				pt.Rejected++
				pt.Statuses[tr.Status]++
			case err != nil || tr.Events == 0:
				// A turn that ends or breaks before its first token.
				pt.Failed++
				if pt.FirstErr == "" {
					why := fmt.Sprintf("ended with %q before its first token %s", tr.Terminal, tr.Body)
					if err != nil {
						why = err.Error()
					}
					pt.FirstErr = fmt.Sprintf("stream %d: %s", i, why)
				}
			}
		})
	}
	ready.Wait()
	mu.Lock()
	pt.Open = int(open.Load())
	mu.Unlock()
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
