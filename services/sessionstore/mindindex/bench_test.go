package mindindex

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The benchmark mind: 100,000 frames of 12–24 words drawn Zipf-like from
// a 30,000-word vocabulary, each with a 1536-dimension vector (the size
// of text-embedding-3-small) near one of 1,000 topic centroids.
const (
	benchFrames = 100_000
	benchDims   = 1536
	benchVocab  = 30_000
	benchTopics = 1000
)

var bench struct {
	once    sync.Once
	x       *Index
	words   []string
	topics  [][]float32
	heapMiB float64
	build   time.Duration
}

func benchIndex(b *testing.B) {
	bench.once.Do(func() {
		rng := rand.New(rand.NewPCG(7, 11))
		bench.words = make([]string, benchVocab)
		for i := range bench.words {
			bench.words[i] = fmt.Sprintf("w%dx", i)
		}
		bench.topics = make([][]float32, benchTopics)
		for i := range bench.topics {
			bench.topics[i] = randomVec(rng, benchDims, nil, 0)
		}
		zipf := rand.NewZipf(rng, 1.1, 2, benchVocab-1)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		x := New()
		var sb strings.Builder
		for i := range benchFrames {
			sb.Reset()
			for range 12 + rng.IntN(13) {
				sb.WriteString(bench.words[zipf.Uint64()])
				sb.WriteByte(' ')
			}
			x.Put(fmt.Sprintf("mem-%06d", i), sb.String(), int64(i), randomVec(rng, benchDims, bench.topics[rng.IntN(benchTopics)], 0.6))
		}
		bench.build = time.Since(start)
		runtime.GC()
		runtime.ReadMemStats(&after)
		bench.x = x
		bench.heapMiB = float64(after.HeapAlloc-before.HeapAlloc) / (1 << 20)
	})
}

// BenchmarkHybridSearch100k is one hybrid query (three words, one
// vector) against the 100,000-frame mind, 10 results; it reports the
// latency percentiles over the run.
func BenchmarkHybridSearch100k(b *testing.B) {
	benchIndex(b)
	rng := rand.New(rand.NewPCG(3, 5))
	type q struct {
		text string
		vec  []float32
	}
	queries := make([]q, 256)
	for i := range queries {
		queries[i] = q{
			text: bench.words[rng.IntN(200)] + " " + bench.words[rng.IntN(5000)] + " " + bench.words[rng.IntN(benchVocab)],
			vec:  randomVec(rng, benchDims, bench.topics[rng.IntN(benchTopics)], 0.6),
		}
	}
	var lat []time.Duration
	i := 0
	for b.Loop() {
		qq := queries[i%len(queries)]
		i++
		t0 := time.Now()
		hits := bench.x.Search(Query{Text: qq.text, Vector: qq.vec, Limit: 10})
		lat = append(lat, time.Since(t0))
		if len(hits) == 0 {
			b.Fatal("no hits")
		}
	}
	reportPercentiles(b, lat)
}

// BenchmarkKeywordSearch100k is the same without a vector (no embedding
// provider).
func BenchmarkKeywordSearch100k(b *testing.B) {
	benchIndex(b)
	rng := rand.New(rand.NewPCG(4, 6))
	var lat []time.Duration
	for b.Loop() {
		text := bench.words[rng.IntN(200)] + " " + bench.words[rng.IntN(5000)] + " " + bench.words[rng.IntN(benchVocab)]
		t0 := time.Now()
		bench.x.Search(Query{Text: text, Limit: 10})
		lat = append(lat, time.Since(t0))
	}
	reportPercentiles(b, lat)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	b.ReportMetric(bench.heapMiB, "index-MiB")
	slices.Sort(lat)
	at := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}
