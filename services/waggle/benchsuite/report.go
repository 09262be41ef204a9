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
	// Target is the row's goal as printed ("added ≤ 0.5 ms"); empty when
	// the row has none.
	Target string
	// Verdict says whether the run met Target.
	Verdict Verdict
	// Got is the value compared with Target when it is not Server (an
	// added time, a ratio).
	Got string
	// Miss says by how much, or why, a target was missed.
	Miss string
}

// Verdict is the outcome of a row's target.
type Verdict int

// Verdicts.
const (
	// NoTarget: the row is for information.
	NoTarget Verdict = iota
	// Met: the target held in this run.
	Met
	// Missed: it did not (Row.Miss says by how much).
	Missed
	// Unmeasured: the run could not measure it (Row.Miss says why).
	Unmeasured
)

// atMost sets the row's target to got ≤ limit; show prints a value.
func (row Row) atMost(target string, got, limit float64, show func(float64) string) Row {
	row.Target, row.Got, row.Verdict = target, show(got), Met
	if math.IsNaN(got) || got > limit {
		row.Verdict = Missed
		row.Miss = fmt.Sprintf("%s over", show(got-limit))
		if limit > 0 && !math.IsNaN(got) {
			row.Miss += fmt.Sprintf(" (%.1f× the limit)", got/limit)
		}
	}
	return row
}

// atLeast sets the row's target to got ≥ limit.
func (row Row) atLeast(target string, got, limit float64, show func(float64) string) Row {
	row.Target, row.Got, row.Verdict = target, show(got), Met
	if math.IsNaN(got) || got < limit {
		row.Verdict = Missed
		row.Miss = fmt.Sprintf("%s short", show(limit-got))
		if limit > 0 && !math.IsNaN(got) {
			row.Miss += fmt.Sprintf(" (%.0f%% of the target)", 100*got/limit)
		}
	}
	return row
}

// missed marks the row's target as missed for a reason that is not a
// number (streams refused, tokens lost).
func (row Row) missed(target, why string) Row {
	row.Target, row.Verdict, row.Miss = target, Missed, why
	return row
}

// unmeasured marks the row's target as not measurable in this run.
func (row Row) unmeasured(target, why string) Row {
	row.Target, row.Verdict, row.Miss = target, Unmeasured, why
	return row
}

// Report is the result of one run.
type Report struct {
	Started time.Time
	Took    time.Duration
	// NoFile is the open-files limit the servers ran with.
	NoFile int
	// ModelPath is true when turns reached the model stub (agent path).
	ModelPath bool

	Rows []Row
	// Failures are the scenarios that could not finish, with their error;
	// each also has a row.
	Failures []string
	TTFT     []TTFTResult
	Curve    []CurvePoint
	Idle     []IdlePoint
	// Profiles are the pprof text summaries written (with -profile).
	Profiles []string
}

func (r *Report) add(row Row) { r.Rows = append(r.Rows, row) }

// fail records that a scenario (or one part of it) could not finish.
func (r *Report) fail(what string, err error) {
	msg := cell(err.Error())
	r.Failures = append(r.Failures, what+": "+msg)
	r.add(Row{Group: "failure", Metric: what, Server: "failed", Baseline: "—", Ratio: math.NaN(), Note: msg})
}

// cell makes text safe for one Markdown table cell.
func cell(s string) string {
	s = strings.NewReplacer("|", "/", "\n", " ", "\r", " ").Replace(s)
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

func ratioText(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.2f", x)
}

func verdictText(v Verdict) string {
	switch v {
	case Met:
		return "met"
	case Missed:
		return "**missed**"
	case Unmeasured:
		return "not measured"
	}
	return ""
}

// Table renders the rows as a Markdown table.
func (r *Report) Table() string {
	var b strings.Builder
	b.WriteString("| measurement | server | baseline | ratio | target | note |\n| --- | ---: | ---: | ---: | --- | --- |\n")
	for _, row := range r.Rows {
		target := ""
		if row.Target != "" {
			target = row.Target + ": " + verdictText(row.Verdict)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", row.Metric, row.Server, row.Baseline, ratioText(row.Ratio), target, row.Note)
	}
	return b.String()
}

// TargetsTable renders every row with a target: what was compared with
// it, whether it held and by how much it was missed.
func (r *Report) TargetsTable() string {
	var b strings.Builder
	b.WriteString("| measurement | target | result | met | missed by |\n| --- | --- | --- | --- | --- |\n")
	for _, row := range r.Rows {
		if row.Target == "" {
			continue
		}
		got := row.Got
		if got == "" {
			got = row.Server
		}
		met := map[Verdict]string{Met: "yes", Missed: "no", Unmeasured: "n/a"}[row.Verdict]
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", row.Metric, row.Target, got, met, row.Miss)
	}
	return b.String()
}

// Counts returns how many targets were met, missed and not measured.
func (r *Report) Counts() (met, missed, unmeasured int) {
	for _, row := range r.Rows {
		switch row.Verdict {
		case Met:
			met++
		case Missed:
			missed++
		case Unmeasured:
			unmeasured++
		}
	}
	return met, missed, unmeasured
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
	met, missed, unmeasured := r.Counts()
	fmt.Fprintf(&b, "\n### Targets (issues 11 and 12): %d met, %d missed, %d not measured\n\n", met, missed, unmeasured)
	b.WriteString(r.TargetsTable())
	if len(r.Failures) > 0 {
		b.WriteString("\n### Scenarios that could not finish\n\n")
		for _, f := range r.Failures {
			fmt.Fprintf(&b, "- %s\n", f)
		}
	}
	if svgName != "" && len(r.Curve) > 0 {
		fmt.Fprintf(&b, "\n![added inter-token delay against open streams](%s)\n", svgName)
	}
	return b.String()
}
