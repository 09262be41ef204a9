package openapi

import (
	"net/http"

	"github.com/waggle-os/core/libs/protocol"
)

// tags are the route groups, in the order of docs/api.md.
var tags = []Tag{
	{Name: "health", Description: "Health and metrics (docs/operations.md)"},
	{Name: "chat", Description: "Chat turns and their event streams (docs/architecture.md, docs/agent.md)"},
	{Name: "agent-run", Description: "One-shot retrieval runs (docs/agent-run.md)"},
	{Name: "approvals", Description: "Tool approvals and grants (docs/approvals.md)"},
	{Name: "mcp", Description: "MCP tool servers (docs/mcp.md)"},
	{Name: "sessions", Description: "Workspaces and sessions (docs/sessions.md)"},
	{Name: "commands", Description: "Slash commands (docs/commands.md)"},
	{Name: "agent", Description: "Agent status, cost, model and agent groups (docs/commands.md)"},
	{Name: "teams", Description: "Teams, roles, policies and tokens (docs/teams.md)"},
	{Name: "memory", Description: "The personal and workspace minds' frames (docs/memory.md)"},
	{Name: "desktop", Description: "The desktop app: vault, settings, models, files, notifications, jobs (docs/desktop.md)"},
	{Name: "meta", Description: "This description"},
}

// Query parameters several routes share.
var (
	workspaceQuery = queryID("workspace", "the workspace (default \"default\")")
	sessionQuery   = queryID("session", "the session (default: the workspace)")
	memWorkspace   = queryID("workspace", "the workspace mind beside the personal one")
	memWorkspaceID = queryID("workspaceId", "alias of workspace")
	frameParam     = pathParam("id", "the frame id")
	locateQuery    = queryID("workspace", "the session's workspace; without it every workspace is searched (required on a team server)")
)

// routes is the route table: one row per method and path the router
// serves. The router test (gateway_test.go) fails when the two differ.
func routes() []op {
	const (
		get, post, put, patch, del = http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete
	)
	notFound, conflict, forbidden := http.StatusNotFound, http.StatusConflict, http.StatusForbidden
	bad := http.StatusBadRequest
	turnID := pathParam("turnId", "the turn's id (X-Waggle-Turn-Id of its stream)")
	wsParam := pathParam("id", "the workspace id")
	sessParam := pathParam("sessionId", "the session id")
	groupParam := pathParam("id", "the group id")
	teamParam := pathParam("team", "the team's slug")
	turnHeader := map[string]*Header{headerTurnID: {Description: "the turn's id, for GET /api/chat/turns/{turnId}/events and cancel", Schema: str()}}

	return append([]op{
		// ---- health ----
		{method: get, path: "/health", id: "getHealth", tag: "health", public: true, busFree: true,
			summary: "Readiness and the model server's state",
			desc: "200 once every service of this process has started and the bus is connected; 503 (same body) with status starting or unavailable before, while shutting down or without the bus, " +
				"and with status degraded (and storage) while a store is full.",
			ok: ref("Health"), responses: map[int]*Response{http.StatusServiceUnavailable: {
				Description: "Not ready (starting, shutting down, the bus disconnected) or degraded (a store is full)",
				Content:     map[string]MediaType{"application/json": {Schema: ref("Health")}}}},
			subjects: []string{protocol.GetSettings.Subject}},
		{method: get, path: "/metrics", id: "getMetrics", tag: "health", busFree: true,
			summary: "Prometheus metrics", okType: "text/plain", ok: strDesc("Prometheus text exposition format")},

		// ---- chat ----
		{method: post, path: "/api/chat", id: "chat", tag: "chat",
			summary: "Run a chat turn, streamed as SSE",
			desc: "Every rejection is a JSON error before any stream byte: 400 message is required, MESSAGE_TOO_LONG, INJECTION_DETECTED, PATH_TRAVERSAL, bad multitask, unsafe IDs; " +
				"403 VIEWER_READ_ONLY and 404 (workspace outside the user's teams) on a team server; 409 SESSION_BUSY with multitask reject; 503 NO_RUNNER or RUNNER_BUSY; 507 STORAGE_FULL.",
			body: ref("ChatRequest"), stream: "ChatEvent", headers: turnHeader,
			errs: []int{forbidden, notFound, conflict}, subjects: []string{protocol.ReadHistory.Subject, protocol.StartTurn.Subject, protocol.TurnEvents("{turnId}"), protocol.TurnControl("{turnId}").Subject}},
		{method: del, path: "/api/chat/history", id: "clearHistory", tag: "chat",
			summary: "Drop every cached copy of a session (the file stays)",
			params:  []Parameter{workspaceQuery, sessionQuery},
			ok:      object(req("ok", constant(true)), req("cleared", strDesc("the session id"))),
			errs:    []int{bad, forbidden, notFound}, subjects: []string{protocol.EvictSession.Subject}},
		{method: get, path: "/api/history", id: "getHistory", tag: "chat",
			summary: "A session's messages with their stored timestamps",
			params:  []Parameter{workspaceQuery, sessionQuery},
			ok:      ref("History"), errs: []int{bad, notFound}, subjects: []string{protocol.ReadHistory.Subject}},
		{method: get, path: "/api/chat/turns/{turnId}/events", id: "followTurn", tag: "chat",
			summary: "Follow a turn from any gateway: replay after an event id, then live",
			desc:    "Events stay replayable for 15 minutes (within the turn stream's byte budget). A turn whose events are all gone is 404.",
			params: []Parameter{turnID,
				{Name: "Last-Event-ID", In: "header", Description: "resume after this event id (wins over ?after=)", Schema: ref("SSEEventID")},
				query("after", "resume after this event id", ref("SSEEventID"))},
			stream: "TurnEvent", headers: turnHeader, errs: []int{bad, forbidden, notFound},
			subjects: []string{protocol.LookupTurn.Subject, protocol.ReadHistory.Subject, protocol.Authorize.Subject, protocol.TurnEvents("{turnId}"), protocol.TurnControl("{turnId}").Subject}},
		{method: post, path: "/api/chat/turns/{turnId}/cancel", id: "cancelTurn", tag: "chat",
			summary: "Stop a turn; it persists what it produced and ends with an error event",
			params:  []Parameter{turnID},
			ok:      object(req("ok", constant(true)), req("turnId", str())),
			errs:    []int{bad, forbidden, notFound}, subjects: []string{protocol.LookupTurn.Subject, protocol.Authorize.Subject, protocol.TurnControl("{turnId}").Subject}},
		{method: post, path: "/api/agent/abort", id: "abortWorkspace", tag: "chat",
			summary: "Cancel every running turn of a workspace",
			body:    object(opt("workspaceId", describe(safeID(), "required (or its alias workspace)")), opt("workspace", safeID())),
			ok:      object(req("ok", constant(true)), req("workspaceId", str())),
			errs:    []int{forbidden, notFound}, subjects: []string{protocol.WorkspaceAborts.Subject}},
		{method: get, path: "/api/personas", id: "listPersonas", tag: "chat",
			summary: "The built-in personas a chat may name (no prompts)",
			ok:      object(req("personas", arrayOf(ref("Persona"))))},

		// ---- agent run ----
		{method: post, path: "/api/agent/run", id: "agentRun", tag: "agent-run",
			summary: "A one-shot retrieval run, streamed as SSE",
			desc:    "400 question is required or a bad maxSteps / maxRetrievalsPerStep; 503 without a reachable model or runner.",
			body:    ref("AgentRunRequest"), stream: "AgentRunEvent", headers: turnHeader,
			errs: []int{forbidden, notFound}, subjects: []string{protocol.ReadHistory.Subject, protocol.StartAgentRun.Subject, protocol.TurnEvents("{turnId}"), protocol.TurnControl("{turnId}").Subject}},

		// ---- approvals ----
		{method: post, path: "/api/approval/{requestId}", id: "decideApproval", tag: "approvals",
			summary: "Approve or deny a paused tool call",
			params:  []Parameter{pathParam("requestId", "requestId of the approval_required event")},
			body: object(
				req("approved", describe(boolean(), "must be a real boolean")),
				opt("always", describe(boolean(), "with approved: store a grant so identical calls pass from now on")),
				opt("reason", str()),
				opt("sourceWorkspaceId", describe(&Schema{Type: []string{"string", "null"}}, "echo the event's; scopes the grant")),
			),
			ok:   object(req("ok", constant(true)), req("requestId", str()), req("approved", boolean()), req("always", boolean())),
			errs: []int{forbidden, notFound, conflict}, subjects: []string{protocol.DecideApproval.Subject, protocol.ListPendingApprovals.Subject, protocol.Authorize.Subject}},
		{method: get, path: "/api/approval/pending", id: "listPendingApprovals", tag: "approvals",
			summary:  "Tool calls waiting for a decision, from every runner",
			ok:       object(req("pending", arrayOf(ref("PendingApproval"))), req("count", integer())),
			subjects: []string{protocol.ListPendingApprovals.Subject, protocol.Authorize.Subject}},
		{method: get, path: "/api/approval/grants", id: "listGrants", tag: "approvals",
			summary:  "The standing \"always allow\" grants, newest first",
			ok:       object(req("grants", arrayOf(ref("ApprovalGrant"))), req("count", integer())),
			subjects: []string{protocol.ListGrants.Subject, protocol.Authorize.Subject}},
		{method: del, path: "/api/approval/grants/{id}", id: "revokeGrant", tag: "approvals",
			summary: "Revoke one grant",
			params:  []Parameter{pathParam("id", "the grant id")},
			ok:      object(req("ok", constant(true)), req("id", str())),
			errs:    []int{forbidden, notFound}, subjects: []string{protocol.RevokeGrant.Subject, protocol.ListGrants.Subject, protocol.Authorize.Subject}},
		{method: post, path: "/api/approval/grants/clear", id: "clearGrants", tag: "approvals",
			summary: "Revoke every grant (on a team server: those the user may change)",
			ok:      ref("Ok"), errs: []int{forbidden},
			subjects: []string{protocol.ClearGrants.Subject, protocol.ListGrants.Subject, protocol.RevokeGrant.Subject, protocol.Authorize.Subject}},

		// ---- MCP ----
		{method: get, path: "/api/mcp/servers", id: "listMCPServers", tag: "mcp",
			summary: "The MCP servers a workspace's turns can use, as one runner sees them",
			params:  []Parameter{queryID("workspace", "adds that workspace's own servers")},
			ok:      ref("MCPServers"), errs: []int{bad, forbidden, notFound}, subjects: []string{protocol.ListMCPServers.Subject}},
		{method: get, path: "/api/workspaces/{id}/mcp-servers", id: "getWorkspaceMCPServers", tag: "mcp",
			summary: "A workspace's own MCP servers as configured (a same-origin or non-browser caller; on a team server a team admin)", params: []Parameter{wsParam},
			ok: ref("WorkspaceMCPServers"), errs: []int{bad, forbidden, notFound}, subjects: []string{protocol.GetWorkspaceDoc.Subject}},
		{method: put, path: "/api/workspaces/{id}/mcp-servers", id: "setWorkspaceMCPServers", tag: "mcp",
			summary: "Replace a workspace's own MCP servers (a same-origin or non-browser caller; on a team server a team admin); runners apply it at once", params: []Parameter{wsParam},
			body: ref("WorkspaceMCPServers"), ok: ref("WorkspaceMCPServers"), errs: []int{bad, forbidden, notFound}, subjects: []string{protocol.SetWorkspaceMCPServers.Subject}},

		// ---- workspaces and sessions ----
		{method: get, path: "/api/workspaces", id: "listWorkspaces", tag: "sessions",
			summary: "Every workspace, oldest first (on a team server: the user's)",
			ok:      arrayOf(ref("Workspace")), subjects: []string{protocol.ListWorkspaces.Subject}},
		{method: post, path: "/api/workspaces", id: "createWorkspace", tag: "sessions",
			summary: "Create a workspace (id from the name's slug)",
			body:    ref("WorkspaceWrite"), status: http.StatusCreated, ok: ref("Workspace"),
			errs: []int{forbidden}, subjects: []string{protocol.CreateWorkspace.Subject}},
		{method: get, path: "/api/workspaces/{id}", id: "getWorkspace", tag: "sessions",
			summary: "One workspace's config", params: []Parameter{wsParam},
			ok: ref("Workspace"), errs: []int{bad, notFound}, subjects: []string{protocol.GetWorkspaceDoc.Subject}},
		{method: patch, path: "/api/workspaces/{id}", id: "updateWorkspace", tag: "sessions",
			summary: "Merge fields into a workspace", params: []Parameter{wsParam},
			body: ref("WorkspaceWrite"), ok: ref("Workspace"), errs: []int{forbidden, notFound}, subjects: []string{protocol.UpdateWorkspace.Subject}},
		{method: del, path: "/api/workspaces/{id}", id: "deleteWorkspace", tag: "sessions",
			summary: "Delete a workspace with its sessions and memories", params: []Parameter{wsParam},
			ok: ref("Deleted"), errs: []int{bad, forbidden, notFound}, subjects: []string{protocol.DeleteWorkspace.Subject}},
		{method: get, path: "/api/workspaces/{id}/sessions", id: "listSessions", tag: "sessions",
			summary: "A workspace's sessions, most recently active first (unknown workspace: [])",
			params:  []Parameter{wsParam, query("hideEmpty", "true drops sessions without messages", &Schema{Type: "string", Enum: []any{"true", "false"}})},
			ok:      arrayOf(ref("SessionInfo")), errs: []int{bad, notFound}, subjects: []string{protocol.ListSessions.Subject}},
		{method: post, path: "/api/workspaces/{id}/sessions", id: "createSession", tag: "sessions",
			summary: "Create an empty session", params: []Parameter{wsParam},
			body: object(opt("title", anyValue("stored as sent; absent or null: no title"))), status: http.StatusCreated,
			ok: ref("SessionInfo"), errs: []int{forbidden, notFound}, subjects: []string{protocol.CreateSession.Subject}},
		{method: get, path: "/api/workspaces/{id}/sessions/search", id: "searchSessions", tag: "sessions",
			summary: "Full-text search over a workspace's sessions",
			params: []Parameter{wsParam,
				query("q", "at least 2 characters", &Schema{Type: "string", MinLength: ptr(2)}),
				query("limit", "default 20, at most 50", &Schema{Type: "integer", Minimum: ptr(1.0), Default: 20})},
			ok: arrayOf(ref("SessionSearchResult")), errs: []int{bad, notFound}, subjects: []string{protocol.SearchSessions.Subject}},
		{method: get, path: "/api/workspaces/{id}/sessions/{sessionId}/export", id: "exportSession", tag: "sessions",
			summary: "A session as Markdown", params: []Parameter{wsParam, sessParam},
			okType: "text/markdown", ok: str(), errs: []int{bad, notFound}, subjects: []string{protocol.ExportSession.Subject}},
		{method: get, path: "/api/workspaces/{id}/sessions/{sessionId}/timeline", id: "sessionTimeline", tag: "sessions",
			summary: "A session's tool calls", params: []Parameter{wsParam, sessParam},
			ok: arrayOf(ref("TimelineEvent")), errs: []int{bad, notFound}, subjects: []string{protocol.GetTimeline.Subject}},
		{method: patch, path: "/api/sessions/{sessionId}", id: "renameSession", tag: "sessions",
			summary: "Rename a session", params: []Parameter{sessParam, locateQuery},
			body: object(req("title", &Schema{Type: "string", MinLength: ptr(1)})),
			ok:   ref("SessionRenamed"), errs: []int{forbidden, notFound}, subjects: []string{protocol.RenameSession.Subject}},
		{method: del, path: "/api/sessions/{sessionId}", id: "deleteSession", tag: "sessions",
			summary: "Delete a session file", params: []Parameter{sessParam, locateQuery},
			ok: ref("Deleted"), errs: []int{bad, forbidden, notFound}, subjects: []string{protocol.DeleteSession.Subject}},
		{method: get, path: "/api/sessions/{sessionId}/summary", id: "sessionSummary", tag: "sessions",
			summary: "A session's post-session summary", params: []Parameter{sessParam, locateQuery},
			ok: ref("SessionSummary"), errs: []int{bad, notFound}, subjects: []string{protocol.SummarizeSession.Subject}},

		// ---- commands ----
		{method: post, path: "/api/commands/execute", id: "executeCommand", tag: "commands",
			summary: "Run a slash command out of band",
			desc:    "Reroute results come back raw (AGENT_LOOP_REROUTE:: prefix); send the command through POST /api/chat to have the model run them.",
			body:    object(req("command", &Schema{Type: "string", MinLength: ptr(1)}), opt("workspaceId", describe(safeID(), "default \"default\""))),
			ok:      object(req("result", str()), req("command", strDesc("as sent"))),
			errs:    []int{forbidden, notFound}, subjects: []string{protocol.ExecuteCommand.Subject}},
		{method: get, path: "/api/commands", id: "listCommands", tag: "commands",
			summary: "The slash-command catalogue, for autocomplete",
			params:  []Parameter{query("q", "keep commands whose name or alias contains it", str())},
			ok:      arrayOf(ref("CommandInfo")), subjects: []string{protocol.ListCommands.Subject}},

		// ---- agent ----
		{method: get, path: "/api/agent/status", id: "agentStatus", tag: "agent",
			summary: "The agent model and usage totals", ok: ref("AgentStatus"),
			subjects: []string{protocol.SummarizeUsage.Subject, protocol.GetModel.Subject}},
		{method: get, path: "/api/agent/cost", id: "agentCost", tag: "agent",
			summary: "Usage and cost since the last reset", ok: ref("AgentCost"), subjects: []string{protocol.SummarizeUsage.Subject}},
		{method: post, path: "/api/agent/cost/reset", id: "resetAgentCost", tag: "agent",
			summary: "Restart the usage totals (the records stay)",
			ok:      object(req("ok", constant(true)), req("message", str()), req("resetAt", &Schema{Type: "string", Format: "date-time"})),
			errs:    []int{forbidden}, subjects: []string{protocol.ResetUsage.Subject}},
		{method: get, path: "/api/agent/model", id: "getAgentModel", tag: "agent",
			summary: "The current agent model", ok: ref("AgentModel"), subjects: []string{protocol.GetModel.Subject}},
		{method: put, path: "/api/agent/model", id: "setAgentModel", tag: "agent",
			summary: "Set the agent model", body: object(req("model", &Schema{Type: "string", MinLength: ptr(1)})),
			ok: object(req("ok", constant(true)), req("model", str())), errs: []int{forbidden}, subjects: []string{protocol.SetModel.Subject}},
		{method: get, path: "/api/agents/active", id: "activeAgents", tag: "agent",
			summary: "The members of running agent-group runs", ok: ref("ActiveAgents"), subjects: []string{protocol.ListActiveAgents.Subject}},
		{method: get, path: "/api/agent-groups", id: "listAgentGroups", tag: "agent",
			summary: "Every agent group, in creation order", ok: arrayOf(ref("AgentGroup")), subjects: []string{protocol.ListGroups.Subject}},
		{method: post, path: "/api/agent-groups", id: "createAgentGroup", tag: "agent",
			summary: "Create an agent group", body: ref("AgentGroupWrite"), status: http.StatusCreated, ok: ref("AgentGroup"),
			errs: []int{forbidden}, subjects: []string{protocol.CreateGroup.Subject}},
		{method: get, path: "/api/agent-groups/{id}", id: "getAgentGroup", tag: "agent",
			summary: "One agent group", params: []Parameter{groupParam}, ok: ref("AgentGroup"),
			errs: []int{notFound}, subjects: []string{protocol.GetGroup.Subject}},
		{method: patch, path: "/api/agent-groups/{id}", id: "updateAgentGroup", tag: "agent",
			summary: "Change an agent group", params: []Parameter{groupParam}, body: ref("AgentGroupWrite"), ok: ref("AgentGroup"),
			errs: []int{forbidden, notFound}, subjects: []string{protocol.UpdateGroup.Subject}},
		{method: del, path: "/api/agent-groups/{id}", id: "deleteAgentGroup", tag: "agent",
			summary: "Delete an agent group", params: []Parameter{groupParam}, ok: ref("Deleted"),
			errs: []int{forbidden, notFound}, subjects: []string{protocol.DeleteGroup.Subject}},
		{method: post, path: "/api/agent-groups/{id}/run", id: "runAgentGroup", tag: "agent",
			summary: "Queue a run of an agent group; answers at once",
			params:  []Parameter{groupParam},
			body: object(req("task", &Schema{Type: "string", MinLength: ptr(1)}), opt("teamId", str()),
				opt("workspaceId", describe(safeID(), "where the members' sessions are written (default \"default\")"))),
			ok: ref("GroupRunQueued"), errs: []int{forbidden, notFound},
			subjects: []string{protocol.GetGroup.Subject, protocol.RunGroup.Subject}},
		{method: get, path: "/api/agent-groups/{id}/runs/{jobId}", id: "getAgentGroupRun", tag: "agent",
			summary: "A group run's progress", params: []Parameter{groupParam, pathParam("jobId", "the run's jobId")},
			ok: ref("GroupJob"), errs: []int{notFound}, subjects: []string{protocol.GetGroupJob.Subject}},

		// ---- teams ----
		{method: get, path: "/api/teams", id: "listTeams", tag: "teams",
			summary: "The user's teams (every team for the operator)", ok: ref("TeamList"), subjects: []string{protocol.ListTeams.Subject}},
		{method: post, path: "/api/teams", id: "createTeam", tag: "teams",
			summary: "Create a team; the user becomes its owner",
			body:    object(req("id", strDesc("the team's slug")), opt("name", str()), opt("owner", strDesc("operator only: the owner"))),
			status:  http.StatusCreated, ok: ref("Team"), errs: []int{forbidden, conflict}, subjects: []string{protocol.CreateTeam.Subject}},
		{method: get, path: "/api/teams/{team}", id: "getTeam", tag: "teams",
			summary: "A team with its members and policies", params: []Parameter{teamParam}, ok: ref("TeamDetail"),
			errs: []int{bad, forbidden, notFound}, subjects: []string{protocol.GetTeam.Subject}},
		{method: patch, path: "/api/teams/{team}", id: "updateTeam", tag: "teams",
			summary: "Rename a team or switch its code tools", params: []Parameter{teamParam},
			body: object(opt("name", str()), opt("codeTools", boolean()), opt("maxAutonomy", autonomyLevel())), ok: ref("Team"),
			errs: []int{forbidden, notFound}, subjects: []string{protocol.UpdateTeam.Subject}},
		{method: del, path: "/api/teams/{team}", id: "deleteTeam", tag: "teams",
			summary: "Delete a team, its members and policies", params: []Parameter{teamParam}, ok: ref("Deleted"),
			errs: []int{bad, forbidden, notFound}, subjects: []string{protocol.DeleteTeam.Subject}},
		{method: put, path: "/api/teams/{team}/members/{user}", id: "putTeamMember", tag: "teams",
			summary: "Add a member or set a member's role (creates the user)",
			params:  []Parameter{teamParam, pathParam("user", "the user's handle")},
			body:    object(req("role", &Schema{Type: "string", Enum: roles()})), ok: ref("TeamMember"),
			errs: []int{forbidden, notFound}, subjects: []string{protocol.PutMember.Subject}},
		{method: del, path: "/api/teams/{team}/members/{user}", id: "removeTeamMember", tag: "teams",
			summary: "Remove a member", params: []Parameter{teamParam, pathParam("user", "the user's handle")}, ok: ref("Deleted"),
			errs: []int{bad, forbidden, notFound, conflict}, subjects: []string{protocol.RemoveMember.Subject}},
		{method: get, path: "/api/teams/{team}/capability-policies", id: "listTeamPolicies", tag: "teams",
			summary: "The team's blocked tools per role", params: []Parameter{teamParam}, ok: arrayOf(ref("TeamPolicy")),
			errs: []int{bad, forbidden, notFound}, subjects: []string{protocol.GetTeam.Subject}},
		{method: put, path: "/api/teams/{team}/capability-policies/{role}", id: "setTeamPolicy", tag: "teams",
			summary: "Replace one role's blocked tools (mcp__<server> blocks a whole MCP server)",
			params:  []Parameter{teamParam, {Name: "role", In: "path", Required: true, Schema: &Schema{Type: "string", Enum: roles()}}},
			body:    object(req("blockedTools", arrayOf(str()))), ok: ref("TeamPolicy"),
			errs: []int{forbidden, notFound}, subjects: []string{protocol.SetPolicy.Subject}},
		{method: get, path: "/api/tokens", id: "listTokens", tag: "teams",
			summary: "A user's tokens, never their secrets",
			params:  []Parameter{query("user", "operator only: whose tokens", str())},
			ok:      ref("TokenList"), errs: []int{bad, forbidden}, subjects: []string{protocol.ListTokens.Subject}},
		{method: post, path: "/api/tokens", id: "createToken", tag: "teams",
			summary: "Issue a token; its secret is shown once",
			body:    object(opt("name", str()), opt("user", strDesc("operator only: for whom (the user is created)"))),
			status:  http.StatusCreated, ok: ref("TokenCreated"), errs: []int{forbidden}, subjects: []string{protocol.CreateToken.Subject}},
		{method: del, path: "/api/tokens/{id}", id: "revokeToken", tag: "teams",
			summary: "Revoke a token at once", params: []Parameter{pathParam("id", "the token id")}, ok: ref("TokenInfo"),
			errs: []int{bad, forbidden, notFound}, subjects: []string{protocol.RevokeToken.Subject}},

		// ---- memory ----
		{method: get, path: "/api/memory/frames", id: "listMemoryFrames", tag: "memory",
			summary: "Personal and workspace frames, newest first",
			params: []Parameter{memWorkspace, memWorkspaceID,
				query("limit", "default 50, at most 200", &Schema{Type: "integer", Minimum: ptr(1.0), Default: 50}),
				query("since", "ISO-8601 lower bound on creation", str()), query("until", "ISO-8601 upper bound on creation", str())},
			ok: ref("MemoryFrameList"), errs: []int{bad, forbidden, notFound}, subjects: []string{protocol.ListFrames.Subject}},
		{method: post, path: "/api/memory/frames", id: "addMemoryFrame", tag: "memory",
			summary: "Store a frame (identical content is not stored twice)",
			body: object(req("content", &Schema{Type: "string", MinLength: ptr(1)}),
				opt("workspace", describe(safeID(), "the workspace mind; absent: the personal mind")), opt("workspaceId", describe(safeID(), "alias of workspace")),
				opt("importance", &Schema{OneOf: []*Schema{{Type: "string", Enum: stringsAny(protocol.Importances)},
					{Type: "integer", Minimum: ptr(1.0), Description: "the web client's 1-4: temporary, normal, important, critical"}}}),
				opt("source", &Schema{Type: "string", Enum: stringsAny(protocol.Sources), Default: protocol.SourceImport})),
			ok:   &Schema{OneOf: []*Schema{ref("MemorySaved"), ref("MemoryDuplicate")}},
			errs: []int{forbidden, notFound}, subjects: []string{protocol.AddFrame.Subject}},
		{method: put, path: "/api/memory/frames/{id}", id: "updateMemoryFrame", tag: "memory",
			summary: "Edit a frame's content (and importance)", params: []Parameter{frameParam, memWorkspace, memWorkspaceID},
			body: object(req("content", &Schema{Type: "string", MinLength: ptr(1)}),
				opt("importance", &Schema{OneOf: []*Schema{{Type: "string", Enum: stringsAny(protocol.Importances)}, {Type: "integer", Minimum: ptr(1.0)}}})),
			ok: ref("MemoryFrameUpdated"), errs: []int{forbidden, notFound}, subjects: []string{protocol.UpdateFrame.Subject}},
		{method: del, path: "/api/memory/frames/{id}", id: "deleteMemoryFrame", tag: "memory",
			summary: "Delete a frame", params: []Parameter{frameParam, memWorkspace, memWorkspaceID},
			ok:   object(req("deleted", constant(true)), req("frameId", str())),
			errs: []int{bad, forbidden, notFound}, subjects: []string{protocol.DeleteFrame.Subject}},
		{method: patch, path: "/api/memory/frames/{id}/access", id: "accessMemoryFrame", tag: "memory",
			summary: "Count one access of a frame", params: []Parameter{frameParam, memWorkspace, memWorkspaceID},
			ok:   object(req("accessCount", integer())),
			errs: []int{bad, forbidden, notFound}, subjects: []string{protocol.AccessFrame.Subject}},
		{method: get, path: "/api/memory/search", id: "searchMemory", tag: "memory",
			summary: "Hybrid search over the minds, best first",
			params: []Parameter{query("q", "the query (required)", &Schema{Type: "string", MinLength: ptr(1)}),
				query("scope", "personal, workspace, or all (global and anything else mean all)", &Schema{Type: "string", Examples: []any{protocol.MindPersonal, protocol.MindWorkspace, "all", "global"}}),
				memWorkspace, memWorkspaceID,
				query("limit", "default 20", &Schema{Type: "integer", Minimum: ptr(1.0), Default: 20}),
				query("since", "ISO-8601 lower bound on creation", str()), query("until", "ISO-8601 upper bound on creation", str())},
			ok: ref("MemoryFrameList"), errs: []int{bad, forbidden, notFound}, subjects: []string{protocol.QueryMemory.Subject}},
		{method: get, path: "/api/memory/stats", id: "memoryStats", tag: "memory",
			summary: "Frame counts of the minds and their embeddings", params: []Parameter{memWorkspace, memWorkspaceID},
			ok: ref("MemoryStats"), errs: []int{bad, forbidden, notFound}, subjects: []string{protocol.CountFrames.Subject}},

		// ---- meta ----
		{method: get, path: "/api/openapi.json", id: "getOpenAPI", tag: "meta",
			summary: "This description (OpenAPI 3.1)", ok: &Schema{Type: "object"}},
	}, desktopRoutes()...)
}

// headerTurnID is gateway.HeaderTurnID (the gateway's tests check they
// agree; this package cannot import its parent).
const headerTurnID = "X-Waggle-Turn-Id"
