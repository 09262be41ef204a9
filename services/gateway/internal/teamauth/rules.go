package teamauth

import (
	"net/http"

	"github.com/waggle-os/core/libs/protocol"
)

// scope says where a route finds the workspace it acts on.
type scope int

const (
	// scopeGlobal routes act on no workspace: any user may read; writing
	// needs a non-viewer role in some team.
	scopeGlobal scope = iota
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
)

// rule is how the middleware treats one route.
type rule struct {
	scope  scope
	action string
	// bodyKeys are the body fields naming the workspace, first present
	// wins; bodyDefault is used when none is present.
	bodyKeys    []string
	bodyDefault string
	// teamBody says the body may carry a teamId to check.
	teamBody bool
}

// rules maps "METHOD pattern" to its rule. Anything else is scopeGlobal:
// reads for GET and HEAD, writes otherwise.
var rules = map[string]rule{
	"POST /api/chat":           {scope: scopeWorkspaceBody, action: protocol.ActionChat, bodyKeys: []string{"workspace", "workspaceId"}, bodyDefault: "default"},
	"DELETE /api/chat/history": {scope: scopeWorkspaceQuery, action: protocol.ActionWrite},
	"GET /api/history":         {scope: scopeWorkspaceQuery, action: protocol.ActionRead},
	"POST /api/agent/abort":    {scope: scopeWorkspaceBody, action: protocol.ActionWrite, bodyKeys: []string{"workspaceId", "workspace"}, bodyDefault: "default"},

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
	"PATCH /api/sessions/{sessionId}":                        {scope: scopeWorkspaceQueryRequired, action: protocol.ActionWrite},
	"DELETE /api/sessions/{sessionId}":                       {scope: scopeWorkspaceQueryRequired, action: protocol.ActionWrite},
	"GET /api/sessions/{sessionId}/summary":                  {scope: scopeWorkspaceQueryRequired, action: protocol.ActionRead},
	"POST /api/commands/execute":                             {scope: scopeWorkspaceBody, action: protocol.ActionChat, bodyKeys: []string{"workspaceId"}, bodyDefault: "default"},
	"POST /api/agent-groups/{id}/run":                        {scope: scopeWorkspaceBody, action: protocol.ActionChat, bodyKeys: []string{"workspaceId"}},
	"GET /api/mcp/servers":                                   {scope: scopeWorkspaceQuery, action: protocol.ActionRead},
	"GET /api/workspaces/{id}/mcp-servers":                   {scope: scopeWorkspaceParam, action: protocol.ActionAdmin},
	"PUT /api/workspaces/{id}/mcp-servers":                   {scope: scopeWorkspaceParam, action: protocol.ActionAdmin},

	"GET /api/memory/frames":               {scope: scopeWorkspaceQueryOptional, action: protocol.ActionRead},
	"POST /api/memory/frames":              {scope: scopeWorkspaceBody, action: protocol.ActionWrite, bodyKeys: []string{"workspace", "workspaceId"}},
	"PUT /api/memory/frames/{id}":          {scope: scopeWorkspaceQueryOptional, action: protocol.ActionWrite},
	"DELETE /api/memory/frames/{id}":       {scope: scopeWorkspaceQueryOptional, action: protocol.ActionWrite},
	"PATCH /api/memory/frames/{id}/access": {scope: scopeWorkspaceQueryOptional, action: protocol.ActionWrite},
	"GET /api/memory/search":               {scope: scopeWorkspaceQueryOptional, action: protocol.ActionRead},
	"GET /api/memory/stats":                {scope: scopeWorkspaceQueryOptional, action: protocol.ActionRead},
}

// ruleFor is the rule of a matched route.
func ruleFor(method, pattern string) rule {
	if r, ok := rules[method+" "+pattern]; ok {
		return r
	}
	if pattern == "/api/teams" || len(pattern) > len("/api/teams/") && pattern[:len("/api/teams/")] == "/api/teams/" {
		return rule{scope: scopeTeams, action: protocol.ActionRead}
	}
	if method == http.MethodGet || method == http.MethodHead {
		return rule{scope: scopeGlobal, action: protocol.ActionRead}
	}
	return rule{scope: scopeGlobal, action: protocol.ActionWrite}
}
