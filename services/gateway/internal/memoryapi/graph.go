package memoryapi

import (
	"net/http"
	"strings"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/forward"
)

// graphEntity is one entity as the original's graph route returns its
// rows (id, name, entity_type, properties, valid_from, valid_to,
// recorded_at), with the web client's node fields (label, type) beside
// them.
type graphEntity struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	EntityType string            `json:"entity_type"`
	Label      string            `json:"label"`
	Type       string            `json:"type"`
	Properties map[string]string `json:"properties"`
	Mentions   int               `json:"mentions"`
	ValidFrom  string            `json:"valid_from"`
	ValidTo    *string           `json:"valid_to"`
	RecordedAt string            `json:"recorded_at"`
	Mind       string            `json:"mind"`
	Source     string            `json:"_source,omitempty"`
}

// graphRelation is one relation as the original's rows (source_id,
// target_id, relation_type, confidence, ...), with the web client's edge
// fields (source, target, relationship) beside them.
type graphRelation struct {
	ID           string            `json:"id"`
	SourceID     string            `json:"source_id"`
	TargetID     string            `json:"target_id"`
	RelationType string            `json:"relation_type"`
	From         string            `json:"source"`
	To           string            `json:"target"`
	Relationship string            `json:"relationship"`
	Confidence   float64           `json:"confidence"`
	Properties   map[string]string `json:"properties"`
	Mentions     int               `json:"mentions"`
	ValidFrom    string            `json:"valid_from"`
	ValidTo      *string           `json:"valid_to"`
	RecordedAt   string            `json:"recorded_at"`
	Mind         string            `json:"mind"`
	Source       string            `json:"_source,omitempty"`
}

type graphReply struct {
	Entities  []graphEntity   `json:"entities"`
	Relations []graphRelation `json:"relations"`
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func orEmpty(p map[string]string) map[string]string {
	if p == nil {
		return map[string]string{}
	}
	return p
}

// shapeGraph is the reply of GET /api/memory/graph; all marks each fact
// with the mind it came from (_source), as the original's scope=all.
func shapeGraph(g protocol.KnowledgeGraph, all bool) graphReply {
	out := graphReply{Entities: make([]graphEntity, 0, len(g.Entities)), Relations: make([]graphRelation, 0, len(g.Relations))}
	src := func(mind string) string {
		if all {
			return mind
		}
		return ""
	}
	for _, e := range g.Entities {
		out.Entities = append(out.Entities, graphEntity{ID: e.ID, Name: e.Name, EntityType: e.Type, Label: e.Name, Type: e.Type,
			Properties: orEmpty(e.Properties), Mentions: e.Mentions, ValidFrom: e.ValidFrom, ValidTo: orNull(e.ValidTo),
			RecordedAt: e.Recorded, Mind: e.Mind, Source: src(e.Mind)})
	}
	for _, r := range g.Relations {
		out.Relations = append(out.Relations, graphRelation{ID: r.ID, SourceID: r.Source, TargetID: r.Target, RelationType: r.Type,
			From: r.Source, To: r.Target, Relationship: r.Type, Confidence: r.Confidence, Properties: orEmpty(r.Properties),
			Mentions: r.Mentions, ValidFrom: r.ValidFrom, ValidTo: orNull(r.ValidTo), RecordedAt: r.Recorded, Mind: r.Mind, Source: src(r.Mind)})
	}
	return out
}

// GET /api/memory/graph?workspace=|workspaceId=&scope=all|personal|current&q=&type=&retired=true&limit=
func (a api) graph(w http.ResponseWriter, r *http.Request) {
	all := r.URL.Query().Get("scope") == protocol.KnowledgeScopeAll
	forward.Serve(a.d, w, r, graphQuery, protocol.GetKnowledgeGraph, http.StatusOK,
		func(rep protocol.KnowledgeGraph) any { return shapeGraph(rep, all) })
}

func graphQuery(_ http.ResponseWriter, r *http.Request) (protocol.KnowledgeGraphRequest, error) {
	o, err := owner(r)
	if err != nil {
		return protocol.KnowledgeGraphRequest{}, err
	}
	q := r.URL.Query()
	req := protocol.KnowledgeGraphRequest{MemoryOwner: o, Query: strings.TrimSpace(q.Get("q")), Type: q.Get("type"),
		Retired: q.Get("retired") == "true", Limit: parseLimit(q.Get("limit"), 0)}
	switch q.Get("scope") {
	case protocol.KnowledgeScopeAll:
		req.Scope = protocol.KnowledgeScopeAll
	case protocol.MindPersonal:
		req.Scope = protocol.MindPersonal
	}
	// Anything else (current, none) is the workspace's mind when one is
	// named, else the personal mind, as the original.
	return req, nil
}
