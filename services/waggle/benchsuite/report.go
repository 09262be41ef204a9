package benchsuite

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// Row is one line of the result table. Ratio is server ÷ baseline: above
// 1 the server is slower for times, below 1 it is slower for rates.
type Row struct {
	Group, Metric, Server, Baseline string
	Ratio                           float64
	Note                            string
}

// Target is one target of issue 6 §3 and whether this run met it.
type Target struct {
	Name string
	// Known is false when the run could not measure it (Got says why).
	Known bool
	Met   bool
	Got   string
	// Miss says by how much a missed target was missed.
	Miss string
}

// Report is the result of one run.
type Report struct {
	Started time.Time
	Took    time.Duration
	// NoFile is the open-files limit the servers ran with.
	NoFile int
	// ModelPath is true when turns reached the model stub (agent path).
	ModelPath bool

	Rows              []Row
	TTFT              []TTFTResult
	PerTokenAdded     time.Duration
	PerTokenAddedDist time.Duration
	AggTokensPerSec   float64
	AggEventsPerSec   float64
	EchoTurnsPerSec   float64
	Curve             []CurvePoint
	Idle              []IdlePoint
	Targets           []Target
	// Profiles are the pprof text summaries written (with -profile).
	Profiles []string
}

func (r *Report) add(row Row) { r.Rows = append(r.Rows, row) }

func (r *Report) ttft(t Topology) (TTFTResult, bool) {
	for _, x := range r.TTFT {
		if x.Topology == t {
			return x, true
		}
	}
	return TTFTResult{}, false
}

// checkTargets compares the run with issue 6 §3.
func checkTargets(r *Report) []Target {
	var ts []Target
	single, okS := r.ttft(Single)
	dist, okD := r.ttft(Distributed)
	noModel := "not measured: the runner answered in echo mode (agent path not wired)"
	lat := func(name string, got, limit time.Duration, ok bool) Target {
		t := Target{Name: name, Known: ok, Got: noModel}
		if ok {
			t.Got, t.Met = ms(got), got <= limit
			if !t.Met {
				t.Miss = fmt.Sprintf("+%s over (%.1f× the limit)", ms(got-limit), float64(got)/float64(limit))
			}
		}
		return t
	}
	ts = append(ts, lat("added TTFT p50 ≤ 1 ms (single process)", single.AddedP50(), time.Millisecond, okS))
	ts = append(ts, lat("added TTFT p99 ≤ 3 ms (single process)", single.AddedP99(), 3*time.Millisecond, okS))

	agg := Target{Name: "≥ 100,000 token events/s aggregate (one node)", Known: r.AggEventsPerSec > 0, Got: noModel}
	if agg.Known {
		agg.Got = fmt.Sprintf("%.0f events/s (%.0f tokens/s)", r.AggEventsPerSec, r.AggTokensPerSec)
		agg.Met = r.AggEventsPerSec >= 100000
		if !agg.Met {
			agg.Miss = fmt.Sprintf("%.0f events/s short (%.1f%% of the target)", 100000-r.AggEventsPerSec, r.AggEventsPerSec/1000)
		}
	}
	ts = append(ts, agg)

	idle := Target{Name: "10,000 idle streams < 500 MB RSS (single process)", Got: "not measured"}
	var best IdlePoint
	for _, p := range r.Idle {
		if p.Open > best.Open {
			best = p
		}
	}
	const limit = 500 * 1000 * 1000
	switch {
	case best.Open >= 10000:
		idle.Known, idle.Met = true, best.RSS < limit
		idle.Got = fmt.Sprintf("%s with %d open (%s per stream)", mib(best.RSS), best.Open, kib(best.PerStream()))
	case best.Open > 0:
		est := best.RSSBefore + best.PerStream()*10000
		idle.Known, idle.Met = true, est < limit
		idle.Got = fmt.Sprintf("%s extrapolated from %d open streams (%s per stream)", mib(est), best.Open, kib(best.PerStream()))
		if best.Open < best.Want {
			idle.Got += fmt.Sprintf("; only %d of %d could open", best.Open, best.Want)
		}
		best.RSS = est
	}
	if idle.Known && !idle.Met {
		idle.Miss = fmt.Sprintf("%s over", mib(best.RSS-limit))
	}
	ts = append(ts, idle)

	d := Target{Name: "distributed added TTFT within 2× of single process", Known: okS && okD, Got: noModel}
	if d.Known {
		s50, d50 := single.AddedP50(), dist.AddedP50()
		ratio := Ratio(float64(d50), float64(max(s50, time.Microsecond)))
		d.Met = d50 <= 2*s50
		d.Got = fmt.Sprintf("p50 added %s vs %s (%.2f×); p99 added %s vs %s", ms(d50), ms(s50), ratio, ms(dist.AddedP99()), ms(single.AddedP99()))
		if !d.Met {
			d.Miss = fmt.Sprintf("%.2f× instead of ≤ 2×", ratio)
		}
	}
	ts = append(ts, d)
	return ts
}

func ratioText(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.2f", x)
}

// Table renders the rows as a Markdown table.
func (r *Report) Table() string {
	var b strings.Builder
	b.WriteString("| measurement | server | baseline | ratio | note |\n| --- | ---: | ---: | ---: | --- |\n")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", row.Metric, row.Server, row.Baseline, ratioText(row.Ratio), row.Note)
	}
	return b.String()
}

// TargetsTable renders the targets as a Markdown table.
func (r *Report) TargetsTable() string {
	var b strings.Builder
	b.WriteString("| target | result | met | missed by |\n| --- | --- | --- | --- |\n")
	for _, t := range r.Targets {
		met := "no"
		switch {
		case !t.Known:
			met = "n/a"
		case t.Met:
			met = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t.Name, t.Got, met, t.Miss)
	}
	return b.String()
}

// Machine describes the host: CPU model and count, memory, kernel, Go.
func Machine() string {
	cpu := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	mem := ""
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(data), "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf(", %.0f GiB", float64(kb)/(1<<20))
		}
	}
	kernel, _ := exec.Command("uname", "-sr").Output()
	return fmt.Sprintf("%d × %s%s, %s, %s", runtime.NumCPU(), cpu, mem, strings.TrimSpace(string(kernel)), runtime.Version())
}

// Markdown is the docs section of the run: machine, date, command, the
// tables and the plot.
func (r *Report) Markdown(command, svgName string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Machine: %s. Date: %s. Command: `%s` (took %s; open-files limit %d).\n\n",
		Machine(), r.Started.UTC().Format("2006-01-02 15:04 MST"), command, r.Took.Round(time.Second), r.NoFile)
	if !r.ModelPath {
		b.WriteString("The turn runner answered in echo mode (the agent path was not wired when this ran), so the model-path rows are missing.\n\n")
	}
	b.WriteString("Every ratio is server ÷ baseline, both measured in the same run by the same client on loopback " +
		"(above 1 is slower for times, below 1 is slower for rates).\n\n")
	b.WriteString(r.Table())
	b.WriteString("\n### Targets (issue 6 §3)\n\n")
	b.WriteString(r.TargetsTable())
	if svgName != "" && len(r.Curve) > 0 {
		fmt.Fprintf(&b, "\n![added inter-token delay against open streams](%s)\n", svgName)
	}
	return b.String()
}
