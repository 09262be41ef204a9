package benchsuite

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func ms100(vals ...int) []time.Duration {
	out := make([]time.Duration, len(vals))
	for i, v := range vals {
		out[i] = time.Duration(v) * time.Millisecond
	}
	return out
}

func TestPercentileNearestRank(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond // 1..100 ms
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"single", ms100(7), 99, 7 * time.Millisecond},
		{"p50 of 1..100 is the 50th", hundred, 50, 50 * time.Millisecond},
		{"p99 of 1..100 is the 99th, not the max", hundred, 99, 99 * time.Millisecond},
		{"p100 is the max", hundred, 100, 100 * time.Millisecond},
		{"p0 is the min", hundred, 0, time.Millisecond},
		{"p50 of four rounds up the rank", ms100(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p99 of ten is the max", ms100(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
		{"p90 of ten is the ninth", ms100(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 90, 9 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.sorted, tt.p); got != tt.want {
				t.Fatalf("Percentile(p%v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

func TestSummarizeSortsACopy(t *testing.T) {
	in := ms100(5, 1, 4, 2, 3)
	s := Summarize(in)
	want := Summary{N: 5, P50: 3 * time.Millisecond, P99: 5 * time.Millisecond, Mean: 3 * time.Millisecond, Max: 5 * time.Millisecond}
	if s != want {
		t.Fatalf("Summarize = %+v, want %+v", s, want)
	}
	if in[0] != 5*time.Millisecond {
		t.Fatal("Summarize reordered the caller's samples")
	}
	if (Summarize(nil) != Summary{}) {
		t.Fatal("Summarize(nil) is not the zero Summary")
	}
}

func TestRatioAddedRate(t *testing.T) {
	tests := []struct {
		name        string
		value, base float64
		want        float64
		wantNaN     bool
	}{
		{"twice", 2, 1, 2, false},
		{"half", 50, 100, 0.5, false},
		{"zero baseline", 1, 0, 0, true},
		{"negative baseline", 1, -1, 0, true},
		{"NaN value", math.NaN(), 1, 0, true},
	}
	for _, tt := range tests {
		got := Ratio(tt.value, tt.base)
		if tt.wantNaN != math.IsNaN(got) || (!tt.wantNaN && got != tt.want) {
			t.Errorf("%s: Ratio(%v, %v) = %v", tt.name, tt.value, tt.base, got)
		}
	}
	if got := Added(3*time.Millisecond, time.Millisecond); got != 2*time.Millisecond {
		t.Errorf("Added = %v, want 2ms", got)
	}
	if got := Added(time.Millisecond, 3*time.Millisecond); got != 0 {
		t.Errorf("Added of a faster sample = %v, want 0", got)
	}
	if got := Rate(500, 250*time.Millisecond); got != 2000 {
		t.Errorf("Rate = %v, want 2000/s", got)
	}
	if got := Rate(5, 0); got != 0 {
		t.Errorf("Rate over no time = %v, want 0", got)
	}
}

func TestParseVmRSS(t *testing.T) {
	status := "Name:\twaggle\nVmPeak:\t  999 kB\nVmRSS:\t   20480 kB\nThreads:\t9\n"
	got, err := parseVmRSS([]byte(status))
	if err != nil || got != 20480*1024 {
		t.Fatalf("parseVmRSS = %d, %v; want %d", got, err, 20480*1024)
	}
	if _, err := parseVmRSS([]byte("Name:\tx\n")); err == nil {
		t.Fatal("no VmRSS line accepted")
	}
}

func TestTokenText(t *testing.T) {
	tests := []struct {
		line string
		want int
	}{
		{`{"content":"tok "}`, 4},
		{`{"id":"x","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}`, 4},
		{`{"choices":[{"delta":{"role":"assistant","content":""}}]}`, 0},
		{`{"choices":[{"delta":{},"finish_reason":"stop"}]}`, -1},
	}
	for _, tt := range tests {
		if got := tokenText([]byte(tt.line)); got != tt.want {
			t.Errorf("tokenText(%s) = %d, want %d", tt.line, got, tt.want)
		}
	}
}

func TestTargetsSayByHowMuch(t *testing.T) {
	tests := []struct {
		name        string
		row         Row
		wantVerdict Verdict
		wantMiss    string
	}{
		{"added TTFT over its limit", Row{}.atMost("added ≤ 0.500 ms", float64(2*time.Millisecond), float64(500*time.Microsecond), msF),
			Missed, "1.500 ms over (4.0× the limit)"},
		{"added TTFT within its limit", Row{}.atMost("added ≤ 0.500 ms", float64(400*time.Microsecond), float64(500*time.Microsecond), msF), Met, ""},
		{"at the limit is met", Row{}.atMost("≤ 25.0 MiB", 25<<20, 25<<20, mibF), Met, ""},
		{"a rate short of its target", Row{}.atLeast("≥ 250,000 tokens/s", 62500, 250000, numF), Missed, "187500 short (25% of the target)"},
		{"a ratio above its target", Row{}.atLeast("ratio ≥ 0.4", 0.5, 0.4, ratF), Met, ""},
		{"a NaN ratio is a miss", Row{}.atLeast("ratio ≥ 0.4", math.NaN(), 0.4, ratF), Missed, "NaN short"},
		{"a met number can still miss for lost tokens", Row{}.atLeast("≥ 250,000", 300000, 250000, numF).missed("≥ 250,000", "1 of 3 runs lost tokens"),
			Missed, "1 of 3 runs lost tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.row.Verdict != tt.wantVerdict || tt.row.Miss != tt.wantMiss {
				t.Fatalf("verdict %v miss %q, want %v %q", tt.row.Verdict, tt.row.Miss, tt.wantVerdict, tt.wantMiss)
			}
		})
	}
}

func TestReportPrintsEveryTargetAndFailure(t *testing.T) {
	rep := &Report{}
	rep.add(Row{Metric: "whole turn p50", Server: "4.500 ms", Baseline: "1.000 ms", Ratio: 4.5}.atMost("≤ 2.000 ms", 4.5e6, 2e6, msF))
	rep.add(Row{Metric: "echo turns/s", Server: "900", Baseline: "4000", Ratio: 0.225})
	rep.add(Row{Metric: "RSS, 10000 idle"}.unmeasured("< 300 MB", "only 256 of 10000 open"))
	rep.fail("stalled readers", errors.New("server exited | code 2\nlog x"))
	table, targets := rep.Table(), rep.TargetsTable()
	if !strings.Contains(table, "| ≤ 2.000 ms: **missed** |") || !strings.Contains(table, "| 900 | 4000 | 0.23 |  |") {
		t.Errorf("table:\n%s", table)
	}
	if strings.Contains(targets, "echo turns/s") || !strings.Contains(targets, "| whole turn p50 | ≤ 2.000 ms | 4.500 ms | no | 2.500 ms over (2.2× the limit) |") ||
		!strings.Contains(targets, "| n/a | only 256 of 10000 open |") {
		t.Errorf("targets:\n%s", targets)
	}
	if len(rep.Failures) != 1 || !strings.Contains(table, "| stalled readers | failed |") || strings.Contains(table, "code 2\n") || strings.Contains(table, "exited | code") {
		t.Errorf("failure row not one safe table line:\n%s", table)
	}
	if met, missed, unmeasured := rep.Counts(); met != 0 || missed != 1 || unmeasured != 1 {
		t.Errorf("counts %d/%d/%d, want 0 met, 1 missed, 1 not measured", met, missed, unmeasured)
	}
}

func TestSVGPlotsEveryOpenLevel(t *testing.T) {
	rep := &Report{Curve: []CurvePoint{
		{Want: 1, Open: 1, AddedP50: time.Millisecond, AddedP99: 2 * time.Millisecond, Mode: "model"},
		{Want: 100, Open: 100, AddedP50: 2 * time.Millisecond, AddedP99: 7 * time.Millisecond, Mode: "model"},
		{Want: 1000, Open: 0, Mode: "model"},
	}}
	svg := rep.SVG()
	if !strings.HasPrefix(svg, "<svg") || !strings.HasSuffix(svg, "</svg>\n") {
		t.Fatalf("not an SVG document: %.80s", svg)
	}
	if n := strings.Count(svg, "<circle"); n != 4 {
		t.Errorf("%d points drawn, want 4 (two levels × p50/p99; the level with nothing open is left out)", n)
	}
	if !strings.Contains(svg, "100 streams: 7.000 ms") {
		t.Error("p99 point of 100 streams missing")
	}
	if (&Report{}).SVG() != "" {
		t.Error("an empty curve drew a plot")
	}
}

func TestLogErrorsSumsUpByMessage(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "single.log")
	lines := `{"level":"WARN","msg":"slow"}
{"level":"ERROR","msg":"publish event","err":"nats: stalled with too many outstanding async published messages"}
{"level":"ERROR","msg":"bus: handler failed","err":"timeout"}
{"level":"ERROR","msg":"publish event","err":"nats: stalled"}
`
	if err := os.WriteFile(log, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := &Server{Procs: []*Proc{{Name: "single", log: log}}}
	n, sum := srv.LogErrors()
	want := "3 server log error(s) (2 × publish event, 1 × bus: handler failed); first: publish event: nats: stalled with too many outstanding async published messages"
	if n != 3 || sum != want {
		t.Fatalf("LogErrors = %d, %q; want 3, %q", n, sum, want)
	}
	if n, sum := (&Server{Procs: []*Proc{{log: filepath.Join(dir, "none.log")}}}).LogErrors(); n != 0 || sum != "" {
		t.Fatalf("no log: %d %q", n, sum)
	}
}
