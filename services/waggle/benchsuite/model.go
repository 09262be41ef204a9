package benchsuite

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

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
// came back (the agent path) rather than the echo reply. Tokens may
// arrive joined into fewer events, so the text is what is compared.
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
		return tr.Terminal == "done" && tr.Bytes == 3*len("tok "), nil
	}
	return false, errors.New("probe turn: no runner answered")
}

func (r *run) modelSingle(ctx context.Context) error {
	srv, err := r.modelServer(ctx, "model-single", Single, true)
	if err != nil {
		return err
	}
	defer srv.Stop()
	active, err := r.probeModel(ctx, srv)
	if err != nil {
		return err
	}
	if !active {
		r.logf("   the runner answered in echo mode: the agent path is not wired; model-path rows are skipped")
		return nil
	}
	prof := r.profiler(srv)
	if err := prof.begin("ttft"); err != nil {
		return err
	}
	r.try("time to first token, single", func() error { return r.ttft(ctx, srv, Single) })
	r.try("whole turn, single", func() error { return r.wholeTurn(ctx, srv) })
	if err := prof.end(); err != nil {
		return err
	}
	if err := prof.begin("throughput"); err != nil {
		return err
	}
	r.try("one long stream, single", func() error { return r.longStream(ctx, srv, Single) })
	r.try("aggregate throughput", func() error { return r.aggregate(ctx, srv) })
	return prof.end()
}

func (r *run) modelDistributed(ctx context.Context) error {
	if ok, err := r.modelPath(ctx); err != nil || !ok {
		return err
	}
	srv, err := r.modelServer(ctx, "model-dist", Distributed, false)
	if err != nil {
		return err
	}
	defer srv.Stop()
	if _, err := r.modelPathActive(ctx, srv); err != nil {
		return err
	}
	r.try("time to first token, distributed", func() error { return r.ttft(ctx, srv, Distributed) })
	r.try("one long stream, distributed", func() error { return r.longStream(ctx, srv, Distributed) })
	return nil
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

// ttftTargets are issue 12's limits on the added time to first token.
var ttftTargets = map[Topology][2]time.Duration{
	Single:      {500 * time.Microsecond, 1500 * time.Microsecond},
	Distributed: {time.Millisecond, 2500 * time.Microsecond},
}

// ttft alternates a turn through the server and a direct stub request, so
// both see the same machine state, and compares their first-token times.
func (r *run) ttft(ctx context.Context, srv *Server, topo Topology) error {
	msg := FastMessage(5)
	var viaSrv, direct []time.Duration
	n := r.cfg.TTFTSamples
	for i := range n + n/10 { // the first tenth warms connections and caches
		ts, err := ChatTurn(ctx, r.client, srv.URL, msg, fmt.Sprintf("ttft-%d", i), traceOpts{})
		if err != nil {
			return err
		}
		if ts.Status != http.StatusOK || ts.Terminal != "done" || ts.Bytes != 5*len("tok ") {
			return fmt.Errorf("ttft turn: status %d terminal %q %d bytes of %d %s", ts.Status, ts.Terminal, ts.Bytes, 5*len("tok "), ts.Body)
		}
		td, err := DirectTurn(ctx, r.client, r.stub.URL(), msg, traceOpts{})
		if err != nil {
			return err
		}
		if i >= n/10 {
			viaSrv, direct = append(viaSrv, ts.First), append(direct, td.First)
		}
	}
	res := TTFTResult{Topology: topo, Server: Summarize(viaSrv), Direct: Summarize(direct)}
	r.rep.TTFT = append(r.rep.TTFT, res)
	limits := ttftTargets[topo]
	for i, p := range []struct {
		name string
		s, d time.Duration
	}{{"p50", res.Server.P50, res.Direct.P50}, {"p99", res.Server.P99, res.Direct.P99}} {
		added := Added(p.s, p.d)
		row := Row{Group: "ttft-" + string(topo), Metric: fmt.Sprintf("added time to first token %s, %s (%d turns)", p.name, topo, n),
			Server: ms(p.s), Baseline: ms(p.d), Ratio: Ratio(float64(p.s), float64(p.d)),
			Note: "added " + ms(added) + "; baseline: the same request straight to the stub"}
		r.rep.add(row.atMost("added ≤ "+ms(limits[i]), float64(added), float64(limits[i]), msF))
	}
	return nil
}

// wholeTurn times "hi there" turns from the request to the done event,
// sequential over 10 sessions after a warm-up, alternating with the same
// turn through a bare handler that does the minimum a durable turn needs:
// append and fsync the user message, stream the stub's answer as the same
// events, append and fsync the reply, send done.
func (r *run) wholeTurn(ctx context.Context, srv *Server) error {
	base, err := startTurnBaseline(r.dir("turn-baseline"), r.stub.URL())
	if err != nil {
		return err
	}
	defer base.Close()
	n := r.cfg.TurnSamples
	warm := n / 4
	want := 5 * len("tok ") // the stub's answer to anything without a directive
	var viaSrv, direct, firstByte []time.Duration
	one := func(url, session string) (Trace, time.Duration, error) {
		t0 := time.Now()
		tr, err := ChatTurn(ctx, r.client, url, "hi there", session, traceOpts{})
		d := time.Since(t0)
		if err == nil && (tr.Status != http.StatusOK || tr.Terminal != "done" || tr.Bytes != want) {
			err = fmt.Errorf("status %d terminal %q %d bytes of %d %s", tr.Status, tr.Terminal, tr.Bytes, want, tr.Body)
		}
		return tr, d, err
	}
	for i := range warm + n {
		session := fmt.Sprintf("turn-%d", i%10)
		ts, ds, err := one(srv.URL, session)
		if err != nil {
			return fmt.Errorf("whole turn %d: %w", i, err)
		}
		_, db, err := one(base.URL, session)
		if err != nil {
			return fmt.Errorf("whole turn %d, baseline: %w", i, err)
		}
		if i >= warm {
			viaSrv, direct, firstByte = append(viaSrv, ds), append(direct, db), append(firstByte, ts.Opened)
		}
	}
	s, b, fb := Summarize(viaSrv), Summarize(direct), Summarize(firstByte)
	for _, p := range []struct {
		name  string
		s, d  time.Duration
		limit time.Duration
	}{{"p50", s.P50, b.P50, 2 * time.Millisecond}, {"p99", s.P99, b.P99, 5 * time.Millisecond}} {
		row := Row{Group: "turn", Metric: fmt.Sprintf("whole turn %s, \"hi there\", single (%d turns over 10 sessions)", p.name, n),
			Server: ms(p.s), Baseline: ms(p.d), Ratio: Ratio(float64(p.s), float64(p.d)),
			Note: fmt.Sprintf("added %s; first SSE byte p50 %s; baseline: bare handler, the same two fsyncs and events", ms(Added(p.s, p.d)), ms(fb.P50))}
		r.rep.add(row.atMost("≤ "+ms(p.limit), float64(p.s), float64(p.limit), msF))
	}
	return nil
}

// streamCheck says what was wrong with a stream that should have carried
// want bytes of tokens, or "" when nothing was.
func streamCheck(tr Trace, err error, want int, direct bool) string {
	switch {
	case err != nil:
		return err.Error()
	case tr.Status != http.StatusOK:
		return fmt.Sprintf("HTTP %d %s", tr.Status, tr.Body)
	case tr.StreamGaps > 0:
		return fmt.Sprintf("fell behind: %d stream_gap event(s), %d of %d token bytes live (terminal %q, done holds %d)", tr.StreamGaps, tr.Bytes, want, tr.Terminal, tr.DoneBytes)
	case tr.Bytes != want && tr.Terminal == "done":
		return fmt.Sprintf("%d of %d token bytes, yet the turn ended in done (done holds %d bytes)", tr.Bytes, want, tr.DoneBytes)
	case tr.Bytes != want:
		return fmt.Sprintf("%d of %d token bytes (terminal %q %s)", tr.Bytes, want, tr.Terminal, tr.Body)
	case !direct && tr.Terminal != "done":
		return fmt.Sprintf("terminal %q %s", tr.Terminal, tr.Body)
	case !direct && tr.DoneBytes != want:
		return fmt.Sprintf("done event holds %d of %d bytes", tr.DoneBytes, want)
	}
	return ""
}

// withLog puts the server log's error summary before what a client saw,
// so a cell cut short still names the cause.
func withLog(srv *Server, saw string) string {
	if _, sum := srv.LogErrors(); sum != "" {
		return sum + "; " + saw
	}
	return saw
}

// longStream streams LongTokens tokens through the server and directly,
// three times each, and keeps each side's best complete run. A run that
// lost tokens is reported as a miss, not as a failure of the suite.
func (r *run) longStream(ctx context.Context, srv *Server, topo Topology) error {
	n := r.cfg.LongTokens
	want := n * len("tok ")
	best := func(direct bool, f func() (Trace, error)) (Trace, []string) {
		var b Trace
		var bad []string
		for i := range 3 {
			tr, err := f()
			if why := streamCheck(tr, err, want, direct); why != "" {
				bad = append(bad, fmt.Sprintf("run %d: %s", i+1, why))
				continue
			}
			if b.Events == 0 || tr.Last-tr.First < b.Last-b.First {
				b = tr
			}
		}
		return b, bad
	}
	i := 0
	ts, badS := best(false, func() (Trace, error) {
		i++
		return ChatTurn(ctx, r.client, srv.URL, FastMessage(n), fmt.Sprintf("long-%d", i), traceOpts{})
	})
	td, badD := best(true, func() (Trace, error) { return DirectTurn(ctx, r.client, r.stub.URL(), FastMessage(n), traceOpts{}) })
	if td.Events == 0 {
		return fmt.Errorf("no direct stream was complete: %s", strings.Join(badD, "; "))
	}
	rateD := Rate(n-1, td.Last-td.First)
	perD := (td.Last - td.First) / time.Duration(max(n-1, 1))
	metric := fmt.Sprintf("one stream of %d tokens: tokens/s, %s", n, topo)
	target := "≥ 250,000 and ≥ 0.5 of direct"
	if ts.Events == 0 {
		r.rep.add(Row{Group: "stream-" + string(topo), Metric: metric, Server: "no complete run", Baseline: numF(rateD), Ratio: Ratio(0, rateD),
			Note: cell(withLog(srv, strings.Join(badS, "; ")))}.missed(target, "every run lost tokens"))
		return nil
	}
	rateS := Rate(n-1, ts.Last-ts.First)
	perS := (ts.Last - ts.First) / time.Duration(max(n-1, 1))
	row := Row{Group: "stream-" + string(topo), Metric: metric,
		Server: numF(rateS), Baseline: numF(rateD), Ratio: Ratio(rateS, rateD),
		Note: fmt.Sprintf("%d SSE events for %d tokens; best of %d complete run(s)", ts.Events, n, 3-len(badS))}
	switch {
	case len(badS) > 0:
		row.Note += "; " + cell(withLog(srv, strings.Join(badS, "; ")))
		row = row.missed(target, fmt.Sprintf("%d of 3 runs lost tokens", len(badS)))
	case rateS < 250000:
		row = row.atLeast(target, rateS, 250000, numF)
	default:
		row = row.atLeast(target, row.Ratio, 0.5, ratF)
	}
	r.rep.add(row)
	r.rep.add(Row{Group: "stream-" + string(topo), Metric: fmt.Sprintf("one stream: time per token, %s", topo),
		Server: us(perS), Baseline: us(perD), Ratio: Ratio(float64(perS), float64(perD)),
		Note: "added " + us(Added(perS, perD)) + " per token"})
	return nil
}

// aggregate runs AggTurns streams of AggTokens tokens at once through the
// server, then directly, and compares tokens delivered per second.
func (r *run) aggregate(ctx context.Context, srv *Server) error {
	c, n := r.cfg.AggTurns, r.cfg.AggTokens
	want := n * len("tok ")
	load := func(direct bool, one func(i int) (Trace, error)) (tokens, events float64, bad []string) {
		var mu sync.Mutex
		var ev, by int
		var wg sync.WaitGroup
		t0 := time.Now()
		for i := range c {
			wg.Go(func() {
				tr, err := one(i)
				why := streamCheck(tr, err, want, direct)
				mu.Lock()
				defer mu.Unlock()
				if why != "" {
					bad = append(bad, fmt.Sprintf("stream %d: %s", i, why))
				}
				ev += tr.Events
				by += tr.Bytes
			})
		}
		wg.Wait()
		el := time.Since(t0)
		return Rate(by/len("tok "), el), Rate(ev, el), bad
	}
	tokS, evS, badS := load(false, func(i int) (Trace, error) {
		return ChatTurn(ctx, r.client, srv.URL, FastMessage(n), fmt.Sprintf("agg-%d", i), traceOpts{})
	})
	tokD, _, badD := load(true, func(int) (Trace, error) { return DirectTurn(ctx, r.client, r.stub.URL(), FastMessage(n), traceOpts{}) })
	if len(badD) > 0 {
		return fmt.Errorf("direct streams incomplete: %s", strings.Join(badD, "; "))
	}
	row := Row{Group: "aggregate", Metric: fmt.Sprintf("aggregate tokens/s, %d concurrent turns × %d tokens", c, n),
		Server: numF(tokS), Baseline: numF(tokD), Ratio: Ratio(tokS, tokD),
		Note: fmt.Sprintf("%.0f SSE token events/s", evS)}
	row = row.atLeast("≥ 250,000 tokens/s", tokS, 250000, numF)
	if len(badS) > 0 {
		row.Note += "; " + cell(withLog(srv, strings.Join(badS, "; ")))
		row = row.missed(row.Target, fmt.Sprintf("%d of %d streams lost tokens", len(badS), c))
	}
	r.rep.add(row)
	return nil
}
