package benchsuite

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Issue 11's limits for the stalled-reader scenario.
const (
	stalledGrowthTarget = 128 << 20
	stalledAfterTarget  = 64 << 20
)

// stalledResult is what the stalled-reader scenario saw.
type stalledResult struct {
	rss0, peak, after int64
	// afterAt is how long after the close the after value was read;
	// settled says it was read early because memory had settled.
	afterAt time.Duration
	settled bool
	// goMem is the Go runtime's view of the server's memory when after
	// was read (its /metrics): what of the RSS is live heap, stacks or
	// free memory not yet returned to the OS.
	goMem string
	// opened stalled turns got their headers; refused ones an HTTP error.
	opened, refused int
	statuses        map[int]int
	// ended is how many stalled turns' model answers ended, and when.
	ended   int64
	endedIn time.Duration
	// Normal turns: done with every token, error events, other breaks.
	normalDone, normalErrors, normalBroken int
	firstProblem                           string
	// logErrors counts error-level lines of the server log; logSummary
	// sums them up.
	logErrors  int
	logSummary string
}

// stalled runs issue 11's stalled-reader scenario: Stalled turns whose
// clients read the response headers and then stop reading without
// closing, while the stub streams StalledTokens tokens to each as fast as
// the runner takes them, and StalledNormal ordinary turns beside them.
// The server's RSS is sampled throughout; after the model answers of the
// stalled turns have ended (or a bound passed) the stalled clients close
// and memory is watched until it settles or StalledSettle passes.
func (r *run) stalled(ctx context.Context) error {
	model, err := r.modelPath(ctx)
	if err != nil {
		return err
	}
	if !model {
		r.logf("   the runner answered in echo mode: the stalled-reader scenario needs the agent path")
		return nil
	}
	spec := ServerSpec{Topology: Single, LLMURL: r.stub.URL()}
	if r.cfg.ProfileDir != "" {
		spec.Binary, spec.Prefix = r.cfg.ProfileBinary, []string{"profile-serve", "-dir", r.cfg.ProfileDir, "--"}
	}
	srv, err := r.start(ctx, "stalled", spec)
	if err != nil {
		return err
	}
	defer srv.Stop()
	if _, err := r.modelPathActive(ctx, srv); err != nil {
		return err
	}
	// The profile spans the whole scenario; it ends when the RSS after
	// the close was read, so its heap is what the server still holds then.
	prof := r.profiler(srv)
	if err := prof.begin("stalled"); err != nil {
		return err
	}
	res, err := r.stalledRun(ctx, srv)
	if err != nil {
		return err
	}
	if err := prof.end(); err != nil {
		return err
	}
	r.addStalledRows(res)
	return nil
}

func (r *run) stalledRun(ctx context.Context, srv *Server) (stalledResult, error) {
	n, tokens, normal := r.cfg.Stalled, r.cfg.StalledTokens, r.cfg.StalledNormal
	normalTokens, stallWait := 400, 2*time.Minute
	if r.cfg.Quick {
		normalTokens, stallWait = 100, 30*time.Second
	}
	res := stalledResult{statuses: map[int]int{}}
	var err error
	if res.rss0, err = srv.RSS(); err != nil {
		return res, err
	}
	sampler := startRSSSampler(srv, 100*time.Millisecond)
	defer sampler.stop()

	// The stalled clients have a transport of their own: closing their
	// connections must not disturb the pool of the normal turns.
	stallClient := newClient(n + 16)
	defer stallClient.CloseIdleConnections()
	tag := fmt.Sprintf("stall-%d", r.dirSeq.Load())
	msg := TaggedFastMessage(tokens, tag)
	var (
		mu    sync.Mutex
		resps []*http.Response
		wg    sync.WaitGroup
	)
	defer func() {
		for _, resp := range resps {
			resp.Body.Close()
		}
	}()
	t0 := time.Now()
	sem := make(chan struct{}, 32)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			resp, err := openStalled(ctx, stallClient, srv.URL, msg, fmt.Sprintf("stalled-%d", i))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				res.refused++
				res.statuses[0]++
			case resp.StatusCode != http.StatusOK:
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
				resp.Body.Close()
				res.refused++
				res.statuses[resp.StatusCode]++
			default:
				resps = append(resps, resp)
			}
		})
	}
	wg.Wait()
	res.opened = len(resps)
	r.logf("   %d stalled turns open (%d refused) after %s", res.opened, res.refused, time.Since(t0).Round(time.Millisecond))

	// The normal turns run while the stalled ones stream.
	var problems sync.Once
	var done, errs, broken atomic.Int64
	want := normalTokens * len("tok ")
	var nwg sync.WaitGroup
	for i := range normal {
		nwg.Go(func() {
			tr, err := ChatTurn(ctx, r.client, srv.URL, PaceMessage(normalTokens, 5*time.Millisecond), fmt.Sprintf("normal-%d", i), traceOpts{})
			why := streamCheck(tr, err, want, false)
			switch {
			case why == "":
				done.Add(1)
				return
			case err == nil && tr.Terminal == "error":
				errs.Add(1)
			default:
				broken.Add(1)
			}
			problems.Do(func() { res.firstProblem = fmt.Sprintf("turn %d: %s", i, why) })
		})
	}
	nwg.Wait()
	res.normalDone, res.normalErrors, res.normalBroken = int(done.Load()), int(errs.Load()), int(broken.Load())
	r.logf("   normal turns: %d done, %d error events, %d broke", res.normalDone, res.normalErrors, res.normalBroken)

	// Memory peaks when the stalled turns' answers have all been read from
	// the model and wait for their readers.
	deadline := t0.Add(stallWait)
	for r.stub.Ended(tag) < int64(res.opened) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	res.ended, res.endedIn = r.stub.Ended(tag), time.Since(t0)
	time.Sleep(time.Second) // the last events go through the relay
	res.peak = sampler.stop()
	r.logf("   %d of %d stalled answers ended after %s; peak RSS %s (start %s)", res.ended, res.opened, res.endedIn.Round(time.Millisecond), mib(res.peak), mib(res.rss0))

	mu.Lock()
	for _, resp := range resps {
		resp.Body.Close()
	}
	resps = nil
	mu.Unlock()
	if res.after, res.afterAt, res.settled, err = settleRSS(ctx, srv, res.rss0, stalledAfterTarget, r.cfg.StalledSettle); err != nil {
		return res, err
	}
	res.goMem = goMemory(ctx, r.client, srv.URL)
	r.logf("   RSS %s above start %s after the close; %s", mib(res.after-res.rss0), res.afterAt.Round(100*time.Millisecond), res.goMem)
	res.logErrors, res.logSummary = srv.LogErrors()
	return res, nil
}

// goMemory sums up the Go runtime's memory gauges from a server's
// /metrics ("" when they cannot be read): the heap in use, the free heap
// and how much of it was returned to the OS, the stacks, the next
// collection's goal and the goroutines.
func goMemory(ctx context.Context, c *http.Client, base string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return ""
	}
	resp, err := c.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	want := []struct{ name, label string }{
		{"go_memstats_heap_inuse_bytes", "heap in use"}, {"go_memstats_heap_idle_bytes", "heap free"},
		{"go_memstats_heap_released_bytes", "returned to the OS"}, {"go_memstats_stack_inuse_bytes", "stacks"},
		{"go_memstats_next_gc_bytes", "next GC at"}, {"go_goroutines", "goroutines"},
	}
	got := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			got[name] = v
		}
	}
	var parts []string
	for _, w := range want {
		v, ok := got[w.name]
		if !ok {
			continue
		}
		if w.name == "go_goroutines" {
			parts = append(parts, fmt.Sprintf("%s %.0f", w.label, v))
		} else {
			parts = append(parts, w.label+" "+mib(int64(v)))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "Go runtime: " + strings.Join(parts, ", ")
}

func (r *run) addStalledRows(res stalledResult) {
	n, tokens := r.cfg.Stalled, r.cfg.StalledTokens
	load := fmt.Sprintf("%d stalled × %d tokens + %d normal", n, tokens, r.cfg.StalledNormal)
	opened := fmt.Sprintf("%d of %d stalled turns open", res.opened, n)
	if res.refused > 0 {
		opened += ", refused: " + statusText(res.statuses)
	}
	r.rep.add(Row{Group: "stalled", Metric: "stalled readers: server RSS growth while stalled (" + load + ")",
		Server: mib(res.peak - res.rss0), Baseline: mib(res.rss0), Ratio: Ratio(float64(res.peak), float64(res.rss0)),
		Note: fmt.Sprintf("peak %s; %s; %d model answers ended after %s; baseline: RSS at start",
			mib(res.peak), opened, res.ended, res.endedIn.Round(100*time.Millisecond))}.
		atMost("≤ "+mib(stalledGrowthTarget), float64(res.peak-res.rss0), stalledGrowthTarget, mibF))

	when := fmt.Sprintf("read %s after the close", res.afterAt.Round(100*time.Millisecond))
	if res.settled {
		when += " (settled: within 1 MiB for 5 s)"
	}
	r.rep.add(Row{Group: "stalled", Metric: fmt.Sprintf("stalled readers: RSS above start %s after the clients close", r.cfg.StalledSettle),
		Server: mib(res.after - res.rss0), Baseline: mib(res.rss0), Ratio: Ratio(float64(res.after), float64(res.rss0)),
		Note: strings.TrimSuffix(fmt.Sprintf("RSS %s, %s; %s", mib(res.after), when, res.goMem), "; ")}.
		atMost("≤ "+mib(stalledAfterTarget), float64(res.after-res.rss0), stalledAfterTarget, mibF))

	normal := r.cfg.StalledNormal
	row := Row{Group: "stalled", Metric: "stalled readers: normal turns ending in done beside them",
		Server: fmt.Sprintf("%d/%d", res.normalDone, normal), Baseline: "—", Ratio: math.NaN(),
		Note: fmt.Sprintf("%d ended with an error event, %d broke", res.normalErrors, res.normalBroken)}
	target := fmt.Sprintf("%d/%d", normal, normal)
	row.Target, row.Verdict = target, Met
	if res.normalDone < normal {
		row = row.missed(target, cell(res.firstProblem))
	}
	r.rep.add(row)

	row = Row{Group: "stalled", Metric: "stalled readers: error events (normal turns) / error lines in the server log",
		Server: fmt.Sprintf("%d / %d", res.normalErrors, res.logErrors), Baseline: "—", Ratio: math.NaN()}
	if res.logSummary != "" {
		row.Note = cell(res.logSummary)
	}
	row.Target, row.Verdict = "0 error events", Met
	if res.normalErrors > 0 {
		row = row.missed("0 error events", fmt.Sprintf("%d error event(s)", res.normalErrors))
	}
	r.rep.add(row)
}

// rssSampler reads a server's RSS at an interval and keeps the largest.
type rssSampler struct {
	peak atomic.Int64
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

func startRSSSampler(srv *Server, every time.Duration) *rssSampler {
	s := &rssSampler{quit: make(chan struct{}), done: make(chan struct{})}
	read := func() {
		if v, err := srv.RSS(); err == nil && v > s.peak.Load() {
			s.peak.Store(v)
		}
	}
	read()
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.quit:
				read()
				return
			case <-t.C:
				read()
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the peak; later calls return it again.
func (s *rssSampler) stop() int64 {
	s.once.Do(func() { close(s.quit) })
	<-s.done
	return s.peak.Load()
}

// settleRSS polls the server's RSS every 500 ms for up to limit and
// returns the value at limit. It returns early, with settled set, once
// the value has stayed within 1 MiB for 5 s and is within target above
// base: Go returns memory to the OS gradually and does not take it back
// on its own, so a value that settled within the target stays there.
func settleRSS(ctx context.Context, srv *Server, base, target int64, limit time.Duration) (int64, time.Duration, bool, error) {
	const every, window, band = 500 * time.Millisecond, 5 * time.Second, 1 << 20
	t0 := time.Now()
	var hist []int64
	for {
		v, err := srv.RSS()
		if err != nil {
			return 0, 0, false, err
		}
		hist = append(hist, v)
		el := time.Since(t0)
		if el >= limit {
			return v, el, false, nil
		}
		if k := int(window / every); len(hist) > k && v-base <= target {
			lo, hi := v, v
			for _, x := range hist[len(hist)-1-k:] {
				lo, hi = min(lo, x), max(hi, x)
			}
			if hi-lo <= band {
				return v, el, true, nil
			}
		}
		select {
		case <-ctx.Done():
			return v, el, false, ctx.Err()
		case <-time.After(every):
		}
	}
}

// LogErrors counts the error-level lines of the server's JSON logs and
// sums them up by message, most frequent first, with the first line's
// error: "210 server log error(s) (191 × publish event, 11 × bus: handler
// failed); first: publish event: nats: stalled …". It is "" when there
// are none.
func (s *Server) LogErrors() (int, string) {
	byMsg := map[string]int{}
	first := ""
	total := 0
	for _, p := range s.Procs {
		f, err := os.Open(p.log)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if !bytes.Contains(line, []byte(`"level":"ERROR"`)) {
				continue
			}
			total++
			var rec struct {
				Msg string `json:"msg"`
				Err string `json:"err"`
			}
			if json.Unmarshal(line, &rec) != nil {
				rec.Msg = string(line)
			}
			byMsg[rec.Msg]++
			if first == "" {
				first = rec.Msg
				if rec.Err != "" {
					first += ": " + rec.Err
				}
			}
		}
		f.Close()
	}
	if total == 0 {
		return 0, ""
	}
	msgs := make([]string, 0, len(byMsg))
	for m := range byMsg {
		msgs = append(msgs, m)
	}
	sort.Slice(msgs, func(i, j int) bool {
		if byMsg[msgs[i]] != byMsg[msgs[j]] {
			return byMsg[msgs[i]] > byMsg[msgs[j]]
		}
		return msgs[i] < msgs[j]
	})
	parts := make([]string, 0, len(msgs))
	for _, m := range msgs {
		parts = append(parts, fmt.Sprintf("%d × %s", byMsg[m], m))
	}
	return total, fmt.Sprintf("%d server log error(s) (%s); first: %s", total, strings.Join(parts, ", "), first)
}
