package mindindex

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestTokens(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"The deploy window is Friday 4pm", []string{"deploy", "window", "friday", "4pm"}},
		{"Alice's preferences: tabs, glass", []string{"alice", "preference", "tab", "glass"}},
		{"a b 7 ÜBER-größe", []string{"7", "über", "größe"}},
		{"", nil},
	} {
		if got := Tokens(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Tokens(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func ids(hits []Hit) []string { return IDs(hits) }

func TestKeywordRanking(t *testing.T) {
	x := New()
	x.Put("short", "billing service", 1, nil)
	x.Put("long", "billing needs approval from the finance team before every release", 2, nil)
	x.Put("twice", "billing billing and more billing words here", 3, nil)
	x.Put("other", "lunch at noon", 4, nil)
	if got := ids(x.Search(Query{Text: "billing"})); !slices.Equal(got, []string{"twice", "short", "long"}) {
		t.Errorf("billing = %v", got)
	}
	// A rarer term weighs more than a common one.
	if got := ids(x.Search(Query{Text: "billing approval", Limit: 1})); !slices.Equal(got, []string{"long"}) {
		t.Errorf("billing approval = %v", got)
	}
	if got := ids(x.Search(Query{Text: "billing", Since: 2, Until: 2})); !slices.Equal(got, []string{"long"}) {
		t.Errorf("time bounds = %v", got)
	}
	x.Put("short", "lunch menu", 5, nil) // replaced
	x.Delete("twice")
	if got := ids(x.Search(Query{Text: "billing"})); !slices.Equal(got, []string{"long"}) {
		t.Errorf("after replace and delete = %v", got)
	}
	if x.Len() != 3 {
		t.Errorf("Len = %d", x.Len())
	}
}

func TestFusion(t *testing.T) {
	x := New()
	// kw: keyword rank 1, vector rank 2; vec: vector rank 1 only.
	x.Put("kw", "project falcon ships in march", 1, []float32{0.8, 0.6, 0})
	x.Put("vec", "peregrines are fast", 2, []float32{1, 0, 0})
	x.Put("far", "lunch", 3, []float32{0, 0, 1})
	hits := x.Search(Query{Text: "falcon", Vector: []float32{1, 0, 0}})
	if got := ids(hits); !slices.Equal(got, []string{"kw", "vec"}) {
		t.Fatalf("fused = %v", got)
	}
	want := 1/float64(RRFK+1) + 1/float64(RRFK+2)
	if h := hits[0]; math.Abs(h.Score-want) > 1e-12 || h.KeywordRank != 1 || h.VectorRank != 2 {
		t.Errorf("kw hit = %+v, want score %v", h, want)
	}
	// Below MinSimilarity is not a hit.
	if got := ids(x.Search(Query{Vector: []float32{0, 1, 0.01}})); !slices.Equal(got, []string{"kw"}) {
		t.Errorf("similarity floor = %v", got)
	}
	// Another model's dimensions are ignored, not mixed in.
	x.SetVector("far", []float32{1, 2})
	if x.Vectors() != 2 {
		t.Errorf("vectors = %d", x.Vectors())
	}
	x.ClearVectors()
	if got := ids(x.Search(Query{Vector: []float32{1, 0, 0}})); len(got) != 0 {
		t.Errorf("after clear = %v", got)
	}
	if f := Fuse([]string{"a", "b"}, []string{"b"}); f["b"] <= f["a"] {
		t.Errorf("Fuse = %v", f)
	}
}

func TestCompaction(t *testing.T) {
	x := New()
	for i := range 3000 {
		x.Put(fmt.Sprint(i), fmt.Sprintf("note number%d common", i), int64(i), []float32{1, float32(i)})
	}
	for i := range 2500 {
		x.Delete(fmt.Sprint(i))
	}
	if x.Len() != 500 || len(x.docs) >= 3000 {
		t.Fatalf("len %d, slots %d", x.Len(), len(x.docs))
	}
	if got := ids(x.Search(Query{Text: "number2999"})); !slices.Equal(got, []string{"2999"}) {
		t.Errorf("after compaction = %v", got)
	}
	if got := x.Search(Query{Text: "common", Limit: 1000}); len(got) != 500 {
		t.Errorf("common = %d hits", len(got))
	}
}

// TestSignaturePassFindsTheNearest checks the approximate path (more
// vectors than ExactLimit) against an exact scan on clustered vectors.
func TestSignaturePassFindsTheNearest(t *testing.T) {
	const n, dims = 6000, 128
	rng := rand.New(rand.NewPCG(1, 2))
	centroids := make([][]float32, 64)
	for i := range centroids {
		centroids[i] = randomVec(rng, dims, nil, 0)
	}
	x := New()
	vecs := make([][]float32, n)
	for i := range n {
		vecs[i] = randomVec(rng, dims, centroids[i%len(centroids)], 0.6)
		x.Put(fmt.Sprint(i), "", int64(i), vecs[i])
	}
	agree := 0
	const queries = 100
	for range queries {
		qv := randomVec(rng, dims, vecs[rng.IntN(n)], 0.3)
		best, bestSim := -1, -2.0
		for i, v := range vecs {
			if s := cosine(qv, v); s > bestSim {
				best, bestSim = i, s
			}
		}
		hits := x.Search(Query{Vector: qv, Limit: 1})
		if len(hits) == 1 && hits[0].ID == fmt.Sprint(best) {
			agree++
		}
	}
	if agree < 95 {
		t.Errorf("approximate top-1 agreed with the exact scan %d of %d times", agree, queries)
	}
}

func randomVec(rng *rand.Rand, dims int, around []float32, noise float64) []float32 {
	v := make([]float32, dims)
	for i := range v {
		g := rng.NormFloat64()
		if around != nil {
			g = float64(around[i]) + noise*g/math.Sqrt(float64(dims))*8
		}
		v[i] = float32(g)
	}
	return v
}

func cosine(a, b []float32) float64 {
	var d, na, nb float64
	for i := range a {
		d += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return d / math.Sqrt(na*nb)
}
