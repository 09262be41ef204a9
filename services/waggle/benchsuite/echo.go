package benchsuite

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// SmallWorkspace is the seeded workspace of the 100-session listing.
const SmallWorkspace = "bench100"

// smallSessions is the size of SmallWorkspace (issue 12's listing row).
const smallSessions = 100

func (r *run) echoAndSessions(ctx context.Context) error {
	srv, err := r.start(ctx, "echo", ServerSpec{Topology: Single, EchoDelay: 0, Prepare: func(d string) error {
		if err := SeedSessions(d, BenchWorkspace, r.cfg.Sessions); err != nil {
			return err
		}
		return SeedSessions(d, SmallWorkspace, smallSessions)
	}})
	if err != nil {
		return err
	}
	defer srv.Stop()
	base := startEchoBaseline()
	defer base.Close()

	for _, clients := range []int{1, 4} {
		r.try(fmt.Sprintf("echo turns, %d client(s)", clients), func() error {
			srvRate, srvFail, srvErr := r.echoLoop(ctx, srv.URL, clients)
			baseRate, _, baseErr := r.echoLoop(ctx, base.URL, clients)
			if baseErr != nil {
				return fmt.Errorf("baseline: %w", baseErr)
			}
			row := Row{Group: "echo", Metric: fmt.Sprintf("echo turns/s, %d client(s), delay 0", clients),
				Server: fmt.Sprintf("%.0f", srvRate), Baseline: fmt.Sprintf("%.0f", baseRate), Ratio: Ratio(srvRate, baseRate),
				Note: "baseline: bare net/http SSE handler streaming the same events"}
			row = row.atLeast("ratio ≥ 0.4", row.Ratio, 0.4, ratF)
			if srvFail > 0 {
				row = row.missed(row.Target, fmt.Sprintf("%d turn(s) failed, first: %s", srvFail, cell(srvErr.Error())))
			}
			r.rep.add(row)
			return nil
		})
	}

	// Listing and search: the server's HTTP answer against reading the same
	// files straight from disk in this process (page cache warm for both).
	wsPath := "/api/workspaces/" + BenchWorkspace + "/sessions"
	queries := []struct {
		metric, ws, path, term string
		samples                int
		target                 time.Duration
	}{
		{fmt.Sprintf("sessions list, %d sessions", smallSessions), SmallWorkspace, "/api/workspaces/" + SmallWorkspace + "/sessions", "", 200, 500 * time.Microsecond},
		{fmt.Sprintf("sessions list, %d sessions", r.cfg.Sessions), BenchWorkspace, wsPath, "", 5, 0},
		{fmt.Sprintf("sessions search (1%% hit), %d sessions", r.cfg.Sessions), BenchWorkspace, wsPath + "/search?q=" + Needle + "&limit=50", Needle, 5, 0},
		{fmt.Sprintf("sessions search (no hit), %d sessions", r.cfg.Sessions), BenchWorkspace, wsPath + "/search?q=zzqxv&limit=50", "zzqxv", 5, 0},
	}
	for _, q := range queries {
		r.try(q.metric, func() error {
			var srvT, baseT []time.Duration
			status, size := 0, 0
			warm := max(q.samples/10, 1) // the first requests warm caches
			for i := range q.samples + warm {
				st, d, n, err := timedGet(ctx, r.client, srv.URL+q.path)
				if err != nil {
					return err
				}
				status, size = st, n
				t0 := time.Now()
				if _, _, err := scanSessions(srv.StoreDir, q.ws, q.term); err != nil {
					return err
				}
				bd := time.Since(t0)
				if i >= warm {
					srvT, baseT = append(srvT, d), append(baseT, bd)
				}
			}
			s, b := Summarize(srvT), Summarize(baseT)
			row := Row{Group: "sessions", Metric: fmt.Sprintf("%s over HTTP (p50 of %d)", q.metric, q.samples), Server: ms(s.P50), Baseline: ms(b.P50),
				Ratio: Ratio(float64(s.P50), float64(b.P50)), Note: fmt.Sprintf("HTTP %d, %d bytes, p99 %s; baseline: read and scan every file", status, size, ms(s.P99))}
			if q.target > 0 {
				row = row.atMost("p50 ≤ "+ms(q.target), float64(s.P50), float64(q.target), msF)
			}
			if status != http.StatusOK {
				row.Ratio = math.NaN()
				row.Note = fmt.Sprintf("HTTP %d: route not answering (owner: sessions)", status)
				if q.target > 0 {
					row = row.missed(row.Target, row.Note)
				}
			}
			r.rep.add(row)
			return nil
		})
	}
	return nil
}

// echoLoop runs echo turns from clients goroutines for EchoFor (at most
// 5,000 turns each) and returns turns per second. A client whose turn
// fails stops; the failures are counted and the first is returned with
// the rate of the turns that did finish.
func (r *run) echoLoop(ctx context.Context, url string, clients int) (float64, int, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.EchoFor+30*time.Second)
	defer cancel()
	deadline := time.Now().Add(r.cfg.EchoFor)
	var total, failed atomic.Int64
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
					failed.Add(1)
					once.Do(func() { firstErr = err })
					return
				}
				total.Add(1)
			}
		})
	}
	wg.Wait()
	return Rate(int(total.Load()), time.Since(t0)), int(failed.Load()), firstErr
}
