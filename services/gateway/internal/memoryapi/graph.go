package memoryapi

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/forward"
	"github.com/waggle-os/core/services/gateway/internal/input"
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
	// NextOffset is the offset of the next page (absent on the last).
	NextOffset int `json:"nextOffset,omitempty"`
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
	out := graphReply{Entities: make([]graphEntity, 0, len(g.Entities)), Relations: make([]graphRelation, 0, len(g.Relations)), NextOffset: g.NextOffset}
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

// GET /api/memory/graph?workspace=|workspaceId=&scope=all|personal|current&q=&type=&retired=true&limit=&offset=
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
		Retired: q.Get("retired") == "true", Limit: parseLimit(q.Get("limit"), 0), Offset: parseLimit(q.Get("offset"), 0)}
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

// POST /api/memory/graph/:id/retire?workspace= {reason?}: a wrong fact is
// retired (an entity with its relations), as the agent's
// correct_knowledge; the reply is what was retired.
func (a api) retire(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, a.retirement, protocol.CorrectKnowledge, http.StatusOK,
		func(rep protocol.KnowledgeGraph) any { return shapeGraph(rep, false) })
}

func (a api) retirement(w http.ResponseWriter, r *http.Request) (protocol.KnowledgeCorrectRequest, error) {
	id, o, err := factRequest(r)
	if err != nil {
		return protocol.KnowledgeCorrectRequest{}, err
	}
	f, err := input.Decode(w, r, a.d.BodyLimit)
	if err != nil {
		return protocol.KnowledgeCorrectRequest{}, err
	}
	reason, _, err := f.OptString("reason")
	return protocol.KnowledgeCorrectRequest{MemoryOwner: o, ID: id, Reason: reason}, err
}

// POST /api/memory/graph/:id/restore?workspace=: a retirement undone (an
// entity with the relations retired with it); the reply is what is valid
// again.
func (a api) restore(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, func(_ http.ResponseWriter, r *http.Request) (protocol.KnowledgeRestoreRequest, error) {
		id, o, err := factRequest(r)
		return protocol.KnowledgeRestoreRequest{MemoryOwner: o, ID: id}, err
	}, protocol.RestoreKnowledge, http.StatusOK, func(rep protocol.KnowledgeGraph) any { return shapeGraph(rep, false) })
}

// factRequest reads an entity's or relation's id from the path and the
// minds the request reaches.
func factRequest(r *http.Request) (string, protocol.MemoryOwner, error) {
	id := chi.URLParam(r, "id")
	if !protocol.ValidID(id) {
		return "", protocol.MemoryOwner{}, protocol.Errorf(protocol.Invalid, "Invalid entity or relation ID")
	}
	o, err := owner(r)
	return id, o, err
}
