package protocol

// Knowledge graph scopes of KnowledgeGraphRequest.Scope.
const (
	KnowledgeScopeAll = "all"
)

// KnowledgeGraphRequest reads the knowledge graph of the minds an owner
// reaches: Scope personal (the personal mind), workspace (the workspace
// mind) or all (both); empty is the workspace mind when Workspace is set,
// else the personal mind. Query keeps the entities whose name contains it
// (and their neighbours); Type keeps one entity type; Retired includes
// retired facts; Limit bounds the entities of each mind, the most
// mentioned first, from the Offset-th on (the relations with them: at
// most 4 per entity of Limit).
type KnowledgeGraphRequest struct {
	MemoryOwner
	Scope   string `json:"scope,omitempty"`
	Query   string `json:"query,omitempty"`
	Type    string `json:"type,omitempty"`
	Retired bool   `json:"retired,omitempty"`
	Limit   int    `json:"limit,omitempty"`
	Offset  int    `json:"offset,omitempty"`
}

// KnowledgeEntity is one entity of a mind's graph.
type KnowledgeEntity struct {
	ID         string            `json:"id"`
	Type       string            `json:"type"`
	Name       string            `json:"name"`
	Properties map[string]string `json:"properties,omitempty"`
	Mentions   int               `json:"mentions"`
	// ValidFrom and ValidTo bound when the fact held (ValidTo empty while
	// it holds); Recorded is when it was stored.
	ValidFrom string `json:"validFrom"`
	ValidTo   string `json:"validTo,omitempty"`
	Recorded  string `json:"recorded"`
	// Mind is MindPersonal or MindWorkspace.
	Mind string `json:"mind"`
}

// KnowledgeRelation is one typed, directed relation between two entities
// of the same mind.
type KnowledgeRelation struct {
	ID         string            `json:"id"`
	Source     string            `json:"source"`
	Target     string            `json:"target"`
	Type       string            `json:"type"`
	Confidence float64           `json:"confidence"`
	Properties map[string]string `json:"properties,omitempty"`
	Mentions   int               `json:"mentions"`
	ValidFrom  string            `json:"validFrom"`
	ValidTo    string            `json:"validTo,omitempty"`
	Recorded   string            `json:"recorded"`
	Mind       string            `json:"mind"`
}

// KnowledgeGraph answers KnowledgeGraphRequest, KnowledgeCorrectRequest
// (then: what was retired) and KnowledgeRestoreRequest (what is valid
// again).
type KnowledgeGraph struct {
	Entities  []KnowledgeEntity   `json:"entities"`
	Relations []KnowledgeRelation `json:"relations"`
	// NextOffset, when not 0, is the Offset of the next page: a mind had
	// more entities than Limit.
	NextOffset int `json:"nextOffset,omitempty"`
}

// KnowledgeRestoreRequest undoes a correction: the retired entity (with
// the relations retired with it) or relation id is valid again, in the
// workspace mind or else the personal mind of the owner.
type KnowledgeRestoreRequest struct {
	MemoryOwner
	ID string `json:"id"`
}

// KnowledgeCorrectRequest retires a wrong fact, an entity (with its
// relations) or a relation, by id, in the workspace mind or else the
// personal mind of the owner. Reason is kept with the retired fact.
type KnowledgeCorrectRequest struct {
	MemoryOwner
	ID     string `json:"id"`
	Reason string `json:"reason,omitempty"`
}

// Knowledge graph endpoints of the session store (docs/memory.md).
var (
	// GetKnowledgeGraph reads a knowledge graph.
	GetKnowledgeGraph = Endpoint[KnowledgeGraphRequest, KnowledgeGraph]{ServiceSessionStore, "knowledge-graph", "waggle.store.cmd.knowledge.graph"}
	// CorrectKnowledge retires a wrong fact.
	CorrectKnowledge = Endpoint[KnowledgeCorrectRequest, KnowledgeGraph]{ServiceSessionStore, "knowledge-correct", "waggle.store.cmd.knowledge.correct"}
	// RestoreKnowledge undoes a correction.
	RestoreKnowledge = Endpoint[KnowledgeRestoreRequest, KnowledgeGraph]{ServiceSessionStore, "knowledge-restore", "waggle.store.cmd.knowledge.restore"}
)
