package protocol

// TurnContextRequest asks the session store for everything an agent turn
// reads before its model is called, answered in one message
// (LoadTurnContext): the session's history, the workspace's record, the
// user's profile, the newest frames, Workspace Now, the minds' identity and
// awareness, the workspace's key knowledge, the recall for the user's
// message, the custom persona and today's spend. The store applies the
// rules of the separate endpoints (ids, the workspace's existence, the
// user's membership of the workspace's team) and reads only the named
// workspace, its team's shared personas and User's own documents.
type TurnContextRequest struct {
	SessionRef
	// User is the turn's user ("" locally): their profile, personal mind
	// and custom personas.
	User string `json:"user,omitempty"`
	// Preload, when set, asks for the prompt's preloaded sections, picked
	// from the newest frames of the workspace and personal minds
	// (libs/preload).
	Preload bool `json:"preload,omitempty"`
	// Knowledge is how many of the workspace's key entities to return
	// (0: none).
	Knowledge int `json:"knowledge,omitempty"`
	// Recall, when set, is the auto-recall for the user's message.
	Recall *TurnRecallRequest `json:"recall,omitempty"`
	// Persona is the persona the turn asked for; when "" the workspace's
	// own is used. A custom one is looked up among User's personas, then
	// the workspace's team's shared ones.
	Persona string `json:"persona,omitempty"`
	// UsageSince, when set, asks for the usage ledger's totals since then
	// (RFC 3339).
	UsageSince string `json:"usageSince,omitempty"`
}

// TurnRecallRequest is the recall part of a TurnContextRequest: the
// auto-recall for Query, sized as libs/preload says (a catch-up's
// workspace part is picked from the newest frames).
type TurnRecallRequest struct {
	Query string `json:"query"`
}

// TurnPreload is the preloaded sections of a turn's prompt: the
// workspace's important frames, the user's preferences and style notes,
// their corrections (newest first).
type TurnPreload struct {
	Recent      []MemoryFrame `json:"recent,omitempty"`
	Preferences []MemoryFrame `json:"preferences,omitempty"`
	Corrections []MemoryFrame `json:"corrections,omitempty"`
}

// TurnContext answers a TurnContextRequest. Only the history is required;
// every other part is nil (or empty) when there is none or it could not
// be read, and Unavailable names the parts that could not be read (the
// reason stays in the store's log).
type TurnContext struct {
	History HistoryReply `json:"history"`
	// Workspace is the workspace's record (nil when it does not exist).
	Workspace *Workspace `json:"workspace,omitempty"`
	Profile   *Profile   `json:"profile,omitempty"`
	// Preload is the prompt's preloaded sections.
	Preload *TurnPreload `json:"preload,omitempty"`
	// Now is Workspace Now without the turn's own session.
	Now *WorkspaceNow `json:"now,omitempty"`
	// Identity is the workspace mind's identity when it is configured,
	// else the personal mind's.
	Identity *Identity `json:"identity,omitempty"`
	// Awareness is the live items of the workspace's mind, then the
	// personal mind's.
	Awareness []AwarenessItem `json:"awareness,omitempty"`
	// Knowledge is the workspace's key knowledge graph.
	Knowledge *KnowledgeGraph `json:"knowledge,omitempty"`
	// RecallWorkspace and RecallPersonal are the recall's hits (the
	// personal ones marked with their mind).
	RecallWorkspace []MemoryFrame `json:"recallWorkspace,omitempty"`
	RecallPersonal  []MemoryFrame `json:"recallPersonal,omitempty"`
	// Persona is the custom persona the turn runs as (nil for a built-in
	// one, none, or one not found).
	Persona *CustomPersona `json:"persona,omitempty"`
	// Usage is the ledger's totals since UsageSince.
	Usage *UsageSummary `json:"usage,omitempty"`
	// Unavailable names the parts that failed: TurnContextPart values.
	Unavailable []string `json:"unavailable,omitempty"`
}

// Parts of a TurnContext named in Unavailable.
const (
	TurnContextWorkspace = "workspace"
	TurnContextProfile   = "profile"
	TurnContextFrames    = "frames"
	TurnContextNow       = "workspace now"
	TurnContextIdentity  = "identity"
	TurnContextAwareness = "awareness"
	TurnContextKnowledge = "knowledge"
	TurnContextRecall    = "recall"
	TurnContextPersona   = "persona"
	TurnContextUsage     = "usage"
)

// Missing reports whether part is named in Unavailable.
func (c TurnContext) Missing(part string) bool {
	for _, p := range c.Unavailable {
		if p == part {
			return true
		}
	}
	return false
}
