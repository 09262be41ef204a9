package telemetry

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the minds' knowledge graph and lifecycle (docs/memory.md).
var (
	// KnowledgeExtractions counts extraction jobs by extractor (rules,
	// model) and outcome (ok, error, dropped: the queue was full).
	KnowledgeExtractions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "waggle_knowledge_extractions_total", Help: "Knowledge extraction jobs by extractor and outcome.",
	}, []string{"extractor", "outcome"})
	// KnowledgeFacts counts entities and relations created by extraction
	// and retired by corrections, by kind and change.
	KnowledgeFacts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "waggle_knowledge_facts_total", Help: "Knowledge graph entities and relations created and retired.",
	}, []string{"kind", "change"})
	// MemoryLifecycle counts the lifecycle worker's changes to frames by
	// step (decay, strengthen, consolidate, distil, daily, undo).
	MemoryLifecycle = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "waggle_memory_lifecycle_total", Help: "Frames changed by the memory lifecycle worker, by step.",
	}, []string{"step"})
)

func init() {
	Registry.MustRegister(KnowledgeExtractions, KnowledgeFacts, MemoryLifecycle)
}
