package knowledge_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/frames"
	"github.com/waggle-os/core/services/sessionstore/graph"
	"github.com/waggle-os/core/services/sessionstore/knowledge"
)

// The scale of issue 26: one workspace mind of 100,000 frames and a
// knowledge graph of 50,000 entities and as many relations, in the JSONL
// files a desktop keeps (written directly: a 100,000-save setup would
// take minutes of fsyncs). One frame in ten names an entity.
const (
	scaleFrames   = 100_000
	scaleEntities = 50_000
	scaleVocab    = 30_000
)

var scale struct {
	once  sync.Once
	dir   string
	err   error
	words []string
}

func entityName(i int) string { return fmt.Sprintf("Entity%05d Name", i) }

// scaleMind writes the mind's files once per process.
func scaleMind(b *testing.B) string {
	scale.once.Do(func() {
		scale.dir, scale.err = os.MkdirTemp("", "waggle-kg-bench-")
		if scale.err != nil {
			return
		}
		rng := rand.New(rand.NewPCG(7, 11))
		scale.words = make([]string, scaleVocab)
		for i := range scale.words {
			scale.words[i] = fmt.Sprintf("w%dx", i)
		}
		zipf := rand.NewZipf(rng, 1.1, 2, scaleVocab-1)
		dir := filepath.Join(scale.dir, "workspaces", ws.ID)
		if scale.err = os.MkdirAll(dir, 0o700); scale.err != nil {
			return
		}
		scale.err = writeLines(filepath.Join(dir, frames.File), scaleFrames, func(i int) any {
			var sb strings.Builder
			for range 12 + rng.IntN(13) {
				sb.WriteString(scale.words[zipf.Uint64()])
				sb.WriteByte(' ')
			}
			if i%10 == 0 {
				sb.WriteString(entityName(rng.IntN(scaleEntities)))
			}
			ts := protocol.Timestamp(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute))
			return map[string]any{"id": fmt.Sprintf("mem-%06d", i), "content": sb.String(), "timestamp": ts, "updated": ts,
				"importance": protocol.Importances[i%len(protocol.Importances)], "source": protocol.SourceUserStated, "accessCount": i % 7}
		})
		if scale.err != nil {
			return
		}
		// Entities first, then a chain of relations between neighbours by
		// number (the records of graph.JSONL's log).
		const ts = "2026-01-01T00:00:00.000Z"
		scale.err = writeLines(filepath.Join(dir, graph.File), 2*scaleEntities-1, func(i int) any {
			if i < scaleEntities {
				name := entityName(i)
				return map[string]any{"kind": "entity", "id": fmt.Sprintf("ent-%05d", i), "type": graph.TypeConcept, "name": name,
					"key": graph.Normalize(name), "mentions": 1 + i%13, "validFrom": ts, "recorded": ts}
			}
			j := i - scaleEntities
			return map[string]any{"kind": "relation", "id": fmt.Sprintf("rel-%05d", j), "type": graph.RelMentionedWith,
				"source": fmt.Sprintf("ent-%05d", j), "target": fmt.Sprintf("ent-%05d", j+1), "confidence": 0.3, "mentions": 1,
				"validFrom": ts, "recorded": ts}
		})
	})
	if scale.err != nil {
		b.Fatal(scale.err)
	}
	return scale.dir
}

func writeLines(path string, n int, line func(i int) any) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for i := range n {
		if err := enc.Encode(line(i)); err != nil {
			f.Close()
			return err
		}
	}
	return errors.Join(w.Flush(), f.Close())
}

// BenchmarkConnectedSearch100k is the memory search with the connected
// ranking profile (keywords fused and ranked with importance, recency,
// use and the graph signal) over the 100,000-frame mind and its
// 50,000-entity graph, 10 results, as GET /api/memory/search runs it
// (frames.Minds.Query), loaded; no vectors (the vector part at this scale
// is mindindex's BenchmarkHybridSearch100k). Reports p50/p99.
func BenchmarkConnectedSearch100k(b *testing.B) {
	dir := scaleMind(b)
	k := knowledge.New(knowledge.Config{Backend: graph.NewJSONL(dir)})
	m := frames.New(frames.Config{Backend: frames.NewJSONL(dir), Knowledge: k})
	rng := rand.New(rand.NewPCG(3, 5))
	query := func() string {
		return scale.words[rng.IntN(200)] + " " + scale.words[rng.IntN(5000)] + " " + strings.ToLower(entityName(rng.IntN(scaleEntities)))
	}
	req := protocol.MemoryQueryRequest{MemoryOwner: protocol.MemoryOwner{Workspace: ws.ID}, Scope: protocol.MindWorkspace, Profile: "connected", Limit: 10}
	req.Query = query()
	if _, err := m.Query(ctx, req, 10); err != nil { // loads the mind and its graph
		b.Fatal(err)
	}
	var lat []time.Duration
	for b.Loop() {
		req.Query = query()
		t0 := time.Now()
		hits, err := m.Query(ctx, req, 10)
		lat = append(lat, time.Since(t0))
		if err != nil || len(hits) == 0 {
			b.Fatalf("query %q: %d hits, %v", req.Query, len(hits), err)
		}
	}
	percentiles(b, lat)
}

// BenchmarkGraphPage50k reads GET /api/memory/graph's default-sized
// pages of the 50,000-entity graph (knowledge.Graph, limit 100, JSONL,
// loaded): the most mentioned first, and pages by a name. Reports p50/p99.
func BenchmarkGraphPage50k(b *testing.B) {
	dir := scaleMind(b)
	k := knowledge.New(knowledge.Config{Backend: graph.NewJSONL(dir)})
	owner := protocol.MemoryOwner{Workspace: ws.ID}
	if _, err := k.Graph(ctx, protocol.KnowledgeGraphRequest{MemoryOwner: owner, Limit: 1}); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(4, 6))
	var lat []time.Duration
	i := 0
	for b.Loop() {
		req := protocol.KnowledgeGraphRequest{MemoryOwner: owner, Limit: 100, Offset: 100 * rng.IntN(100)}
		if i%2 == 1 {
			req.Query, req.Offset = fmt.Sprintf("entity%04d", rng.IntN(5000)), 0
		}
		i++
		t0 := time.Now()
		g, err := k.Graph(ctx, req)
		lat = append(lat, time.Since(t0))
		if err != nil || len(g.Entities) == 0 {
			b.Fatalf("graph %+v: %d entities, %v", req, len(g.Entities), err)
		}
	}
	percentiles(b, lat)
}

func percentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	at := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}
