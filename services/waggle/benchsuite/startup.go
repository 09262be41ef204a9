package benchsuite

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// Issue 12's limits on a fresh server.
const (
	startTarget   = 50 * time.Millisecond
	idleRSSTarget = 25 << 20
)

// startup starts fresh servers (new data dir, default flags, no model
// reachable: what a desktop gets on first start) one after the other and
// measures the time from exec to healthy and the RSS of the idle server.
func (r *run) startup(ctx context.Context) error {
	n := 5
	if r.cfg.Quick {
		n = 3
	}
	var times []time.Duration
	var rss []int64
	for i := range n {
		srv, err := r.start(ctx, fmt.Sprintf("startup-%d", i), ServerSpec{Topology: Single})
		if err != nil {
			return err
		}
		times = append(times, srv.StartToHealthy)
		// What start-up allocated settles; no request but /health is made.
		time.Sleep(500 * time.Millisecond)
		v, err := srv.RSS()
		stopErr := srv.Stop()
		if err != nil {
			return err
		}
		if stopErr != nil {
			return stopErr
		}
		rss = append(rss, v)
	}
	t := Summarize(times)
	slices.Sort(rss)
	rssP50 := rss[(len(rss)-1)/2]
	r.rep.add(Row{Group: "startup", Metric: fmt.Sprintf("start to healthy, fresh data dir (p50 of %d)", n), Server: ms(t.P50), Baseline: "—", Ratio: math.NaN(),
		Note: fmt.Sprintf("max %s; exec of `waggle serve` to the first 200 from /health, polled every 2 ms", ms(t.Max))}.
		atMost("≤ "+ms(startTarget), float64(t.P50), float64(startTarget), msF))
	r.rep.add(Row{Group: "startup", Metric: fmt.Sprintf("idle RSS after start (p50 of %d)", n), Server: mib(rssP50), Baseline: "—", Ratio: math.NaN(),
		Note: fmt.Sprintf("max %s; VmRSS 0.5 s after healthy, before any turn", mib(rss[len(rss)-1]))}.
		atMost("≤ "+mib(idleRSSTarget), float64(rssP50), idleRSSTarget, mibF))
	return nil
}
