package protocol

// Subject scheme: waggle.<domain>.<kind>.<name>[.<id>], where kind is
// "cmd" (request/reply), "evt" (a published fact) or "ctl" (a control
// message addressed to the owner of one turn). IDs that appear in subjects
// must pass ValidID first.
const (
	// SubjectPrefix is the root of every Waggle subject.
	SubjectPrefix = "waggle"

	// SubjTurnStart asks a turn runner to start a chat turn (TurnRequest →
	// TurnStarted). Runners answer as one queue group.
	SubjTurnStart = "waggle.turn.cmd.start"
	// SubjTurnEventsAll matches the events of every turn; the turn stream
	// captures it.
	SubjTurnEventsAll = "waggle.turn.evt.>"
	// SubjTurnControlAll matches the control subjects of every turn.
	SubjTurnControlAll = "waggle.turn.ctl.*"
	// SubjTurnAbortWorkspace asks every runner to cancel the running turns
	// of one workspace (AbortWorkspace), for POST /api/agent/abort.
	SubjTurnAbortWorkspace = "waggle.turn.bcast.abort"

	// SubjStoreHistory reads a session's history (HistoryRequest → HistoryReply).
	SubjStoreHistory = "waggle.store.cmd.history"
	// SubjStoreAppend appends a message or tool event to a session (AppendRequest → AppendReply).
	SubjStoreAppend = "waggle.store.cmd.append"
	// SubjStoreClear evicts every cached copy of a session's history (ClearRequest → ClearReply).
	SubjStoreClear = "waggle.store.cmd.clear"
	// SubjStoreMemorySave stores a workspace memory (MemorySaveRequest → MemorySaveReply).
	SubjStoreMemorySave = "waggle.store.cmd.memory.save"
	// SubjStoreMemorySearch searches workspace memories (MemorySearchRequest → MemorySearchReply).
	SubjStoreMemorySearch = "waggle.store.cmd.memory.search"
	// SubjStoreUsageRecord adds one turn's token usage to the ledger (UsageRecord → Empty).
	SubjStoreUsageRecord = "waggle.store.cmd.usage.record"
	// SubjStoreUsageSummary totals the usage ledger (UsageSummaryRequest → UsageSummary).
	SubjStoreUsageSummary = "waggle.store.cmd.usage.summary"
	// SubjStoreWorkspaceGet reads one workspace's config (WorkspaceRequest → Workspace).
	SubjStoreWorkspaceGet = "waggle.store.cmd.workspace.get"
	// SubjStorePrefix is the prefix of every session-store command; services
	// added later (sessions API, agent groups) put their endpoints under it.
	SubjStorePrefix = "waggle.store.cmd."
	// SubjSessionEvicted is published by the store after a session's caches
	// were dropped (SessionEvicted); every process that caches a session's
	// history listens and drops its copy.
	SubjSessionEvicted = "waggle.store.evt.evicted"

	// SubjApprovalPrefix is the prefix of every approval-service command.
	SubjApprovalPrefix = "waggle.approval.cmd."
	// SubjApprovalEventsPrefix is the prefix of approval facts (decisions).
	SubjApprovalEventsPrefix = "waggle.approval.evt."

	// SubjCommandPrefix is the prefix of every command-service request.
	SubjCommandPrefix = "waggle.command.cmd."
	// SubjCommandExecute runs one slash command (CommandRequest → CommandReply).
	SubjCommandExecute = "waggle.command.cmd.execute"
)

// JetStream streams and key-value buckets.
const (
	// StreamTurns holds the events of every turn (subjects SubjTurnEventsAll).
	// Its sequence numbers are the SSE event ids.
	StreamTurns = "WAGGLE_TURNS"
	// BucketApprovals holds pending approvals, keyed by request id.
	BucketApprovals = "waggle_approvals"
)

// Micro service names, one per service target.
const (
	ServiceTurnRunner   = "waggle-turnrunner"
	ServiceSessionStore = "waggle-sessionstore"
	ServiceApproval     = "waggle-approval"
	ServiceCommand      = "waggle-command"
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

// TurnControl is the subject that addresses the runner of one turn.
func TurnControl(turnID string) string { return "waggle.turn.ctl." + turnID }

// HeaderEvent carries the SSE event name of a turn event; the body is the
// event's JSON data, relayed to the client unchanged.
const HeaderEvent = "Waggle-Event"

// HeaderEventNum numbers a turn's events 1, 2, 3, … in the order its
// runner published them (a runner taking a turn over continues the
// count). The stream keeps a bounded window of events, so a relay that
// finds a number missing knows events were discarded before it read them
// and tells its client (EventStreamGap) instead of skipping silently.
const HeaderEventNum = "Waggle-N"

// BucketSingletons holds the leases of services that must run as a single
// instance per cluster (the JSONL session store, the grant file's owner).
const BucketSingletons = "waggle_singletons"
