package teamauth

import (
	"net/http"
	"strings"

	"github.com/waggle-os/core/libs/protocol"
)

// scope says where a route finds the workspace (or team) it acts on.
type scope int

const (
	// scopeGlobal routes act on no workspace and no team: any user may
	// read; writing them is the operator's (refused on a team server).
	// Being more than a viewer in some team is no right here: anyone may
	// create a team of their own.
	scopeGlobal scope = iota
	// scopeOperator routes change what every team shares (the agent
	// model, the cost totals): the operator's, even to read when they
	// are not plain reads.
	scopeOperator
	// scopeSelf routes act on the user's own things, or check the team
	// themselves from stored state (tokens, approvals, a turn's
	// workspace): any authenticated user.
	scopeSelf
	// scopeTeams routes are the teams admin API: the teams service checks
	// the team role itself.
	scopeTeams
	// scopeWorkspaceParam routes name the workspace in the {id} path
	// parameter.
	scopeWorkspaceParam
	// scopeWorkspaceQuery routes name it in ?workspace= (default
	// "default", as the handlers do).
	scopeWorkspaceQuery
	// scopeWorkspaceQueryRequired routes name it in ?workspace=; without
	// it the handler would search every workspace, so it is required.
	scopeWorkspaceQueryRequired
	// scopeWorkspaceBody routes name it in the JSON body.
	scopeWorkspaceBody
	// scopeWorkspaceQueryOptional routes name it in ?workspace= or
	// ?workspaceId=; without one they act on the user's personal mind
	// only (the memory API).
	scopeWorkspaceQueryOptional
	// scopeWorkspaceList is GET /api/workspaces, filtered to the user's
	// teams.
	scopeWorkspaceList
	// scopeWorkspaceCreate is POST /api/workspaces: the body's teamId
	// must be a team the user may write in.
	scopeWorkspaceCreate
	// scopeGroupList is GET /api/agent-groups: the handler shows only
	// the groups of the user's teams.
	scopeGroupList
	// scopeGroupCreate is POST /api/agent-groups: the body's teamId must
	// be a team the user administers.
	scopeGroupCreate
	// scopeGroup routes name an agent group in {id}: the group's team
	// decides (a group of no team, or of a team the user is not in, is
	// not found).
	scopeGroup
	// scopeTeamQuery routes act on one team's things (its vault), named
	// in ?team=: required on a team server, checked with the rule's
	// action on that team.
	scopeTeamQuery
)

// rule is how the middleware treats one route.
type rule struct {
	scope  scope
	action string
	// bodyKeys are the body fields naming the workspace (aliases of one
	// another: when more than one is sent they must agree); bodyDefault
	// is used when none names one.
	bodyKeys    []string
	bodyDefault string
	// queryKeys are the query parameters naming the workspace (aliases);
	// queryDefault as bodyDefault.
	queryKeys    []string
	queryDefault string
	// teamBody says the body may carry a teamId to check.
	teamBody bool
	// group says {id} names an agent group the user must be able to read
	// (besides the workspace the route acts on).
	group bool
	// personal is the workspace value that names the user's personal
	// mind rather than a workspace (agent/run's "personal").
	personal string
	// needWorkspace says a team server refuses the route without a
	// workspace (the handler would fall back to the shared "default").
	needWorkspace bool
}

// workspaceAliases are the two names the original accepts for a
// workspace (DESIGN §9).
var workspaceAliases = []string{"workspace", "workspaceId"}

// rules maps "METHOD pattern" to its rule. Anything else is scopeGlobal:
// reads for GET and HEAD, writes (operator-only) otherwise.
var rules = map[string]rule{
	"POST /api/chat":           {scope: scopeWorkspaceBody, action: protocol.ActionChat, bodyKeys: workspaceAliases, bodyDefault: "default"},
	"DELETE /api/chat/history": {scope: scopeWorkspaceQuery, action: protocol.ActionWrite, queryKeys: []string{"workspace"}, queryDefault: "default"},
	"GET /api/history":         {scope: scopeWorkspaceQuery, action: protocol.ActionRead, queryKeys: []string{"workspace"}, queryDefault: "default"},
	"POST /api/agent/abort":    {scope: scopeWorkspaceBody, action: protocol.ActionWrite, bodyKeys: []string{"workspaceId", "workspace"}},
	// A retrieval run reads the workspace it names; "personal" (or none)
	// is the user's own mind.
	"POST /api/agent/run": {scope: scopeWorkspaceBody, action: protocol.ActionRead, bodyKeys: workspaceAliases, personal: "personal"},

	"GET /api/workspaces":         {scope: scopeWorkspaceList, action: protocol.ActionRead},
	"POST /api/workspaces":        {scope: scopeWorkspaceCreate, action: protocol.ActionWrite, teamBody: true},
	"GET /api/workspaces/{id}":    {scope: scopeWorkspaceParam, action: protocol.ActionRead},
	"PATCH /api/workspaces/{id}":  {scope: scopeWorkspaceParam, action: protocol.ActionAdmin, teamBody: true},
	"DELETE /api/workspaces/{id}": {scope: scopeWorkspaceParam, action: protocol.ActionAdmin},

	"GET /api/workspaces/{id}/sessions":                      {scope: scopeWorkspaceParam, action: protocol.ActionRead},
	"POST /api/workspaces/{id}/sessions":                     {scope: scopeWorkspaceParam, action: protocol.ActionWrite},
	"GET /api/workspaces/{id}/sessions/search":               {scope: scopeWorkspaceParam, action: protocol.ActionRead},
	"GET /api/workspaces/{id}/sessions/{sessionId}/export":   {scope: scopeWorkspaceParam, action: protocol.ActionRead},
	"GET /api/workspaces/{id}/sessions/{sessionId}/timeline": {scope: scopeWorkspaceParam, action: protocol.ActionRead},
	"POST /api/workspaces/{id}/sessions/{sessionId}/branch":  {scope: scopeWorkspaceParam, action: protocol.ActionWrite},
	"PATCH /api/sessions/{sessionId}":                        {scope: scopeWorkspaceQueryRequired, action: protocol.ActionWrite, queryKeys: []string{"workspace"}},
	"DELETE /api/sessions/{sessionId}":                       {scope: scopeWorkspaceQueryRequired, action: protocol.ActionWrite, queryKeys: []string{"workspace"}},
	"GET /api/sessions/{sessionId}/summary":                  {scope: scopeWorkspaceQueryRequired, action: protocol.ActionRead, queryKeys: []string{"workspace"}},
	"POST /api/commands/execute":                             {scope: scopeWorkspaceBody, action: protocol.ActionChat, bodyKeys: []string{"workspaceId"}, bodyDefault: "default"},
	"GET /api/mcp/servers":                                   {scope: scopeWorkspaceQuery, action: protocol.ActionRead, queryKeys: []string{"workspace"}, queryDefault: "default"},
	"GET /api/workspaces/{id}/mcp-servers":                   {scope: scopeWorkspaceParam, action: protocol.ActionAdmin},
	"PUT /api/workspaces/{id}/mcp-servers":                   {scope: scopeWorkspaceParam, action: protocol.ActionAdmin},

	"GET /api/memory/frames":               {scope: scopeWorkspaceQueryOptional, action: protocol.ActionRead, queryKeys: workspaceAliases},
	"POST /api/memory/frames":              {scope: scopeWorkspaceBody, action: protocol.ActionWrite, bodyKeys: workspaceAliases},
	"PUT /api/memory/frames/{id}":          {scope: scopeWorkspaceQueryOptional, action: protocol.ActionWrite, queryKeys: workspaceAliases},
	"DELETE /api/memory/frames/{id}":       {scope: scopeWorkspaceQueryOptional, action: protocol.ActionWrite, queryKeys: workspaceAliases},
	"PATCH /api/memory/frames/{id}/access": {scope: scopeWorkspaceQueryOptional, action: protocol.ActionWrite, queryKeys: workspaceAliases},
	"GET /api/memory/search":               {scope: scopeWorkspaceQueryOptional, action: protocol.ActionRead, queryKeys: workspaceAliases},
	"GET /api/memory/stats":                {scope: scopeWorkspaceQueryOptional, action: protocol.ActionRead, queryKeys: workspaceAliases},
	"GET /api/memory/graph":                {scope: scopeWorkspaceQueryOptional, action: protocol.ActionRead, queryKeys: workspaceAliases},
	"POST /api/memory/graph/{id}/retire":   {scope: scopeWorkspaceQueryOptional, action: protocol.ActionWrite, queryKeys: workspaceAliases},
	"POST /api/memory/graph/{id}/restore":  {scope: scopeWorkspaceQueryOptional, action: protocol.ActionWrite, queryKeys: workspaceAliases},

	// The profile is the signed-in user's own; the briefing reads the
	// workspace named in {id}.
	"GET /api/profile":       {scope: scopeSelf, action: protocol.ActionRead},
	"PUT /api/profile":       {scope: scopeSelf, action: protocol.ActionWrite},
	"GET /api/profile/style": {scope: scopeSelf, action: protocol.ActionRead},
	"GET /api/profile/brand": {scope: scopeSelf, action: protocol.ActionRead},
	// The analyses write the caller's own profile from what a model
	// read (text they sent, their own profile).
	"POST /api/profile/analyze-style":  {scope: scopeSelf, action: protocol.ActionWrite},
	"POST /api/profile/analyze-brand":  {scope: scopeSelf, action: protocol.ActionWrite},
	"POST /api/profile/research":       {scope: scopeSelf, action: protocol.ActionWrite},
	"GET /api/workspaces/{id}/context": {scope: scopeWorkspaceParam, action: protocol.ActionRead},
	// Custom personas are the signed-in user's own (one set per user);
	// the list adds the shared personas of the team of the workspace it
	// names. A team's shared personas: its members read them, its admins
	// change them (they shape every member's agent).
	"GET /api/personas":              {scope: scopeWorkspaceQueryOptional, action: protocol.ActionRead, queryKeys: workspaceAliases},
	"GET /api/team-personas":         {scope: scopeTeamQuery, action: protocol.ActionRead},
	"POST /api/team-personas":        {scope: scopeTeamQuery, action: protocol.ActionAdmin},
	"PATCH /api/team-personas/{id}":  {scope: scopeTeamQuery, action: protocol.ActionAdmin},
	"DELETE /api/team-personas/{id}": {scope: scopeTeamQuery, action: protocol.ActionAdmin},
	"POST /api/personas":             {scope: scopeSelf, action: protocol.ActionWrite},
	"PATCH /api/personas/{id}":       {scope: scopeSelf, action: protocol.ActionWrite},
	"DELETE /api/personas/{id}":      {scope: scopeSelf, action: protocol.ActionWrite},
	// Identity and awareness belong to a mind: the workspace named (or,
	// without one or with "personal", the caller's own). A workspace's
	// identity shapes every member's agent: changing it is the admin's.
	"GET /api/identity":       {scope: scopeWorkspaceQueryOptional, action: protocol.ActionRead, queryKeys: workspaceAliases, personal: "personal"},
	"POST /api/identity":      {scope: scopeWorkspaceBody, action: protocol.ActionAdmin, bodyKeys: workspaceAliases, personal: "personal"},
	"GET /api/mind/identity":  {scope: scopeWorkspaceQueryOptional, action: protocol.ActionRead, queryKeys: workspaceAliases, personal: "personal"},
	"GET /api/mind/awareness": {scope: scopeWorkspaceQueryOptional, action: protocol.ActionRead, queryKeys: workspaceAliases, personal: "personal"},
	"GET /api/mind/skills":    {scope: scopeWorkspaceQueryOptional, action: protocol.ActionRead, queryKeys: workspaceAliases, personal: "personal"},

	// The agent model and the cost totals are shared by every team.
	"PUT /api/agent/model":       {scope: scopeOperator, action: protocol.ActionAdmin},
	"POST /api/agent/cost/reset": {scope: scopeOperator, action: protocol.ActionAdmin},
	// The usage totals add up every team's turns: one team must not read
	// another's spending or activity, so they are the operator's too.
	"GET /api/agent/cost":   {scope: scopeOperator, action: protocol.ActionRead},
	"GET /api/agent/status": {scope: scopeOperator, action: protocol.ActionRead},

	// Agent groups belong to a team: listing shows the user's teams'
	// groups, editing needs admin there, running needs chat in the
	// workspace the run writes to.
	"GET /api/agent-groups":                   {scope: scopeGroupList, action: protocol.ActionRead},
	"POST /api/agent-groups":                  {scope: scopeGroupCreate, action: protocol.ActionAdmin, teamBody: true},
	"GET /api/agent-groups/{id}":              {scope: scopeGroup, action: protocol.ActionRead, group: true},
	"PATCH /api/agent-groups/{id}":            {scope: scopeGroup, action: protocol.ActionAdmin, group: true},
	"DELETE /api/agent-groups/{id}":           {scope: scopeGroup, action: protocol.ActionAdmin, group: true},
	"GET /api/agent-groups/{id}/runs/{jobId}": {scope: scopeGroup, action: protocol.ActionRead, group: true},
	"POST /api/agent-groups/{id}/run":         {scope: scopeWorkspaceBody, action: protocol.ActionChat, bodyKeys: []string{"workspaceId"}, group: true, needWorkspace: true},

	// These check the user themselves: their own tokens, approvals
	// (approvalapi/scope.go), a turn's stored workspace (turns.go).
	"GET /api/tokens":                      {scope: scopeSelf, action: protocol.ActionRead},
	"POST /api/tokens":                     {scope: scopeSelf, action: protocol.ActionWrite},
	"DELETE /api/tokens/{id}":              {scope: scopeSelf, action: protocol.ActionWrite},
	"DELETE /api/approval/grants/{id}":     {scope: scopeSelf, action: protocol.ActionWrite},
	"POST /api/approval/grants/clear":      {scope: scopeSelf, action: protocol.ActionWrite},
	"POST /api/approval/{requestId}":       {scope: scopeSelf, action: protocol.ActionWrite},
	"POST /api/chat/turns/{turnId}/cancel": {scope: scopeSelf, action: protocol.ActionWrite},

	// The vault holds a team's secrets: its admins only, even to list
	// names. Local mode has one vault (no team).
	"GET /api/vault":                {scope: scopeTeamQuery, action: protocol.ActionAdmin},
	"POST /api/vault":               {scope: scopeTeamQuery, action: protocol.ActionAdmin},
	"DELETE /api/vault/{name}":      {scope: scopeTeamQuery, action: protocol.ActionAdmin},
	"POST /api/vault/{name}/reveal": {scope: scopeTeamQuery, action: protocol.ActionAdmin},

	// A workspace's files: its members read, viewers no more.
	"GET /api/workspaces/{id}/files/list":     {scope: scopeWorkspaceParam, action: protocol.ActionRead},
	"GET /api/workspaces/{id}/files/download": {scope: scopeWorkspaceParam, action: protocol.ActionRead},
	"POST /api/workspaces/{id}/files/upload":  {scope: scopeWorkspaceParam, action: protocol.ActionWrite},
	"POST /api/workspaces/{id}/files/mkdir":   {scope: scopeWorkspaceParam, action: protocol.ActionWrite},
	"POST /api/workspaces/{id}/files/delete":  {scope: scopeWorkspaceParam, action: protocol.ActionWrite},
	"POST /api/workspaces/{id}/files/move":    {scope: scopeWorkspaceParam, action: protocol.ActionWrite},
	"POST /api/workspaces/{id}/files/copy":    {scope: scopeWorkspaceParam, action: protocol.ActionWrite},

	// Notifications: every user reads and marks their own.
	"GET /api/notifications/stream":      {scope: scopeSelf, action: protocol.ActionRead},
	"GET /api/notifications":             {scope: scopeSelf, action: protocol.ActionRead},
	"GET /api/notifications/history":     {scope: scopeSelf, action: protocol.ActionRead},
	"POST /api/notifications/{id}/read":  {scope: scopeSelf, action: protocol.ActionWrite},
	"PATCH /api/notifications/{id}/read": {scope: scopeSelf, action: protocol.ActionWrite},
	"POST /api/notifications/read-all":   {scope: scopeSelf, action: protocol.ActionWrite},

	// A group run's job: the handler checks the job's team (and, to
	// cancel, write in the run's workspace).
	"GET /api/jobs/{id}":         {scope: scopeSelf, action: protocol.ActionRead},
	"POST /api/jobs/{id}/cancel": {scope: scopeSelf, action: protocol.ActionWrite},

	// config.json is the server's: any user may read the models and
	// budget, only the operator changes them (a team server's settings
	// are its flags and files). test-key makes the server call the model
	// server with a caller's key: the operator's too.
	"GET /api/settings":             {scope: scopeGlobal, action: protocol.ActionRead},
	"PUT /api/settings":             {scope: scopeOperator, action: protocol.ActionAdmin},
	"PATCH /api/settings":           {scope: scopeOperator, action: protocol.ActionAdmin},
	"GET /api/settings/permissions": {scope: scopeGlobal, action: protocol.ActionRead},
	"PUT /api/settings/permissions": {scope: scopeOperator, action: protocol.ActionAdmin},
	"POST /api/settings/test-key":   {scope: scopeOperator, action: protocol.ActionAdmin},
	"GET /api/providers":            {scope: scopeGlobal, action: protocol.ActionRead},
	"GET /api/litellm/models":       {scope: scopeGlobal, action: protocol.ActionRead},
	"GET /api/litellm/status":       {scope: scopeGlobal, action: protocol.ActionRead},
	"GET /api/litellm/pricing":      {scope: scopeGlobal, action: protocol.ActionRead},
	"GET /api/tier":                 {scope: scopeGlobal, action: protocol.ActionRead},
}

// ruleFor is the rule of a matched route.
func ruleFor(method, pattern string) rule {
	if r, ok := rules[method+" "+pattern]; ok {
		return r
	}
	if pattern == "/api/teams" || strings.HasPrefix(pattern, "/api/teams/") {
		return rule{scope: scopeTeams, action: protocol.ActionRead}
	}
	if method == http.MethodGet || method == http.MethodHead {
		return rule{scope: scopeGlobal, action: protocol.ActionRead}
	}
	return rule{scope: scopeGlobal, action: protocol.ActionWrite}
}
