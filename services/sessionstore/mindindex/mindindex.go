// Package mindindex is the in-process search index of one mind: a BM25
// inverted index over the frames' text, their embedding vectors, and the
// reciprocal-rank fusion of the two rankings (docs/memory.md).
//
// Vectors are kept normalised and quantised to int8 (a quarter of float32's
// memory) with a sign-bit signature each. Up to ExactLimit documents every
// vector is scored; past it the signatures' Hamming distance picks the
// closest candidates, which are then scored on the int8 vectors — the usual
// binary-quantisation-with-rescoring scheme, so a 100,000-frame mind is
// searched in a few milliseconds.
package mindindex

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"unicode"
)

// Ranking constants.
const (
	// RRFK is the k of reciprocal-rank fusion: score = Σ 1/(k + rank).
	RRFK = 60
	// Depth is how many hits of each ranking take part in the fusion.
	Depth = 50
	// ExactLimit is the largest index whose vectors are all scored.
	ExactLimit = 4096
	// Rescore is how many signature candidates are scored exactly (at
	// least; 20 per requested hit when more).
	Rescore = 400
	// MinSimilarity is the cosine a vector hit needs: below it a frame is
	// unrelated, and without a floor every query would "find" the
	// nearest frames of any mind.
	MinSimilarity = 0.25

	bm25K1 = 1.2
	bm25B  = 0.75
)

// Index is one mind's index. It is safe for concurrent use.
type Index struct {
	mu       sync.RWMutex
	docs     []doc
	byID     map[string]int32
	postings map[string][]posting
	live     int
	totalLen int
	vectors  int

	// Vectors live in flat arenas indexed by document slot, so a scan
	// reads memory in order: vecs[n*dims:], sigs[n*words:], and scales[n]
	// (vecs[i]*scale is the normalised component; 0: no vector).
	dims, words int
	vecs        []int8
	sigs        []uint64
	scales      []float32
}

type doc struct {
	id    string
	alive bool
	len   int32
	time  int64
}

type posting struct {
	doc int32
	tf  int32
}

// New returns an empty index.
func New() *Index {
	return &Index{byID: map[string]int32{}, postings: map[string][]posting{}}
}

// Len is the number of documents.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.live
}

// Vectors is the number of documents with a vector.
func (x *Index) Vectors() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.vectors
}

// Put adds or replaces a document: its id, searchable text, time (for
// filters and ties: larger is newer) and vector (nil: none yet).
func (x *Index) Put(id, text string, time int64, vec []float32) {
	terms := Tokens(text)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.remove(id)
	n := int32(len(x.docs))
	x.docs = append(x.docs, doc{id: id, alive: true, len: int32(len(terms)), time: time})
	x.grow()
	x.setVec(n, vec)
	x.byID[id] = n
	x.live++
	x.totalLen += len(terms)
	tf := map[string]int32{}
	for _, t := range terms {
		tf[t]++
	}
	for t, c := range tf {
		x.postings[t] = append(x.postings[t], posting{doc: n, tf: c})
	}
}

// SetVector sets (nil: clears) the vector of an existing document.
func (x *Index) SetVector(id string, vec []float32) {
	x.mu.Lock()
	defer x.mu.Unlock()
	n, ok := x.byID[id]
	if !ok {
		return
	}
	x.setVec(n, vec)
}

// ClearVectors drops every vector (the embedding model changed).
func (x *Index) ClearVectors() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.vectors, x.dims, x.words = 0, 0, 0
	x.vecs, x.sigs, x.scales = nil, nil, nil
}

// Delete removes a document.
func (x *Index) Delete(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.remove(id)
}

func (x *Index) remove(id string) {
	n, ok := x.byID[id]
	if !ok {
		return
	}
	d := &x.docs[n]
	x.setVec(n, nil)
	d.alive = false
	x.live--
	x.totalLen -= int(d.len)
	delete(x.byID, id)
	// Postings of dead documents are skipped at query time and dropped
	// when they outnumber the live ones.
	if len(x.docs) > 1024 && x.live < len(x.docs)/2 {
		x.compact()
	}
}

// compact renumbers the live documents and rebuilds the postings.
func (x *Index) compact() {
	remap := make([]int32, len(x.docs))
	docs := make([]doc, 0, x.live)
	for i, d := range x.docs {
		remap[i] = -1
		if d.alive {
			m := len(docs)
			remap[i] = int32(m)
			x.byID[d.id] = int32(m)
			docs = append(docs, d)
			if x.dims > 0 {
				copy(x.vecs[m*x.dims:(m+1)*x.dims], x.vecs[i*x.dims:(i+1)*x.dims])
				copy(x.sigs[m*x.words:(m+1)*x.words], x.sigs[i*x.words:(i+1)*x.words])
				x.scales[m] = x.scales[i]
			}
		}
	}
	if x.dims > 0 {
		x.vecs, x.sigs, x.scales = x.vecs[:len(docs)*x.dims], x.sigs[:len(docs)*x.words], x.scales[:len(docs)]
	}
	for t, ps := range x.postings {
		out := ps[:0]
		for _, p := range ps {
			if r := remap[p.doc]; r >= 0 {
				out = append(out, posting{doc: r, tf: p.tf})
			}
		}
		if len(out) == 0 {
			delete(x.postings, t)
		} else {
			x.postings[t] = out
		}
	}
	x.docs = docs
}

// grow extends the vector arenas to every slot.
func (x *Index) grow() {
	if x.dims == 0 {
		return
	}
	n := len(x.docs)
	for len(x.scales) < n {
		x.scales = append(x.scales, 0)
	}
	if need := n * x.dims; len(x.vecs) < need {
		x.vecs = append(x.vecs, make([]int8, need-len(x.vecs))...)
	}
	if need := n * x.words; len(x.sigs) < need {
		x.sigs = append(x.sigs, make([]uint64, need-len(x.sigs))...)
	}
}

func (x *Index) setVec(n int32, vec []float32) {
	if x.dims > 0 && x.scales[n] != 0 {
		x.vectors--
		x.scales[n] = 0
	}
	if len(vec) == 0 {
		return
	}
	if x.vectors == 0 && x.dims != len(vec) {
		x.dims, x.words = len(vec), (len(vec)+63)/64
		x.vecs, x.sigs, x.scales = nil, nil, nil
		x.grow()
	}
	if len(vec) != x.dims {
		return // another model's vector: not comparable
	}
	scale, ok := quantise(vec, x.vecs[int(n)*x.dims:(int(n)+1)*x.dims])
	if !ok {
		return
	}
	sig := x.sigs[int(n)*x.words : (int(n)+1)*x.words]
	clear(sig)
	for i, f := range vec {
		if f > 0 {
			sig[i/64] |= 1 << (i % 64)
		}
	}
	x.scales[n] = scale
	x.vectors++
}

// quantise normalises v into q (len(v) int8s) and returns the scale.
func quantise(v []float32, q []int8) (float32, bool) {
	var norm, maxAbs float64
	for _, f := range v {
		norm += float64(f) * float64(f)
		maxAbs = max(maxAbs, math.Abs(float64(f)))
	}
	if norm == 0 {
		return 0, false
	}
	norm = math.Sqrt(norm)
	maxAbs /= norm
	for i, f := range v {
		q[i] = int8(math.Round(float64(f) / norm / maxAbs * 127))
	}
	return float32(maxAbs / 127), true
}

// Query is one search.
type Query struct {
	// Text is ranked with BM25; Vector (nil: none) by cosine similarity.
	Text   string
	Vector []float32
	// Limit is the number of hits wanted (default 10).
	Limit int
	// Since and Until bound the documents' times (0: unbounded).
	Since, Until int64
}

// Hit is one result.
type Hit struct {
	ID string
	// Score is the fused score; KeywordRank and VectorRank are the
	// document's 1-based place in each ranking (0: not in it).
	Score       float64
	KeywordRank int
	VectorRank  int
	Similarity  float64
	time        int64
}

type ranked struct {
	doc   int32
	score float64
}

// Search ranks the documents against q: BM25 and vector rankings fused
// with RRF, ties to the newer document.
func (x *Index) Search(q Query) []Hit {
	limit := q.Limit
	if limit <= 0 {
		limit = 10
	}
	depth := max(Depth, limit)
	x.mu.RLock()
	defer x.mu.RUnlock()
	kw := x.keyword(Tokens(q.Text), q, depth)
	vec := x.vector(q.Vector, q, depth, limit)
	hits := map[int32]*Hit{}
	get := func(n int32) *Hit {
		h := hits[n]
		if h == nil {
			h = &Hit{ID: x.docs[n].id, time: x.docs[n].time}
			hits[n] = h
		}
		return h
	}
	for i, r := range kw {
		h := get(r.doc)
		h.KeywordRank = i + 1
		h.Score += 1 / float64(RRFK+i+1)
	}
	for i, r := range vec {
		h := get(r.doc)
		h.VectorRank = i + 1
		h.Similarity = r.score
		h.Score += 1 / float64(RRFK+i+1)
	}
	out := make([]Hit, 0, len(hits))
	for _, h := range hits {
		out = append(out, *h)
	}
	slices.SortFunc(out, func(a, b Hit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		if c := cmp.Compare(b.time, a.time); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out[:min(limit, len(out))]
}

func (x *Index) inRange(d *doc, q Query) bool {
	return d.alive && (q.Since == 0 || d.time >= q.Since) && (q.Until == 0 || d.time <= q.Until)
}

var scorePool = sync.Pool{New: func() any { return new(scores) }}

type scores struct {
	acc     []float64
	touched []int32
}

// keyword is the BM25 ranking, best first, at most depth long.
func (x *Index) keyword(terms []string, q Query, depth int) []ranked {
	if len(terms) == 0 || x.live == 0 {
		return nil
	}
	sc := scorePool.Get().(*scores)
	defer scorePool.Put(sc)
	if cap(sc.acc) < len(x.docs) {
		sc.acc = make([]float64, len(x.docs))
	}
	acc := sc.acc[:len(x.docs)]
	sc.touched = sc.touched[:0]
	avg := float64(x.totalLen) / float64(x.live)
	n := float64(x.live)
	seen := map[string]bool{}
	for _, t := range terms {
		if seen[t] {
			continue
		}
		seen[t] = true
		ps := x.postings[t]
		if len(ps) == 0 {
			continue
		}
		df := float64(len(ps))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for _, p := range ps {
			d := &x.docs[p.doc]
			if !d.alive {
				continue
			}
			tf := float64(p.tf)
			s := idf * tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*float64(d.len)/avg))
			if acc[p.doc] == 0 {
				sc.touched = append(sc.touched, p.doc)
			}
			acc[p.doc] += s
		}
	}
	top := newTop(depth)
	for _, i := range sc.touched {
		s := acc[i]
		acc[i] = 0
		if x.inRange(&x.docs[i], q) {
			top.push(ranked{i, s}, x.docs[i].time)
		}
	}
	return top.sorted()
}

// vector is the cosine ranking above MinSimilarity, best first.
func (x *Index) vector(v []float32, q Query, depth, limit int) []ranked {
	if len(v) == 0 || x.vectors == 0 || len(v) != x.dims {
		return nil
	}
	qv := make([]int8, len(v))
	qscale, ok := quantise(v, qv)
	if !ok {
		return nil
	}
	bounded := q.Since != 0 || q.Until != 0
	top := newTop(depth)
	score := func(i int) {
		if x.scales[i] == 0 || bounded && !x.inRange(&x.docs[i], q) {
			return
		}
		s := float64(dotInt8(qv, x.vecs[i*x.dims:(i+1)*x.dims])) * float64(qscale) * float64(x.scales[i])
		if s >= MinSimilarity {
			top.push(ranked{int32(i), s}, x.docs[i].time)
		}
	}
	if x.vectors <= ExactLimit {
		for i := range x.docs {
			score(i)
		}
		return top.sorted()
	}
	// Signature pass: the Hamming distance of every signature, then the
	// candidates up to the distance that admits want of them (a counting
	// selection: no heap, two sequential passes).
	qsig := make([]uint64, x.words)
	for i, f := range v {
		if f > 0 {
			qsig[i/64] |= 1 << (i % 64)
		}
	}
	want := max(Rescore, 20*limit)
	words := x.words
	hams := make([]uint16, len(x.docs))
	hist := make([]int, x.dims+2)
	const none = math.MaxUint16
	for i := range x.docs {
		if x.scales[i] == 0 || bounded && !x.inRange(&x.docs[i], q) {
			hams[i] = none
			continue
		}
		sig := x.sigs[i*words : (i+1)*words]
		ham := 0
		for w, b := range sig {
			ham += bits.OnesCount64(b ^ qsig[w])
		}
		hams[i] = uint16(ham)
		hist[ham]++
	}
	cut, n := 0, 0
	for cut < len(hist) && n < want {
		n += hist[cut]
		cut++
	}
	for i, h := range hams {
		if int(h) < cut {
			score(i)
		}
	}
	return top.sorted()
}

func dotInt8(a, b []int8) int32 {
	var s0, s1, s2, s3 int32
	n := min(len(a), len(b))
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += int32(a[i]) * int32(b[i])
		s1 += int32(a[i+1]) * int32(b[i+1])
		s2 += int32(a[i+2]) * int32(b[i+2])
		s3 += int32(a[i+3]) * int32(b[i+3])
	}
	for ; i < n; i++ {
		s0 += int32(a[i]) * int32(b[i])
	}
	return s0 + s1 + s2 + s3
}

// top keeps the k best ranked items (a min-heap on score, then time).
type top struct {
	k     int
	items []ranked
	times []int64
}

func newTop(k int) *top { return &top{k: k} }

func (t *top) less(i, j int) bool {
	if t.items[i].score != t.items[j].score {
		return t.items[i].score < t.items[j].score
	}
	return t.times[i] < t.times[j]
}

func (t *top) swap(i, j int) {
	t.items[i], t.items[j] = t.items[j], t.items[i]
	t.times[i], t.times[j] = t.times[j], t.times[i]
}

func (t *top) push(r ranked, time int64) {
	if len(t.items) < t.k {
		t.items = append(t.items, r)
		t.times = append(t.times, time)
		for i := len(t.items) - 1; i > 0; {
			p := (i - 1) / 2
			if !t.less(i, p) {
				break
			}
			t.swap(i, p)
			i = p
		}
		return
	}
	if r.score < t.items[0].score || r.score == t.items[0].score && time <= t.times[0] {
		return
	}
	t.items[0], t.times[0] = r, time
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < len(t.items) && t.less(l, m) {
			m = l
		}
		if l+1 < len(t.items) && t.less(l+1, m) {
			m = l + 1
		}
		if m == i {
			break
		}
		t.swap(i, m)
		i = m
	}
}

// sorted returns the items best first.
func (t *top) sorted() []ranked {
	idx := make([]int, len(t.items))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		if c := cmp.Compare(t.items[b].score, t.items[a].score); c != 0 {
			return c
		}
		return cmp.Compare(t.times[b], t.times[a])
	})
	out := make([]ranked, len(idx))
	for i, j := range idx {
		out[i] = t.items[j]
	}
	return out
}

// stopwords are dropped from documents and queries: they match nearly
// every frame and only add noise to BM25.
var stopwords = map[string]bool{}

func init() {
	for w := range strings.FieldsSeq("a an and are as at be but by do does for from had has have i in is it its me my of on or our so that the their them then there these this to was we were what when where which who will with you your") {
		stopwords[w] = true
	}
}

// Tokens splits text into index terms: lower-cased runs of letters and
// digits, stopwords dropped, a plural "s" folded ("preferences" and
// "preference" are one term).
func Tokens(text string) []string {
	var out []string
	for f := range strings.FieldsFuncSeq(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		// Single letters ("s" of "Alice's") and stopwords only add noise.
		if stopwords[f] || len(f) == 1 && !unicode.IsDigit(rune(f[0])) {
			continue
		}
		if len(f) > 3 && strings.HasSuffix(f, "s") && !strings.HasSuffix(f, "ss") {
			f = f[:len(f)-1]
		}
		out = append(out, f)
	}
	return out
}

// Fuse is reciprocal-rank fusion of rankings given as ids, best first:
// each id scores Σ 1/(RRFK + rank). Stores that rank keywords elsewhere
// (PostgreSQL full-text) fuse with it.
func Fuse(rankings ...[]string) map[string]float64 {
	out := map[string]float64{}
	for _, r := range rankings {
		for i, id := range r {
			out[id] += 1 / float64(RRFK+i+1)
		}
	}
	return out
}

// IDs are the ids of hits, in order.
func IDs(hits []Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}
