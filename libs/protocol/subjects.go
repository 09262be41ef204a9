package protocol

// This file is the one table of the bus: every service, request/reply
// endpoint, event subject, stream and bucket. An Endpoint ties its subject
// to its request and reply types, so bus.Call and bus.Handle with the wrong
// types do not compile.
//
// Subject scheme: waggle.<domain>.<kind>.<name>[.<id>], where kind is
// "cmd" (request/reply), "evt" (a published fact), "bcast" (a command to
// every instance) or "ctl" (a control message addressed to the owner of one
// turn). IDs that appear in subjects must pass ValidID first.

// Endpoint is one request/reply endpoint: Req is what callers send, Rep
// what the service answers. Name is the endpoint's name in micro discovery
// and in metrics; Service is the micro service that serves it.
type Endpoint[Req, Rep any] struct {
	Service string
	Name    string
	Subject string
}

// Event is a subject on which facts of type T are published to whoever
// listens (core NATS: a listener that is not there misses them).
type Event[T any] struct {
	Subject string
}

// Micro service names, one per service target.
const (
	ServiceTurnRunner   = "waggle-turnrunner"
	ServiceSessionStore = "waggle-sessionstore"
	ServiceApproval     = "waggle-approval"
	ServiceCommand      = "waggle-command"
	// ServiceMCP is the micro service every turn runner's MCP manager
	// registers (one queue group: any runner answers).
	ServiceMCP = "waggle-mcp"
)

// Turn runner.
var (
	// StartTurn asks a turn runner to start a chat turn. Runners answer as
	// one queue group.
	StartTurn = Endpoint[TurnRequest, TurnStarted]{ServiceTurnRunner, "start", "waggle.turn.cmd.start"}
	// StartAgentRun starts a one-shot retrieval run (contract §8,
	// POST /api/agent/run). Its events go to TurnEvents(TurnID) like a chat
	// turn's, with the run's own names (AgentRunEvent*); only EventDone
	// ends the stream.
	StartAgentRun = Endpoint[AgentRunRequest, TurnStarted]{ServiceTurnRunner, "agentrun", "waggle.turn.cmd.agentrun"}
	// LookupTurn tells whether a turn exists, its state, its owner and its
	// workspace (turninfo.go).
	LookupTurn = Endpoint[TurnInfoRequest, TurnInfo]{ServiceTurnRunner, "info", "waggle.turn.cmd.info"}
	// ListSubAgents lists the running sub-agents (spawn_agent) of every
	// runner, read from BucketSubAgents; any runner answers.
	ListSubAgents = Endpoint[Empty, SubAgentList]{ServiceTurnRunner, "subagents", "waggle.turn.cmd.subagents"}
	// CheckModelServer answers a runner's probe of the model server, made
	// with the key the runner uses (the local vault's): a gateway whose
	// own probe is refused for want of a key asks it, so the gateway never
	// holds the vault's key.
	CheckModelServer = Endpoint[Empty, ModelServerStatus]{ServiceTurnRunner, "llm-status", "waggle.turn.cmd.llm.status"}
	// AnalyzeProfile has a runner's model read a writing sample, a brand
	// description or a profile once (the profile's analyze routes).
	AnalyzeProfile = Endpoint[ProfileAnalysisRequest, ProfileAnalysis]{ServiceTurnRunner, "profile-analysis", "waggle.turn.cmd.profile-analysis"}
	// ListMCPServers lists the MCP servers a workspace's turns can use,
	// with their state and tools.
	ListMCPServers = Endpoint[MCPServersRequest, MCPServersReply]{ServiceMCP, "servers", "waggle.mcp.cmd.servers"}
)

// Session store: histories, workspaces and sessions (contract §6).
var (
	// ReadHistory reads a session's history.
	ReadHistory = Endpoint[HistoryRequest, HistoryReply]{ServiceSessionStore, "history", "waggle.store.cmd.history"}
	// LoadTurnContext answers everything an agent turn reads before its
	// model is called in one round trip (turncontext.go); the separate
	// endpoints stay for every other caller.
	LoadTurnContext = Endpoint[TurnContextRequest, TurnContext]{ServiceSessionStore, "turn-context", "waggle.store.cmd.turn.context"}
	// AppendToSession appends a message or tool event to a session.
	AppendToSession = Endpoint[AppendRequest, AppendReply]{ServiceSessionStore, "append", "waggle.store.cmd.append"}
	// RecordTurn records a turn that waits for its session as accepted
	// (fsynced; acceptedturns.go).
	RecordTurn = Endpoint[AcceptedTurn, RecordTurnReply]{ServiceSessionStore, "turn-record", "waggle.store.cmd.turn.record"}
	// CloseTurn closes a recorded turn that ended without a reply.
	CloseTurn = Endpoint[CloseTurnRequest, CloseTurnReply]{ServiceSessionStore, "turn-close", "waggle.store.cmd.turn.close"}
	// OpenTurns lists the recorded turns still open, for a runner's
	// recovery after a restart.
	OpenTurns = Endpoint[OpenTurnsRequest, OpenTurnsReply]{ServiceSessionStore, "turn-open", "waggle.store.cmd.turn.open"}
	// EvictSession evicts every cached copy of a session's history.
	EvictSession = Endpoint[ClearRequest, ClearReply]{ServiceSessionStore, "clear", "waggle.store.cmd.clear"}
	// GetWorkspace reads one workspace's config.
	GetWorkspace = Endpoint[WorkspaceRequest, Workspace]{ServiceSessionStore, "workspace-get", "waggle.store.cmd.workspace.get"}
	// ListWorkspaces lists every workspace.
	ListWorkspaces = Endpoint[Empty, WorkspaceListReply]{ServiceSessionStore, "workspace-list", "waggle.store.cmd.workspace.list"}
	// GetWorkspaceDoc reads one workspace's whole config, unknown fields
	// included.
	GetWorkspaceDoc = Endpoint[WorkspaceRequest, WorkspaceDocReply]{ServiceSessionStore, "workspace-doc", "waggle.store.cmd.workspace.doc"}
	// CreateWorkspace creates a workspace.
	CreateWorkspace = Endpoint[WorkspaceCreateRequest, WorkspaceDocReply]{ServiceSessionStore, "workspace-create", "waggle.store.cmd.workspace.create"}
	// UpdateWorkspace merges fields into a workspace.
	UpdateWorkspace = Endpoint[WorkspaceUpdateRequest, WorkspaceDocReply]{ServiceSessionStore, "workspace-update", "waggle.store.cmd.workspace.update"}
	// DeleteWorkspace removes a workspace and its sessions.
	DeleteWorkspace = Endpoint[WorkspaceRequest, DeletedReply]{ServiceSessionStore, "workspace-delete", "waggle.store.cmd.workspace.delete"}
	// SetWorkspaceMCPServers replaces a workspace's MCP servers (the only
	// way to set them: workspace create and update refuse the field).
	SetWorkspaceMCPServers = Endpoint[WorkspaceMCPServers, WorkspaceMCPServers]{ServiceSessionStore, "workspace-mcp-set", "waggle.store.cmd.workspace.mcp.set"}
	// ListSessions lists a workspace's sessions.
	ListSessions = Endpoint[SessionListRequest, SessionListReply]{ServiceSessionStore, "session-list", "waggle.store.cmd.session.list"}
	// SearchSessions searches a workspace's sessions.
	SearchSessions = Endpoint[SessionSearchRequest, SessionSearchReply]{ServiceSessionStore, "session-search", "waggle.store.cmd.session.search"}
	// ExportSession renders a session as Markdown.
	ExportSession = Endpoint[SessionRef, SessionExportReply]{ServiceSessionStore, "session-export", "waggle.store.cmd.session.export"}
	// GetTimeline lists a session's tool calls.
	GetTimeline = Endpoint[SessionRef, SessionTimelineReply]{ServiceSessionStore, "session-timeline", "waggle.store.cmd.session.timeline"}
	// CreateSession creates an empty session.
	CreateSession = Endpoint[SessionCreateRequest, SessionInfo]{ServiceSessionStore, "session-create", "waggle.store.cmd.session.create"}
	// BranchSession makes a new session from a session's first messages
	// (editing an earlier user message), recording where it branched.
	BranchSession = Endpoint[SessionBranchRequest, SessionInfo]{ServiceSessionStore, "session-branch", "waggle.store.cmd.session.branch"}
	// RenameSession sets a session's title.
	RenameSession = Endpoint[SessionRenameRequest, SessionRenameReply]{ServiceSessionStore, "session-rename", "waggle.store.cmd.session.rename"}
	// DeleteSession deletes a session file and evicts its caches.
	DeleteSession = Endpoint[SessionLocator, DeletedReply]{ServiceSessionStore, "session-delete", "waggle.store.cmd.session.delete"}
	// SummarizeSession builds a session's post-session summary.
	SummarizeSession = Endpoint[SessionLocator, SessionSummary]{ServiceSessionStore, "session-summary", "waggle.store.cmd.session.summary"}
)

// Session store: usage ledger, agent settings, agent groups, workflows.
var (
	// RecordUsage adds one turn's token usage to the ledger.
	RecordUsage = Endpoint[UsageRecord, Empty]{ServiceSessionStore, "usage-record", "waggle.store.cmd.usage.record"}
	// SummarizeUsage totals the usage ledger.
	SummarizeUsage = Endpoint[UsageSummaryRequest, UsageSummary]{ServiceSessionStore, "usage-summary", "waggle.store.cmd.usage.summary"}
	// ResetUsage restarts the ledger's totals; history is kept.
	ResetUsage = Endpoint[Empty, UsageReset]{ServiceSessionStore, "usage-reset", "waggle.store.cmd.usage.reset"}
	// GetModel reads the current agent model.
	GetModel = Endpoint[Empty, AgentModel]{ServiceSessionStore, "model-get", "waggle.store.cmd.agent.model.get"}
	// SetModel sets the current agent model.
	SetModel = Endpoint[AgentModel, AgentModel]{ServiceSessionStore, "model-set", "waggle.store.cmd.agent.model.set"}
	// ListGroups lists agent groups.
	ListGroups = Endpoint[Empty, AgentGroupList]{ServiceSessionStore, "group-list", "waggle.store.cmd.group.list"}
	// GetGroup reads one agent group; NotFound "Group not found" when unknown.
	GetGroup = Endpoint[AgentGroupRef, AgentGroup]{ServiceSessionStore, "group-get", "waggle.store.cmd.group.get"}
	// CreateGroup validates and stores a new group.
	CreateGroup = Endpoint[AgentGroupWrite, AgentGroup]{ServiceSessionStore, "group-create", "waggle.store.cmd.group.create"}
	// UpdateGroup validates and applies a partial update; NotFound when unknown.
	UpdateGroup = Endpoint[AgentGroupWrite, AgentGroup]{ServiceSessionStore, "group-update", "waggle.store.cmd.group.update"}
	// DeleteGroup deletes a group; NotFound when unknown.
	DeleteGroup = Endpoint[AgentGroupRef, Deleted]{ServiceSessionStore, "group-delete", "waggle.store.cmd.group.delete"}
	// ObserveWorkflow records one turn's tool sequence and says whether it
	// completed a pattern not reported before.
	ObserveWorkflow = Endpoint[WorkflowObserveRequest, WorkflowObserveReply]{ServiceSessionStore, "workflow-observe", "waggle.store.cmd.workflow.observe"}
	// ListWorkflows lists a workspace's captured patterns, oldest first.
	ListWorkflows = Endpoint[WorkspaceRequest, WorkflowList]{ServiceSessionStore, "workflow-list", "waggle.store.cmd.workflow.list"}
)

// Session store: memory frames, the personal mind and one mind per
// workspace (docs/memory.md). SaveMemory and SearchMemory are the agent's
// view of them; the rest serve the /api/memory routes.
var (
	// SaveMemory stores a workspace memory for the agent.
	SaveMemory = Endpoint[MemorySaveRequest, MemorySaveReply]{ServiceSessionStore, "memory-save", "waggle.store.cmd.memory.save"}
	// SearchMemory searches workspace memories for the agent.
	SearchMemory = Endpoint[MemorySearchRequest, MemorySearchReply]{ServiceSessionStore, "memory-search", "waggle.store.cmd.memory.search"}
	// ListFrames lists recent frames of the personal and a workspace mind.
	ListFrames = Endpoint[MemoryFramesRequest, MemoryFramesReply]{ServiceSessionStore, "memory-frames", "waggle.store.cmd.memory.frames"}
	// AddFrame stores one frame.
	AddFrame = Endpoint[MemoryAddRequest, MemoryAddReply]{ServiceSessionStore, "memory-add", "waggle.store.cmd.memory.add"}
	// UpdateFrame edits a frame.
	UpdateFrame = Endpoint[MemoryUpdateRequest, MemoryFrameReply]{ServiceSessionStore, "memory-update", "waggle.store.cmd.memory.update"}
	// DeleteFrame deletes a frame.
	DeleteFrame = Endpoint[MemoryFrameRequest, MemoryFrameReply]{ServiceSessionStore, "memory-delete", "waggle.store.cmd.memory.delete"}
	// AccessFrame counts one access of a frame.
	AccessFrame = Endpoint[MemoryFrameRequest, MemoryFrameReply]{ServiceSessionStore, "memory-access", "waggle.store.cmd.memory.access"}
	// QueryMemory is the hybrid search of the API.
	QueryMemory = Endpoint[MemoryQueryRequest, MemoryFramesReply]{ServiceSessionStore, "memory-query", "waggle.store.cmd.memory.query"}
	// CountFrames counts frames.
	CountFrames = Endpoint[MemoryStatsRequest, MemoryStats]{ServiceSessionStore, "memory-stats", "waggle.store.cmd.memory.stats"}
)

// Session store: what the agent knows about the user and the workspace
// (docs/agent.md): the profile (one locally, one per user on a team
// server) and Workspace Now.
var (
	// GetProfile reads a profile (the defaults when none was saved).
	GetProfile = Endpoint[ProfileRequest, Profile]{ServiceSessionStore, "profile-get", "waggle.store.cmd.profile.get"}
	// UpdateProfile merges a partial profile and returns the result.
	UpdateProfile = Endpoint[ProfileUpdateRequest, Profile]{ServiceSessionStore, "profile-update", "waggle.store.cmd.profile.update"}
	// GetWorkspaceNow computes a workspace's current state from its
	// sessions and frames.
	GetWorkspaceNow = Endpoint[WorkspaceNowRequest, WorkspaceNow]{ServiceSessionStore, "workspace-now", "waggle.store.cmd.workspace.now"}
	// ListCustomPersonas lists a user's custom personas.
	ListCustomPersonas = Endpoint[PersonasRequest, CustomPersonaList]{ServiceSessionStore, "persona-list", "waggle.store.cmd.persona.list"}
	// GetCustomPersona reads one custom persona.
	GetCustomPersona = Endpoint[PersonaRequest, CustomPersona]{ServiceSessionStore, "persona-get", "waggle.store.cmd.persona.get"}
	// CreateCustomPersona creates (or replaces) a custom persona.
	CreateCustomPersona = Endpoint[PersonaWriteRequest, CustomPersona]{ServiceSessionStore, "persona-create", "waggle.store.cmd.persona.create"}
	// UpdateCustomPersona merges fields into a custom persona.
	UpdateCustomPersona = Endpoint[PersonaWriteRequest, CustomPersona]{ServiceSessionStore, "persona-update", "waggle.store.cmd.persona.update"}
	// DeleteCustomPersona deletes a custom persona.
	DeleteCustomPersona = Endpoint[PersonaRequest, CustomPersona]{ServiceSessionStore, "persona-delete", "waggle.store.cmd.persona.delete"}
	// GetIdentity reads a mind's identity.
	GetIdentity = Endpoint[MindRef, Identity]{ServiceSessionStore, "identity-get", "waggle.store.cmd.identity.get"}
	// SetIdentity saves a mind's identity.
	SetIdentity = Endpoint[IdentitySetRequest, Identity]{ServiceSessionStore, "identity-set", "waggle.store.cmd.identity.set"}
	// GetAwareness lists a mind's live awareness items.
	GetAwareness = Endpoint[MindRef, AwarenessList]{ServiceSessionStore, "awareness-get", "waggle.store.cmd.awareness.get"}
	// AddAwareness adds an item to a mind's awareness.
	AddAwareness = Endpoint[AwarenessAddRequest, AwarenessItem]{ServiceSessionStore, "awareness-add", "waggle.store.cmd.awareness.add"}
)

// Session store: team servers (identity, authorization, governance and the
// teams admin API, on PostgreSQL). A request whose Actor is empty comes from
// a trusted bus client (the operator CLI); the gateway always fills Actor
// with the authenticated user.
var (
	// Authenticate checks a bearer token and, when a workspace is named,
	// the user's right to act on it: Unauthenticated INVALID_TOKEN,
	// NotFound for a workspace outside the user's teams, Forbidden
	// VIEWER_READ_ONLY / FORBIDDEN for a role too low.
	Authenticate = Endpoint[AuthenticateRequest, AuthenticateReply]{ServiceSessionStore, "teams-authenticate", "waggle.teams.cmd.authenticate"}
	// Authorize checks a known user's right to act on a workspace or team,
	// with the same errors.
	Authorize = Endpoint[AuthorizeRequest, AuthorizeReply]{ServiceSessionStore, "teams-authorize", "waggle.teams.cmd.authorize"}
	// GetToolPolicy returns the tools blocked for a user in a workspace.
	GetToolPolicy = Endpoint[ToolPolicyRequest, ToolPolicy]{ServiceSessionStore, "teams-tools", "waggle.teams.cmd.tools"}
	// CreateTeam creates a team.
	CreateTeam = Endpoint[TeamCreateRequest, Team]{ServiceSessionStore, "teams-create", "waggle.teams.cmd.team.create"}
	// ListTeams lists the actor's teams, every team for the operator.
	ListTeams = Endpoint[TeamListRequest, TeamListReply]{ServiceSessionStore, "teams-list", "waggle.teams.cmd.team.list"}
	// GetTeam reads a team with its members and policies.
	GetTeam = Endpoint[TeamRef, TeamDetail]{ServiceSessionStore, "teams-get", "waggle.teams.cmd.team.get"}
	// UpdateTeam changes a team's name or settings.
	UpdateTeam = Endpoint[TeamUpdateRequest, Team]{ServiceSessionStore, "teams-update", "waggle.teams.cmd.team.update"}
	// DeleteTeam deletes a team, its members and policies.
	DeleteTeam = Endpoint[TeamRef, DeletedReply]{ServiceSessionStore, "teams-delete", "waggle.teams.cmd.team.delete"}
	// PutMember adds a member or sets a member's role, creating the user
	// when it does not exist.
	PutMember = Endpoint[MemberPutRequest, TeamMember]{ServiceSessionStore, "teams-member-put", "waggle.teams.cmd.member.put"}
	// RemoveMember removes a member.
	RemoveMember = Endpoint[MemberRef, DeletedReply]{ServiceSessionStore, "teams-member-remove", "waggle.teams.cmd.member.remove"}
	// SetPolicy replaces the blocked tools of one role of a team.
	SetPolicy = Endpoint[PolicySetRequest, TeamPolicy]{ServiceSessionStore, "teams-policy-set", "waggle.teams.cmd.policy.set"}
	// CreateToken issues a token.
	CreateToken = Endpoint[TokenCreateRequest, TokenCreated]{ServiceSessionStore, "teams-token-create", "waggle.teams.cmd.token.create"}
	// ListTokens lists a user's tokens, never their secrets.
	ListTokens = Endpoint[TokenListRequest, TokenListReply]{ServiceSessionStore, "teams-token-list", "waggle.teams.cmd.token.list"}
	// RevokeToken revokes a token at once.
	RevokeToken = Endpoint[TokenRevokeRequest, TokenInfo]{ServiceSessionStore, "teams-token-revoke", "waggle.teams.cmd.token.revoke"}
)

// Approval service. It owns the grant store and the pending approvals in
// BucketApprovals; turn runners ask it whether a tool call may run and wait
// for the decision; gateways resolve and list through it.
var (
	// CheckApproval decides whether one tool call may run. When a human
	// must decide, the pending entry is already durable in BucketApprovals
	// when the reply arrives.
	CheckApproval = Endpoint[ApprovalCheckRequest, ApprovalCheckReply]{ServiceApproval, "check", "waggle.approval.cmd.check"}
	// DecideApproval records a human decision from the HTTP API: NotFound
	// when nothing is pending under the id, Conflict when it was already
	// decided.
	DecideApproval = Endpoint[ApprovalDecideRequest, ApprovalDecideReply]{ServiceApproval, "decide", "waggle.approval.cmd.decide"}
	// ResolveApproval ends one pending approval without a human: the
	// runner's deadline passed or its turn was cancelled. A decision that
	// won first is kept and returned.
	ResolveApproval = Endpoint[ApprovalResolveRequest, ApprovalResolveReply]{ServiceApproval, "resolve", "waggle.approval.cmd.resolve"}
	// CancelTurnApprovals denies every still-pending approval of one turn.
	CancelTurnApprovals = Endpoint[ApprovalCancelTurnRequest, ApprovalCancelTurnReply]{ServiceApproval, "cancelturn", "waggle.approval.cmd.cancelturn"}
	// GetApprovalState reads one approval's state: NotFound when no entry
	// is stored under the id (never created, or removed after its
	// retention).
	GetApprovalState = Endpoint[ApprovalStateRequest, ApprovalStateReply]{ServiceApproval, "state", "waggle.approval.cmd.state"}
	// ListPendingApprovals lists what waits for a human, from every runner.
	ListPendingApprovals = Endpoint[Empty, ApprovalPendingReply]{ServiceApproval, "pending", "waggle.approval.cmd.pending"}
	// ListGrants lists the live grants, newest first.
	ListGrants = Endpoint[Empty, ApprovalGrantsReply]{ServiceApproval, "grants", "waggle.approval.cmd.grants.list"}
	// RevokeGrant removes one grant; NotFound when there is none.
	RevokeGrant = Endpoint[ApprovalRevokeRequest, Empty]{ServiceApproval, "revoke", "waggle.approval.cmd.grants.revoke"}
	// ClearGrants removes every grant.
	ClearGrants = Endpoint[Empty, Empty]{ServiceApproval, "clear", "waggle.approval.cmd.grants.clear"}
)

// Command service.
var (
	// ExecuteCommand runs one slash command.
	ExecuteCommand = Endpoint[CommandRequest, CommandReply]{ServiceCommand, "execute", "waggle.command.cmd.execute"}
	// ListCommands lists the slash commands.
	ListCommands = Endpoint[CommandListRequest, CommandList]{ServiceCommand, "list", "waggle.command.cmd.list"}
	// RunGroup queues a run of an agent group (the job comes back with
	// status "queued"); the command service then runs it.
	RunGroup = Endpoint[GroupRunRequest, GroupJob]{ServiceCommand, "group-run", "waggle.command.cmd.group.run"}
	// GetGroupJob reads a group run's state.
	GetGroupJob = Endpoint[GroupJobRequest, GroupJob]{ServiceCommand, "group-job", "waggle.command.cmd.group.job"}
	// CancelGroupJob cancels a queued or running group run: the job is
	// marked cancelled at once (Conflict when it has already ended) and
	// GroupJobCancels tells the instance running it to stop its member
	// turns.
	CancelGroupJob = Endpoint[GroupJobRequest, GroupJobCancelReply]{ServiceCommand, "group-job-cancel", "waggle.command.cmd.group.job.cancel"}
	// ListActiveAgents reports the running group-run members.
	ListActiveAgents = Endpoint[Empty, ActiveAgents]{ServiceCommand, "agents-active", "waggle.command.cmd.agents.active"}
)

// Events and broadcasts.
var (
	// SessionEvictions is published by the store after a session's caches
	// were dropped; every process that caches a session's history listens
	// and drops its copy.
	SessionEvictions = Event[SessionEvicted]{"waggle.store.evt.evicted"}
	// PolicyChanges is published after a team's policies or settings
	// changed; every process caching tool policies drops that team's
	// entries.
	PolicyChanges = Event[TeamPolicyChanged]{"waggle.teams.evt.policy-changed"}
	// StorageReports carries storage-fault reports. A process whose disk
	// (or JetStream store) is full says so, so gateways and runners refuse
	// new work at once (StorageFull) instead of timing out on a write that
	// cannot land. A reporter publishes one every StorageReportInterval
	// while its store is full and one when it recovers; a full report not
	// repeated within StorageReportTTL is stale (its reporter died or
	// recovered unheard).
	StorageReports = Event[StorageStatus]{"waggle.storage.evt.status"}
	// WorkspaceAborts asks every runner to cancel the running turns of one
	// workspace, for POST /api/agent/abort.
	WorkspaceAborts = Event[AbortWorkspace]{"waggle.turn.bcast.abort"}
	// MCPConfigChanges is published by the store after a workspace's MCP
	// servers were replaced or the workspace was deleted; every runner's
	// MCP manager stops or restarts that workspace's servers at once.
	MCPConfigChanges = Event[MCPConfigChanged]{"waggle.store.evt.mcp-config"}
	// GroupJobCancels tells every command service that a group run's job
	// was cancelled; the one running it stops it and cancels its member
	// turns.
	GroupJobCancels = Event[GroupJobRequest]{"waggle.command.bcast.job-cancel"}
)

// Turn subjects.
const (
	// SubjTurnEventsAll matches the events of every turn; the turn stream
	// captures it.
	SubjTurnEventsAll = "waggle.turn.evt.>"
	// SubjTurnControlAll matches the control subjects of every turn.
	SubjTurnControlAll = "waggle.turn.ctl.*"
)

// TurnEvents is the subject a turn's events are published on.
func TurnEvents(turnID string) string { return "waggle.turn.evt." + turnID }

// TurnIDOfEvent returns the turn id of a TurnEvents subject, or "".
func TurnIDOfEvent(subject string) string {
	const prefix = "waggle.turn.evt."
	if len(subject) <= len(prefix) || subject[:len(prefix)] != prefix {
		return ""
	}
	return subject[len(prefix):]
}

// TurnControl addresses the runner of one turn: only the runner that runs
// it listens (under SubjTurnControlAll), and it answers a ControlProbe.
func TurnControl(turnID string) Event[TurnControlMsg] {
	return Event[TurnControlMsg]{"waggle.turn.ctl." + turnID}
}

// ApprovalDecided is where the final state of one approval is published
// (approvaldecided.go). requestID must pass ValidID.
func ApprovalDecided(requestID string) Event[ApprovalDecidedEvent] {
	return Event[ApprovalDecidedEvent]{"waggle.approval.evt.decided." + requestID}
}

// PingSubject is the micro discovery subject every instance of a service
// answers a PING on.
func PingSubject(service string) string { return "$SRV.PING." + service }

// JetStream streams and key-value buckets.
const (
	// StreamTurns holds the events of every turn (subjects SubjTurnEventsAll).
	// Its sequence numbers are the SSE event ids.
	StreamTurns = "WAGGLE_TURNS"
	// BucketApprovals holds pending approvals, keyed by request id.
	BucketApprovals = "waggle_approvals"
	// BucketSingletons holds the leases of services that must run as a
	// single instance per cluster (the JSONL session store, the grant
	// file's owner).
	BucketSingletons = "waggle_singletons"
	// BucketGroupJobs holds agent-group run jobs, keyed by job id, so any
	// command service or gateway can report a run's progress and a restart
	// loses none.
	BucketGroupJobs = "waggle_group_jobs"
	// BucketSubAgents holds one entry per running sub-agent (SubAgent),
	// keyed by its id, written by the runner that runs it and deleted when
	// it ends; entries expire after the sub-agents' time limit, so a
	// crashed runner's entries do not outlive the sub-agents they name.
	BucketSubAgents = "waggle_subagents"
	// BucketRateLimits is where the gateways share their rate-limit
	// windows (team-server mode).
	BucketRateLimits = "waggle_ratelimits"
	// StreamKnowledgeBacklog holds the texts a stopping session store had
	// not finished extracting (subject SubjKnowledgeBacklog), a work queue
	// the next store to run takes them from.
	StreamKnowledgeBacklog = "WAGGLE_KNOWLEDGE_BACKLOG"
	// SubjKnowledgeBacklog is the subject of StreamKnowledgeBacklog's
	// messages (knowledge.BacklogJob bodies).
	SubjKnowledgeBacklog = "waggle.store.knowledge.backlog"
	// ConsumerKnowledgeBacklog is the durable consumer the session stores
	// share to take the backlog.
	ConsumerKnowledgeBacklog = "knowledge-extractor"
)

// Message headers.
const (
	// HeaderEvent carries the SSE event name of a turn event; the body is
	// the event's JSON data, relayed to the client unchanged.
	HeaderEvent = "Waggle-Event"
	// HeaderEventNum numbers a turn's events 1, 2, 3, … in the order its
	// runner published them (a runner taking a turn over continues the
	// count). The stream keeps a bounded window of events, so a relay that
	// finds a number missing knows events were discarded before it read
	// them and tells its client (EventStreamGap) instead of skipping
	// silently.
	HeaderEventNum = "Waggle-N"
)

// Desktop settings and secrets (desktop.go): config.json and the vault,
// both owned by the session store; every other service asks it.
var (
	// GetSettings reads config.json (the last good version when the file
	// on disk does not parse, with the error's line and column).
	GetSettings = Endpoint[Empty, SettingsDoc]{ServiceSessionStore, "settings-get", "waggle.store.cmd.settings.get"}
	// PatchSettings changes fields of config.json (atomic rewrite).
	PatchSettings = Endpoint[SettingsPatch, SettingsDoc]{ServiceSessionStore, "settings-patch", "waggle.store.cmd.settings.patch"}
	// ListVault lists a team's secrets: names and types, never values.
	ListVault = Endpoint[VaultListRequest, VaultListReply]{ServiceSessionStore, "vault-list", "waggle.store.cmd.vault.list"}
	// SetVault stores (or replaces) one secret, encrypted at rest.
	SetVault = Endpoint[VaultSetRequest, VaultEntry]{ServiceSessionStore, "vault-set", "waggle.store.cmd.vault.set"}
	// DeleteVault removes one secret.
	DeleteVault = Endpoint[VaultNameRequest, DeletedReply]{ServiceSessionStore, "vault-delete", "waggle.store.cmd.vault.delete"}
	// RevealVault returns one secret's value.
	RevealVault = Endpoint[VaultNameRequest, VaultSecret]{ServiceSessionStore, "vault-reveal", "waggle.store.cmd.vault.reveal"}
	// ResolveModelKey answers the model server's API key saved for a
	// model (VaultModelKeyNames) in the vault of the turn's workspace's
	// team (the local vault for a workspace of no team), "" when none is.
	ResolveModelKey = Endpoint[ModelKeyRequest, ModelKeyReply]{ServiceSessionStore, "vault-model-key", "waggle.store.cmd.vault.modelkey"}
	// ResolveSearchKey answers a web search provider's API key saved in
	// a team's vault ("" the local one; VaultSearchKeyNames), "" when none
	// is. Only runners ask it: no route reaches it.
	ResolveSearchKey = Endpoint[SearchKeyRequest, ModelKeyReply]{ServiceSessionStore, "vault-search-key", "waggle.store.cmd.vault.searchkey"}

	// SettingsChanges is published by the store after config.json or the
	// vault changed through it: runners drop their cached settings and
	// model key, so the next turn uses the new ones.
	SettingsChanges = Event[SettingsChanged]{"waggle.store.evt.settings"}
)

// WorkspaceFiles lists, reads and changes a workspace's files directory
// (the file tools' directory, under their rules). Runners answer as one
// queue group.
var WorkspaceFiles = Endpoint[FilesRequest, FilesReply]{ServiceTurnRunner, "files", "waggle.turn.cmd.files"}

// Notifications carries desktop notifications from the runners to every
// gateway (core NATS: a gateway that is down misses them).
var Notifications = Event[Notification]{"waggle.notify.evt"}

// Sub-agents on another runner (spawn_agent; services/turnrunner/subagent).
// Only turn runners speak these: a parent's runner places a sub-agent, the
// child's runner runs it and both talk on the sub-agent's own subjects.
const (
	// SubjSubAgentRoom is asked (as a request with many replies) by a
	// runner about to start a sub-agent: every runner with room answers
	// its id and free turn slots.
	SubjSubAgentRoom = "waggle.turn.bcast.subagent-room"
)

// SubAgentRun is the subject on which one runner takes a sub-agent to run.
// runner must pass ValidID.
func SubAgentRun(runner string) string { return "waggle.turn.cmd.subagent-run." + runner }

// SubAgentEvents is where a sub-agent's runner sends its steps, tool
// events, heartbeats and result to its parent's runner. id must pass
// ValidID.
func SubAgentEvents(id string) string { return "waggle.subagent.evt." + id }

// SubAgentGate is where a sub-agent's runner asks its parent's runner to
// check one tool call with the parent turn's approval gate.
func SubAgentGate(id string) string { return "waggle.subagent.cmd.gate." + id }

// SubAgentControl is where the parent's runner sends a sub-agent its
// heartbeats and its cancel.
func SubAgentControl(id string) string { return "waggle.subagent.ctl." + id }
