package protocol

// Frame importances, as the original's.
const (
	ImportanceCritical   = "critical"
	ImportanceImportant  = "important"
	ImportanceNormal     = "normal"
	ImportanceTemporary  = "temporary"
	ImportanceDeprecated = "deprecated"
)

// Frame sources (provenance), as the original's.
const (
	SourceUserStated    = "user_stated"
	SourceToolVerified  = "tool_verified"
	SourceAgentInferred = "agent_inferred"
	SourceImport        = "import"
	SourceSystem        = "system"
)

// Mind labels of a frame.
const (
	MindPersonal  = "personal"
	MindWorkspace = "workspace"
)

// Importances lists the valid importances in the original's order.
var Importances = []string{ImportanceCritical, ImportanceImportant, ImportanceNormal, ImportanceTemporary, ImportanceDeprecated}

// Sources lists the valid sources in the original's order.
var Sources = []string{SourceUserStated, SourceToolVerified, SourceAgentInferred, SourceImport, SourceSystem}

// MemoryFrame is one stored frame as the store reports it.
type MemoryFrame struct {
	ID         string   `json:"id"`
	Content    string   `json:"content"`
	Tags       []string `json:"tags,omitempty"`
	Importance string   `json:"importance"`
	Source     string   `json:"source"`
	// Mind is MindPersonal or MindWorkspace; Workspace names the
	// workspace of a workspace frame.
	Mind        string `json:"mind"`
	Workspace   string `json:"workspace,omitempty"`
	Created     string `json:"created"`
	Updated     string `json:"updated"`
	AccessCount int    `json:"accessCount"`
	// Score is the fused rank score of a search hit (0 in listings).
	Score float64 `json:"score,omitempty"`
}

// MemoryOwner names the minds a request may reach: the workspace mind of
// Workspace (empty: none) and the personal mind of User (empty: the local
// personal mind; on a team server, the signed-in user's).
type MemoryOwner struct {
	Workspace string `json:"workspace,omitempty"`
	User      string `json:"user,omitempty"`
}

// MemoryFramesRequest lists the newest frames.
type MemoryFramesRequest struct {
	MemoryOwner
	Limit int    `json:"limit,omitempty"`
	Since string `json:"since,omitempty"`
	Until string `json:"until,omitempty"`
}

// MemoryFramesReply lists frames.
type MemoryFramesReply struct {
	Frames []MemoryFrame `json:"frames"`
}

// MemoryAddRequest stores one frame: in the workspace mind when Workspace
// is set, else in the personal mind. Personal forces the personal mind.
type MemoryAddRequest struct {
	MemoryOwner
	Content    string   `json:"content"`
	Tags       []string `json:"tags,omitempty"`
	Importance string   `json:"importance,omitempty"`
	Source     string   `json:"source,omitempty"`
	Personal   bool     `json:"personal,omitempty"`
}

// MemoryAddReply answers MemoryAddRequest. Duplicate: identical content
// already exists in that mind (Frame is the existing one, not saved again).
type MemoryAddReply struct {
	Saved     bool        `json:"saved"`
	Duplicate bool        `json:"duplicate,omitempty"`
	Frame     MemoryFrame `json:"frame"`
}

// MemoryFrameRequest names one frame, looked up in the workspace mind
// first, then the personal mind.
type MemoryFrameRequest struct {
	MemoryOwner
	ID string `json:"id"`
}

// MemoryUpdateRequest edits a frame's content and, when set, importance.
type MemoryUpdateRequest struct {
	MemoryFrameRequest
	Content    string `json:"content"`
	Importance string `json:"importance,omitempty"`
}

// MemoryFrameReply is one frame after an update, delete or access.
type MemoryFrameReply struct {
	Frame MemoryFrame `json:"frame"`
}

// MemoryQueryRequest searches minds. Scope: personal, workspace, or all
// (both; the default). Empty Workspace searches the personal mind only.
type MemoryQueryRequest struct {
	MemoryOwner
	Query string `json:"query"`
	Scope string `json:"scope,omitempty"`
	// Profile names the ranking (balanced, recent, important, connected;
	// empty: balanced). See docs/memory.md.
	Profile string `json:"profile,omitempty"`
	Limit   int    `json:"limit,omitempty"`
	Since   string `json:"since,omitempty"`
	Until   string `json:"until,omitempty"`
}

// MemoryStatsRequest counts the frames of the personal mind and, when
// Workspace is set, of that workspace's mind.
type MemoryStatsRequest struct {
	MemoryOwner
}

// MemoryStats answers MemoryStatsRequest. Workspace is nil without a
// workspace. EntityCount and RelationCount count valid knowledge-graph facts.
type MemoryStats struct {
	Personal  MemoryMindStats  `json:"personal"`
	Workspace *MemoryMindStats `json:"workspace"`
	Total     MemoryMindStats  `json:"total"`
	// Embedded counts frames with a vector of the current model; Pending
	// those waiting for one.
	Embedded int    `json:"embedded"`
	Pending  int    `json:"pending"`
	Model    string `json:"embeddingModel"`
}

// MemoryMindStats counts one mind.
type MemoryMindStats struct {
	FrameCount    int `json:"frameCount"`
	EntityCount   int `json:"entityCount"`
	RelationCount int `json:"relationCount"`
}
