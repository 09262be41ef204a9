package protocol

import "time"

// Team roles, from most to least powerful.
const (
	TeamRoleOwner  = "owner"
	TeamRoleAdmin  = "admin"
	TeamRoleMember = "member"
	TeamRoleViewer = "viewer"
)

// TeamRoles lists every team role, most powerful first.
var TeamRoles = []string{TeamRoleOwner, TeamRoleAdmin, TeamRoleMember, TeamRoleViewer}

// Actions a user may ask to take on a workspace or team.
const (
	// ActionRead reads a workspace (any role).
	ActionRead = "read"
	// ActionWrite changes a workspace's data (member and up).
	ActionWrite = "write"
	// ActionChat sends a chat message (member and up).
	ActionChat = "chat"
	// ActionAdmin changes a workspace's or team's settings (admin and up).
	ActionAdmin = "admin"
)

// Error codes of the team-server mode.
const (
	CodeMissingToken   = "MISSING_TOKEN"
	CodeInvalidToken   = "INVALID_TOKEN"
	CodeViewerReadOnly = "VIEWER_READ_ONLY"
	CodeForbidden      = "FORBIDDEN"
)

// Messages of the team-server errors (reference §1.2 step 6 for chat).
const (
	MsgViewerChat  = "Viewers cannot send messages in team workspaces. Ask a team admin to upgrade your role."
	MsgViewerWrite = "Viewers cannot make changes in team workspaces. Ask a team admin to upgrade your role."
)

// CodeTools are the tools that run code on the host. In team-server mode
// they are blocked for every role until a team admin enables them
// (Team.CodeTools).
var CodeTools = []string{"bash"}

// GovernanceBlockedText is the tool_result a model gets when it calls a
// tool its team's policy blocks (reference §1.9).
func GovernanceBlockedText(tool string) string {
	return `Tool "` + tool + `" is blocked by your team's governance policy. Contact your team admin to request access, or use the request_team_capability tool to submit a request.`
}

// TeamUser is an authenticated person. ID is a ValidID handle ("alice").
type TeamUser struct {
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
}

// Team is a group of users sharing workspaces. ID is the team's slug
// (lower-case letters, digits, '-'); a workspace's teamId names it.
type Team struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// CodeTools enables the tools that run code on the host (CodeTools)
	// for the team's non-viewer roles. Off by default.
	CodeTools bool `json:"codeTools"`
	// MaxAutonomy is the highest autonomy level (Autonomy*) a chat in the
	// team's workspaces runs at, whoever sends it; a request above it is
	// lowered. Default AutonomyNormal; set by the team's admins.
	MaxAutonomy string    `json:"maxAutonomy"`
	Created     time.Time `json:"created"`
}

// TeamMembership is one team a user belongs to, with the user's role.
type TeamMembership struct {
	Team string `json:"team"`
	Role string `json:"role"`
}

// TeamMember is one member of a team.
type TeamMember struct {
	Team    string    `json:"team"`
	User    string    `json:"user"`
	Role    string    `json:"role"`
	Created time.Time `json:"created"`
}

// TeamPolicy is the capability policy of one role of a team.
type TeamPolicy struct {
	Team         string    `json:"team"`
	Role         string    `json:"role"`
	BlockedTools []string  `json:"blockedTools"`
	Updated      time.Time `json:"updated"`
}

// TeamDetail is a team with its members and policies.
type TeamDetail struct {
	Team
	Members  []TeamMember `json:"members"`
	Policies []TeamPolicy `json:"policies"`
}

// AuthenticateRequest checks Token and, when Workspace is set, Action on
// that workspace.
type AuthenticateRequest struct {
	Token     string `json:"token"`
	Workspace string `json:"workspace,omitempty"`
	Action    string `json:"action,omitempty"`
}

// AuthenticateReply names the token's user, every team they belong to and,
// when a workspace was named, its team and the user's role there (both
// empty for a personal workspace).
type AuthenticateReply struct {
	User  string           `json:"user"`
	Teams []TeamMembership `json:"teams"`
	Team  string           `json:"team,omitempty"`
	Role  string           `json:"role,omitempty"`
}

// AuthorizeRequest checks that User may take Action on Workspace, or on
// Team when no workspace is named.
type AuthorizeRequest struct {
	User      string `json:"user"`
	Workspace string `json:"workspace,omitempty"`
	Team      string `json:"team,omitempty"`
	Action    string `json:"action"`
}

// AuthorizeReply is the team the request concerns and the user's role.
type AuthorizeReply struct {
	Team string `json:"team"`
	Role string `json:"role"`
}

// ToolPolicyRequest asks which tools User may not use in Workspace. An
// empty User asks for the workspace's strictest non-viewer view: the
// blocked tools of the "member" role.
type ToolPolicyRequest struct {
	User      string `json:"user,omitempty"`
	Workspace string `json:"workspace"`
}

// ToolPolicy lists the blocked tools of a turn. Governed is false for a
// personal workspace (nothing blocked).
type ToolPolicy struct {
	Governed     bool     `json:"governed"`
	Team         string   `json:"team,omitempty"`
	Role         string   `json:"role,omitempty"`
	BlockedTools []string `json:"blockedTools"`
	// MaxAutonomy is the team's Team.MaxAutonomy for a governed turn.
	MaxAutonomy string `json:"maxAutonomy,omitempty"`
}

// AutonomyCap is the highest autonomy level the turn may run at and
// whether there is one: a governed turn is capped at its team's level (at
// "normal" when that is missing or unknown, so an answer from an older
// store fails closed); a personal workspace's turn is not capped.
func (p ToolPolicy) AutonomyCap() (string, bool) {
	if !p.Governed {
		return "", false
	}
	if !ValidAutonomy(p.MaxAutonomy) {
		return AutonomyNormal, true
	}
	return p.MaxAutonomy, true
}

// Blocks reports whether tool is blocked.
func (p ToolPolicy) Blocks(tool string) bool {
	for _, t := range p.BlockedTools {
		if t == tool {
			return true
		}
	}
	return false
}

// TeamPolicyChanged is published on PolicyChanges.
type TeamPolicyChanged struct {
	Team string `json:"team"`
}

// TeamCreateRequest creates team ID (a slug). The actor becomes its owner;
// the operator names the owner in Owner (optional).
type TeamCreateRequest struct {
	Actor string `json:"actor,omitempty"`
	ID    string `json:"id"`
	Name  string `json:"name,omitempty"`
	Owner string `json:"owner,omitempty"`
}

// TeamListRequest lists the actor's teams.
type TeamListRequest struct {
	Actor string `json:"actor,omitempty"`
}

// TeamListReply lists teams with the actor's role (empty for the operator).
type TeamListReply struct {
	Teams []TeamListEntry `json:"teams"`
}

// TeamListEntry is one listed team.
type TeamListEntry struct {
	Team
	Role string `json:"role,omitempty"`
}

// TeamRef names a team.
type TeamRef struct {
	Actor string `json:"actor,omitempty"`
	Team  string `json:"team"`
}

// TeamUpdateRequest changes a team; nil fields stay as they are.
type TeamUpdateRequest struct {
	TeamRef
	Name      *string `json:"name,omitempty"`
	CodeTools *bool   `json:"codeTools,omitempty"`
	// MaxAutonomy sets Team.MaxAutonomy (one of AutonomyLevels).
	MaxAutonomy *string `json:"maxAutonomy,omitempty"`
}

// MemberPutRequest adds User to a team with Role, or changes their role.
type MemberPutRequest struct {
	TeamRef
	User string `json:"user"`
	Role string `json:"role"`
}

// MemberRef names one member of a team.
type MemberRef struct {
	TeamRef
	User string `json:"user"`
}

// PolicySetRequest replaces the blocked tools of Role in a team.
type PolicySetRequest struct {
	TeamRef
	Role         string   `json:"role"`
	BlockedTools []string `json:"blockedTools"`
}

// TokenCreateRequest issues a token for User (the actor's own user when
// empty; only the operator may issue tokens for someone else). The user
// is created when it does not exist.
type TokenCreateRequest struct {
	Actor string `json:"actor,omitempty"`
	User  string `json:"user,omitempty"`
	Name  string `json:"name,omitempty"`
}

// TokenInfo describes a token without its secret.
type TokenInfo struct {
	ID       string     `json:"id"`
	User     string     `json:"user"`
	Name     string     `json:"name"`
	Created  time.Time  `json:"created"`
	LastUsed *time.Time `json:"lastUsed"`
	Revoked  *time.Time `json:"revoked"`
}

// TokenCreated carries the token's secret: it is shown once and only its
// SHA-256 hash is stored.
type TokenCreated struct {
	TokenInfo
	Token string `json:"token"`
}

// TokenListRequest lists User's tokens (the actor's when empty).
type TokenListRequest struct {
	Actor string `json:"actor,omitempty"`
	User  string `json:"user,omitempty"`
}

// TokenListReply lists tokens, newest first.
type TokenListReply struct {
	Tokens []TokenInfo `json:"tokens"`
}

// TokenRevokeRequest revokes token ID (the actor's own, or any for the
// operator).
type TokenRevokeRequest struct {
	Actor string `json:"actor,omitempty"`
	ID    string `json:"id"`
}
