package knowledge_test

import (
	"fmt"
	"testing"

	"github.com/waggle-os/core/services/sessionstore/graph"
	"github.com/waggle-os/core/services/sessionstore/knowledge"
)

// BenchmarkRelated50k is the connected ranking's graph signal on a mind of
// 50,000 entities and as many relations (JSONL, loaded): one read of the
// whole graph per search.
func BenchmarkRelated50k(b *testing.B) {
	backend := graph.NewJSONL(b.TempDir())
	for i := 0; i < 50_000; i += graph.MaxBatch / 2 {
		var batch graph.Batch
		for j := i; j < i+graph.MaxBatch/2 && j < 50_000; j++ {
			batch.Entities = append(batch.Entities, graph.EntityInput{Name: fmt.Sprintf("Entity%05d Name", j), Type: graph.TypeConcept})
			if j > i {
				batch.Relations = append(batch.Relations, graph.RelationInput{From: fmt.Sprintf("Entity%05d Name", j-1), To: fmt.Sprintf("Entity%05d Name", j), Type: graph.RelMentionedWith, Confidence: 0.3})
			}
		}
		if err := graph.Check(&batch); err != nil {
			b.Fatal(err)
		}
		if _, err := backend.Apply(ctx, ws, batch, "2026-01-01T00:00:00.000Z"); err != nil {
			b.Fatal(err)
		}
	}
	k := knowledge.New(knowledge.Config{Backend: backend})
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, _, err := k.Related(ctx, ws, fmt.Sprintf("what about entity%05d name?", i%50_000)); err != nil {
			b.Fatal(err)
		}
	}
}
