package openapi

import (
	"reflect"

	"github.com/waggle-os/core/libs/personas"
	"github.com/waggle-os/core/libs/protocol"
)

// reflected are the component schemas taken from Go types, by component
// name. A struct type listed here is a $ref wherever it appears.
var reflected = map[string]reflect.Type{
	"SessionInfo":         reflect.TypeFor[protocol.SessionInfo](),
	"SessionSearchResult": reflect.TypeFor[protocol.SessionSearchResult](),
	"SearchSnippet":       reflect.TypeFor[protocol.SearchSnippet](),
	"SessionRenamed":      reflect.TypeFor[protocol.SessionRenameReply](),
	"SessionSummary":      reflect.TypeFor[protocol.SessionSummary](),
	"Deleted":             reflect.TypeFor[protocol.DeletedReply](),
	"AgentModel":          reflect.TypeFor[protocol.AgentModel](),
	"UsageSummary":        reflect.TypeFor[protocol.UsageSummary](),
	"ModelUsage":          reflect.TypeFor[protocol.ModelUsage](),
	"ActiveAgents":        reflect.TypeFor[protocol.ActiveAgents](),
	"ActiveAgent":         reflect.TypeFor[protocol.ActiveAgent](),
	"SubAgent":            reflect.TypeFor[protocol.SubAgent](),
	"AgentGroup":          reflect.TypeFor[protocol.AgentGroup](),
	"AgentGroupMember":    reflect.TypeFor[protocol.AgentGroupMember](),
	"GroupJob":            reflect.TypeFor[protocol.GroupJob](),
	"GroupJobStep":        reflect.TypeFor[protocol.GroupJobStep](),
	"CommandInfo":         reflect.TypeFor[protocol.CommandInfo](),
	"ApprovalGrant":       reflect.TypeFor[protocol.ApprovalGrant](),
	"MCPServers":          reflect.TypeFor[protocol.MCPServersReply](),
	"MCPServerStatus":     reflect.TypeFor[protocol.MCPServerStatus](),
	"MCPToolInfo":         reflect.TypeFor[protocol.MCPToolInfo](),
	"MCPServerEntry":      reflect.TypeFor[protocol.MCPServerEntry](),
	"Team":                reflect.TypeFor[protocol.Team](),
	"TeamDetail":          reflect.TypeFor[protocol.TeamDetail](),
	"TeamMember":          reflect.TypeFor[protocol.TeamMember](),
	"TeamPolicy":          reflect.TypeFor[protocol.TeamPolicy](),
	"TeamList":            reflect.TypeFor[protocol.TeamListReply](),
	"TeamListEntry":       reflect.TypeFor[protocol.TeamListEntry](),
	"TokenInfo":           reflect.TypeFor[protocol.TokenInfo](),
	"TokenCreated":        reflect.TypeFor[protocol.TokenCreated](),
	"TokenList":           reflect.TypeFor[protocol.TokenListReply](),
	"Persona":             reflect.TypeFor[personas.Persona](),
	"WorkflowPattern":     reflect.TypeFor[protocol.WorkflowPattern](),
	"MemoryStats":         reflect.TypeFor[protocol.MemoryStats](),
	"MemoryMindStats":     reflect.TypeFor[protocol.MemoryMindStats](),
	"Profile":             reflect.TypeFor[protocol.Profile](),
	"Brand":               reflect.TypeFor[protocol.Brand](),
	"WritingStyle":        reflect.TypeFor[protocol.WritingStyle](),
	"ProfileUpdate":       reflect.TypeFor[protocol.ProfileUpdate](),
	"WorkspaceNow":        reflect.TypeFor[protocol.WorkspaceNow](),
	"CustomPersona":       reflect.TypeFor[protocol.CustomPersona](),
	"CustomPersonaList":   reflect.TypeFor[protocol.CustomPersonaList](),
	"CustomPersonaWrite":  reflect.TypeFor[protocol.CustomPersonaWrite](),
	"Identity":            reflect.TypeFor[protocol.Identity](),
	"IdentityWrite":       reflect.TypeFor[protocol.IdentityWrite](),

	// Event data the gateway's own packages define.
	"TokenData":            reflect.TypeFor[protocol.TokenData](),
	"ErrorData":            reflect.TypeFor[protocol.ErrorData](),
	"StreamGapData":        reflect.TypeFor[protocol.StreamGapData](),
	"ApprovalRequiredData": reflect.TypeFor[protocol.ApprovalRequiredData](),
	"EchoDoneData":         reflect.TypeFor[protocol.EchoDone](),
}

// edits refine reflected schemas with what the types cannot say.
var edits = map[string]func(s *Schema){
	"SessionInfo": func(s *Schema) {
		s.Properties["title"].Description = "the session's title: a string, or null when it has none (a stored non-string title is passed through)"
		s.Properties["lastActive"].Format = "date-time"
		s.Properties["created"].Format = "date-time"
	},
	"AgentGroup": func(s *Schema) {
		s.Properties["strategy"].Enum = []any{protocol.StrategyParallel, protocol.StrategySequential, protocol.StrategyCoordinator}
	},
	"AgentGroupMember": func(s *Schema) {
		s.Properties["roleInGroup"].Description = "lead, worker or any other string"
	},
	"GroupJob": func(s *Schema) {
		s.Properties["status"].Enum = []any{protocol.JobQueued, protocol.JobRunning, protocol.JobCompleted, protocol.JobFailed}
	},
	"GroupJobStep": func(s *Schema) {
		s.Properties["status"].Enum = []any{protocol.StepPending, protocol.JobRunning, protocol.JobCompleted, protocol.JobFailed, protocol.StepSkipped}
		s.Properties["phase"].Enum = []any{protocol.PhasePlan, protocol.PhaseWork, protocol.PhaseCombine}
	},
	"MCPServerStatus": func(s *Schema) {
		s.Properties["state"].Enum = []any{protocol.MCPStateConnecting, protocol.MCPStateConnected, protocol.MCPStateError, protocol.MCPStateRefused, protocol.MCPStateIdle}
		s.Properties["scope"].Enum = []any{"global", "workspace"}
		s.Properties["transport"].Enum = []any{"stdio", "http"}
	},
	"MCPServerEntry": func(s *Schema) {
		s.Description = "One MCP server (Claude Desktop's format): command/args/env (stdio) or url/headers/bearer (Streamable HTTP); no other fields."
		s.Properties["type"].Enum = []any{"stdio", "http", "streamable-http", "streamableHttp"}
		s.Properties["trust"] = anyValue(`"readOnly" or a list of tool names that run without an approval`)
	},
	"TeamMember": func(s *Schema) { s.Properties["role"].Enum = roles() },
	"TeamPolicy": func(s *Schema) { s.Properties["role"].Enum = roles() },
	"ApprovalRequiredData": func(s *Schema) {
		s.Properties["requestId"].Description = "POST /api/approval/{requestId} decides the call"
		s.Properties["sourceWorkspaceId"].Description = "echo it back so an always grant is scoped to this workspace"
	},
	"StreamGapData": func(s *Schema) {
		s.Properties["missed"].Description = "how many events of the turn were discarded before this client read them"
		s.Properties["message"].Examples = []any{protocol.StreamGapText}
	},
}

func roles() []any {
	out := make([]any, len(protocol.TeamRoles))
	for i, r := range protocol.TeamRoles {
		out[i] = r
	}
	return out
}

// safeID is the safe-segment rule every ID passes.
func safeID() *Schema {
	return &Schema{Type: "string", Pattern: "^[A-Za-z0-9_-]{1,128}$"}
}

func str() *Schema                  { return &Schema{Type: "string"} }
func strDesc(d string) *Schema      { return &Schema{Type: "string", Description: d} }
func boolean() *Schema              { return &Schema{Type: "boolean"} }
func integer() *Schema              { return &Schema{Type: "integer"} }
func number() *Schema               { return &Schema{Type: "number"} }
func arrayOf(items *Schema) *Schema { return &Schema{Type: "array", Items: items} }
func constant(v any) *Schema        { return &Schema{Const: v} }
func anyValue(d string) *Schema     { return &Schema{Description: d} }

// prop is one property of an object built by hand.
type prop struct {
	name     string
	schema   *Schema
	required bool
}

func req(name string, s *Schema) prop { return prop{name, s, true} }
func opt(name string, s *Schema) prop { return prop{name, s, false} }

// object builds a closed-world object schema (other properties are not
// forbidden: clients must ignore what they do not know).
func object(props ...prop) *Schema {
	s := &Schema{Type: "object", Properties: map[string]*Schema{}}
	for _, p := range props {
		s.Properties[p.name] = p.schema
		if p.required {
			s.Required = append(s.Required, p.name)
		}
	}
	return s
}

func describe(s *Schema, d string) *Schema { s.Description = d; return s }

// handSchemas are the component schemas written out by hand: replies the
// handlers build inline, request bodies (which the handlers read field by
// field), and shapes owned by other services.
func handSchemas() map[string]*Schema {
	return map[string]*Schema{
		"Error": describe(object(
			req("error", strDesc("a message safe to show a user")),
			opt("code", strDesc("a stable machine-readable code, e.g. MESSAGE_TOO_LONG")),
		), "The error body of every JSON route."),
		"RequestError": describe(object(
			req("statusCode", integer()),
			opt("code", strDesc("e.g. FST_ERR_CTP_INVALID_JSON_BODY")),
			req("error", strDesc("the status's reason phrase")),
			req("message", strDesc("e.g. Invalid workspace: contains illegal characters")),
		), "Fastify's error shape, kept for unsafe IDs and unreadable bodies (the original's clients know it)."),
		"RateLimited": object(
			req("error", constant("Too Many Requests")),
			req("retryAfterMs", integer()),
		),
		"Health": object(
			req("status", &Schema{Type: "string", Enum: []any{"ok", "starting", "unavailable", "degraded"}}),
			req("mode", &Schema{Type: "string", Enum: []any{"local", "team"}}),
			req("timestamp", &Schema{Type: "string", Format: "date-time"}),
			opt("wsToken", strDesc("local mode only: the bearer token non-loopback clients send")),
			req("llm", object(
				req("provider", str()),
				req("health", &Schema{Type: "string", Enum: []any{"healthy", "unavailable"}}),
				opt("detail", str()),
				req("checkedAt", str()),
				req("reachable", boolean()),
				req("lastCheck", str()),
			)),
			req("database", object(req("healthy", boolean()))),
			req("nats", object(req("connected", boolean()))),
			req("defaultModel", str()),
			req("offline", boolean()),
			opt("storage", describe(object(
				req("full", constant(true)),
				req("source", strDesc("the store that is full")),
				req("reason", str()),
				opt("since", &Schema{Type: "string", Format: "date-time"}),
			), "present while a store is full (status degraded)")),
		),
		"History": object(
			req("sessionId", str()),
			req("messages", arrayOf(object(
				req("id", strDesc("hist-<index>")),
				req("role", &Schema{Type: "string", Enum: []any{protocol.RoleUser, protocol.RoleAssistant, protocol.RoleSystem}}),
				req("content", str()),
				req("timestamp", strDesc("as stored (ISO-8601)")),
				opt("turnId", strDesc("the turn that wrote the message")),
				opt("error", strDesc("set on the reply of a failed or stopped turn: why it ended (content is what was produced)")),
			))),
			req("count", integer()),
			opt("tools", describe(arrayOf(object(
				req("turnId", str()), req("callId", str()), req("name", str()),
				req("input", anyValue("the call's arguments as the model sent them")),
				req("result", str()), req("isError", boolean()),
				req("status", &Schema{Type: "string", Enum: []any{"success", "error", "denied"}}),
				opt("durationMs", integer()), opt("parent", strDesc("callId of the spawn_agent call it ran under")),
				req("timestamp", str()),
			)), "the session's tool events in file order; absent when there are none")),
		),
		"Workspace": describe(&Schema{Type: "object", Properties: map[string]*Schema{
			"id":        safeID(),
			"name":      str(),
			"group":     str(),
			"model":     str(),
			"persona":   describe(str(), "the workspace's persona (older key; personaId wins)"),
			"personaId": describe(str(), "the workspace's persona, the original's key"),
			"tone":      describe(str(), "professional, casual, technical, legal, marketing, or the user's own words"),
			"teamId":    str(),
			"directory": str(),
			"budget":    &Schema{Type: "number", Minimum: ptr(0.0)},
			"created":   &Schema{Type: "string", Format: "date-time"},
		}, Required: []string{"id", "name", "created"}},
			"A workspace's config. Fields other than these are stored and returned as sent."),
		"WorkspaceMCPServers": describe(object(
			req("mcpServers", &Schema{Type: "object", AdditionalProperties: ref("MCPServerEntry")}),
		), "A workspace's own MCP servers by name ({} or null on PUT removes them)."),
		"WorkspaceWrite": describe(&Schema{Type: "object", Properties: map[string]*Schema{
			"name":      str(),
			"group":     str(),
			"model":     str(),
			"persona":   describe(str(), "the workspace's persona (older key; personaId wins)"),
			"personaId": describe(str(), "the workspace's persona, the original's key"),
			"tone":      describe(str(), "professional, casual, technical, legal, marketing, or the user's own words"),
			"teamId":    describe(&Schema{Type: []string{"string", "null"}}, "the owning team (team servers); a workspace created with one lives in PostgreSQL"),
			"directory": str(),
			"budget":    &Schema{Type: "number", Minimum: ptr(0.0)},
		}}, "On create name is required; on update the fields are merged (null removes one; id and created never change). mcpServers is refused (400 MCP_SERVERS_ROUTE): it is set with PUT /api/workspaces/{id}/mcp-servers."),
		"TimelineEvent": object(
			req("id", str()),
			req("timestamp", str()),
			req("toolName", str()),
			req("status", &Schema{Type: "string", Enum: []any{"success", "error", "denied"}}),
			req("durationMs", &Schema{Type: []string{"integer", "null"}}),
			req("inputPreview", str()),
			req("outputPreview", str()),
			req("fullInput", anyValue("the call's input")),
			req("fullOutput", anyValue("the call's result")),
			opt("children", describe(arrayOf(ref("TimelineEvent")), "present exactly on spawn_agent calls: the calls made under it")),
		),
		"Autonomy": describe(object(
			opt("level", autonomyLevel()),
			opt("expiresAt", describe(integer(), "Unix milliseconds; past it the level is normal")),
		), "Relaxes the tool-approval gate for this request. Anything but exactly these two keys (a malformed, expired or unknown level, an unknown or repeated key) means normal, never an error. On a team server the team's maxAutonomy caps it."),
		"ChatRequest": object(
			req("message", &Schema{Type: "string", MinLength: ptr(1), Description: "the user's turn; at most --max-message-length UTF-16 units (default 50000)"}),
			opt("workspace", describe(safeID(), "default \"default\"; wins over workspaceId")),
			opt("workspaceId", describe(safeID(), "alias of workspace")),
			opt("session", describe(safeID(), "default: the workspace; wins over sessionId")),
			opt("sessionId", describe(safeID(), "alias of session")),
			opt("model", strDesc("model override")),
			opt("persona", strDesc("persona id for this request (GET /api/personas)")),
			opt("workspacePath", strDesc("working directory; must resolve inside the data directory")),
			opt("autonomy", ref("Autonomy")),
			opt("multitask", &Schema{Type: "string", Enum: []any{protocol.MultitaskQueue, protocol.MultitaskReject, protocol.MultitaskInterrupt},
				Default: protocol.MultitaskQueue, Description: "what happens when the session already runs a turn"}),
		),
		"AgentRunRequest": object(
			req("question", &Schema{Type: "string", MinLength: ptr(1)}),
			opt("shape", &Schema{Type: "string", Description: "prompt shape; an unknown one falls back to the model's default", Examples: stringsAny(protocol.AgentRunShapes)}),
			opt("model", &Schema{Type: "string", Default: protocol.DefaultAgentModel}),
			opt("persona", &Schema{Type: "string", Default: "general-purpose"}),
			opt("workspace", describe(safeID(), "\"personal\" or absent: the personal workspace; wins over workspaceId")),
			opt("workspaceId", describe(safeID(), "alias of workspace")),
			opt("maxSteps", &Schema{Type: "integer", Minimum: ptr(1.0), Default: 5}),
			opt("maxRetrievalsPerStep", &Schema{Type: "integer", Minimum: ptr(1.0), Default: 8}),
		),
		"AgentStatus": object(
			req("running", boolean()),
			req("model", str()),
			req("tokensUsed", integer()),
			req("estimatedCost", number()),
			req("turns", integer()),
			req("usage", ref("UsageSummary")),
		),
		"AgentCost": describe(object(
			req("summary", strDesc("Tokens: <in> in / <out> out (<turns> turns) | Est. cost: $<cost>")),
			req("totalInputTokens", integer()),
			req("totalOutputTokens", integer()),
			req("estimatedCost", number()),
			req("turns", integer()),
			req("byModel", &Schema{Type: "object", AdditionalProperties: ref("ModelUsage")}),
		), "The summary line with the usage totals spread beside it."),
		"AgentGroupWrite": describe(object(
			opt("name", str()),
			opt("description", &Schema{Type: []string{"string", "null"}}),
			opt("strategy", &Schema{Type: "string", Enum: []any{protocol.StrategyParallel, protocol.StrategySequential, protocol.StrategyCoordinator}}),
			opt("members", arrayOf(ref("AgentGroupMember"))),
		), "On create name, strategy and members are required; on update any subset is merged."),
		"GroupRunQueued": object(
			req("jobId", str()),
			req("groupId", str()),
			req("groupName", str()),
			req("strategy", str()),
			req("memberCount", integer()),
			req("task", str()),
			req("status", constant(protocol.JobQueued)),
		),
		"PendingApproval": object(
			req("requestId", str()),
			req("toolName", str()),
			req("input", anyValue("the tool call's input")),
			req("timestamp", describe(integer(), "Unix milliseconds")),
		),
		"Ok":                 object(req("ok", constant(true))),
		"MemoryFrame":        memoryFrame(false),
		"MemoryFrameUpdated": memoryFrame(true),
		"MemoryFrameList":    object(req("results", arrayOf(ref("MemoryFrame"))), req("count", integer())),
		"MemorySaved": object(req("saved", constant(true)), req("frameId", str()), req("mind", mind()),
			req("importance", &Schema{Type: "string", Enum: stringsAny(protocol.Importances)}), req("source", &Schema{Type: "string", Enum: stringsAny(protocol.Sources)})),
		"MemoryDuplicate": object(req("saved", constant(false)), req("duplicate", constant(true)), req("frameId", str()), req("mind", mind()), req("message", str())),
	}
}

func mind() *Schema {
	return &Schema{Type: "string", Enum: []any{protocol.MindPersonal, protocol.MindWorkspace}}
}

// memoryFrame is a frame in the original server's shape (memoryapi's
// frame); updated adds the updated flag of PUT.
func memoryFrame(updated bool) *Schema {
	s := object(
		req("id", str()),
		req("content", str()),
		req("source", &Schema{Type: "string", Enum: stringsAny(protocol.Sources)}),
		req("source_mind", mind()),
		req("mind", mind()),
		opt("workspaceId", strDesc("the workspace of a workspace frame")),
		req("frameType", constant("I")),
		req("importance", &Schema{Type: "string", Enum: stringsAny(protocol.Importances)}),
		req("timestamp", str()),
		req("created_at", str()),
		req("updated_at", str()),
		opt("score", describe(number(), "search hits only: the fused rank score")),
		req("accessCount", integer()),
		opt("tags", arrayOf(str())),
	)
	if updated {
		s.Properties["updated"] = constant(true)
		s.Required = append(s.Required, "updated")
	}
	return s
}

func stringsAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// autonomyLevel is the schema of an autonomy level (protocol.AutonomyLevels).
func autonomyLevel() *Schema {
	levels := make([]any, len(protocol.AutonomyLevels))
	for i, l := range protocol.AutonomyLevels {
		levels[i] = l
	}
	return &Schema{Type: "string", Enum: levels}
}
