package benchsuite

import (
	"math"
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
	rep := &Report{
		TTFT: []TTFTResult{
			{Topology: Single, Server: Summary{P50: 3 * time.Millisecond, P99: 4 * time.Millisecond}, Direct: Summary{P50: time.Millisecond, P99: 2 * time.Millisecond}},
			{Topology: Distributed, Server: Summary{P50: 6 * time.Millisecond, P99: 9 * time.Millisecond}, Direct: Summary{P50: time.Millisecond, P99: 2 * time.Millisecond}},
		},
		AggEventsPerSec: 40000,
		Idle:            []IdlePoint{{Want: 1000, Open: 256, RSSBefore: 20 << 20, RSS: 20<<20 + 256*100<<10}},
	}
	ts := checkTargets(rep)
	if len(ts) != 5 {
		t.Fatalf("%d targets, want the five of issue 6 §3", len(ts))
	}
	p50 := ts[0]
	if !p50.Known || p50.Met || !strings.Contains(p50.Miss, "+1.000 ms over") {
		t.Errorf("TTFT p50 added 2 ms vs 1 ms: %+v", p50)
	}
	agg := ts[2]
	if agg.Met || !strings.Contains(agg.Miss, "60000 events/s short") {
		t.Errorf("aggregate 40k: %+v", agg)
	}
	idle := ts[3]
	// 20 MiB + 10,000 × 100 KiB ≈ 996.6 MiB, extrapolated from 256 streams.
	if idle.Met || !strings.Contains(idle.Got, "extrapolated from 256") || !strings.Contains(idle.Got, "only 256 of 1000") {
		t.Errorf("idle: %+v", idle)
	}
	dist := ts[4]
	if dist.Met || !strings.Contains(dist.Miss, "2.50×") {
		t.Errorf("distributed 5 ms vs 2 ms added: %+v", dist)
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
