package benchsuite

import (
	"math"
	"slices"
	"time"
)

// Summary is the distribution of one set of latency samples.
type Summary struct {
	N    int
	P50  time.Duration
	P99  time.Duration
	Mean time.Duration
	Max  time.Duration
}

// Summarize sorts a copy of samples and returns its percentiles; the zero
// Summary for no samples.
func Summarize(samples []time.Duration) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Summary{
		N:    len(s),
		P50:  Percentile(s, 50),
		P99:  Percentile(s, 99),
		Mean: sum / time.Duration(len(s)),
		Max:  s[len(s)-1],
	}
}

// Percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of
// sorted samples: the smallest sample at or below which p percent of the
// samples lie. Nearest rank never invents a value between two samples, so
// a p99 of 100 samples is the 99th, not an interpolation towards the max.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	if p <= 0 {
		return sorted[0]
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// Ratio is value/baseline; NaN when the baseline is not positive (a ratio
// to nothing means nothing, and NaN prints as such instead of +Inf).
func Ratio(value, baseline float64) float64 {
	if baseline <= 0 || math.IsNaN(baseline) || math.IsNaN(value) {
		return math.NaN()
	}
	return value / baseline
}

// Added is what the system under test adds over the baseline, floored at
// zero: noise can make a proxied sample faster than the direct one, and a
// negative overhead would read as a speed-up the server cannot give.
func Added(value, baseline time.Duration) time.Duration {
	return max(value-baseline, 0)
}

// Rate is count events per elapsed time, per second; 0 for no time.
func Rate(count int, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return float64(count) / elapsed.Seconds()
}
