// Package teams is the session store's team-server part: users, teams,
// members and their roles, bearer tokens, capability policies (blocked
// tools per role) and the per-team switch for tools that run code on the
// host, kept in PostgreSQL and answered over NATS.
//
// It decides every authorization question of team-server mode in one
// place: the gateway asks it to authenticate a token and authorize a
// workspace action, the turn runner asks it which tools a turn may not
// use, and the admin API and CLI change teams through it. A workspace
// belongs to the team its teamId names; a user who is not a member of that
// team gets the same 404 as for a workspace that does not exist, so ids do
// not leak.
package teams

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

// WorkspaceTeams finds the team a workspace belongs to.
type WorkspaceTeams interface {
	// WorkspaceTeam returns the workspace's teamId ("" for a personal
	// workspace), or an error whose protocol status is 404 when the
	// workspace does not exist.
	WorkspaceTeam(ctx context.Context, workspace string) (string, error)
}

// WorkspaceTeamsFunc adapts a function to WorkspaceTeams.
type WorkspaceTeamsFunc func(ctx context.Context, workspace string) (string, error)

// WorkspaceTeam calls f.
func (f WorkspaceTeamsFunc) WorkspaceTeam(ctx context.Context, ws string) (string, error) {
	return f(ctx, ws)
}

// Config configures the teams endpoints.
type Config struct {
	// Pool is the PostgreSQL pool (owned and closed by the caller).
	// Required.
	Pool *pgxpool.Pool
	// Workspaces finds a workspace's team. Required.
	Workspaces WorkspaceTeams
	// Conn publishes policy-changed facts. Optional: without it, runners
	// see a change when their policy cache expires.
	Conn *nats.Conn
	// PersonalWorkspaces lets every authenticated user use workspaces that
	// belong to no team (a single-tenant server). Default false: in
	// team-server mode a workspace without a team is nobody's (404).
	PersonalWorkspaces bool
	// DefaultWorkspace, when set, creates a new team's first workspace, so
	// its members can chat right after the documented setup instead of
	// meeting an empty list. Optional.
	DefaultWorkspace func(ctx context.Context, team protocol.Team) error
	// Deleted, when set, removes what other parts of the store keep for
	// a team that was just deleted (its shared personas). Optional.
	Deleted func(ctx context.Context, team string) error
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Validate checks c and fills defaults.
func (c *Config) Validate() error {
	if c.Pool == nil {
		return errors.New("teams: Pool is required")
	}
	if c.Workspaces == nil {
		return errors.New("teams: Workspaces is required")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Teams answers the teams subjects.
type Teams struct {
	cfg   Config
	store *Directory
	log   *slog.Logger
}

// New returns the handlers of cfg (migrated with Migrate).
func New(cfg Config, log *slog.Logger) (*Teams, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	return &Teams{cfg: cfg, store: NewDirectory(cfg.Pool, cfg.Now), log: log.With("component", "teams")}, nil
}

// Register migrates the teams schema and adds the teams endpoints to svc.
func Register(ctx context.Context, svc *bus.Service, cfg Config, log *slog.Logger) error {
	t, err := New(cfg, log)
	if err != nil {
		return err
	}
	if err := Migrate(ctx, cfg.Pool, t.log); err != nil {
		return err
	}
	return t.Register(svc)
}

// Register adds the teams endpoints to svc.
func (t *Teams) Register(svc *bus.Service) error {
	return errors.Join(
		bus.Handle(svc, protocol.Authenticate, t.authenticate),
		bus.Handle(svc, protocol.Authorize, t.authorize),
		bus.Handle(svc, protocol.GetToolPolicy, t.toolPolicy),
		bus.Handle(svc, protocol.CreateTeam, t.createTeam),
		bus.Handle(svc, protocol.ListTeams, t.listTeams),
		bus.Handle(svc, protocol.GetTeam, t.getTeam),
		bus.Handle(svc, protocol.UpdateTeam, t.updateTeam),
		bus.Handle(svc, protocol.DeleteTeam, t.deleteTeam),
		bus.Handle(svc, protocol.PutMember, t.putMember),
		bus.Handle(svc, protocol.RemoveMember, t.removeMember),
		bus.Handle(svc, protocol.SetPolicy, t.setPolicy),
		bus.Handle(svc, protocol.CreateToken, t.createToken),
		bus.Handle(svc, protocol.ListTokens, t.listTokens),
		bus.Handle(svc, protocol.RevokeToken, t.revokeToken),
	)
}

var (
	errWorkspaceNotFound = &protocol.Error{Kind: protocol.NotFound, Message: "Workspace not found"}
	errNeedAdmin         = &protocol.Error{Kind: protocol.Forbidden, Message: "Only team owners and admins can do this.", Code: protocol.CodeForbidden}
	errNeedOwner         = &protocol.Error{Kind: protocol.Forbidden, Message: "Only team owners can do this.", Code: protocol.CodeForbidden}
	errViewerChat        = &protocol.Error{Kind: protocol.Forbidden, Message: protocol.MsgViewerChat, Code: protocol.CodeViewerReadOnly}
	errViewerWrite       = &protocol.Error{Kind: protocol.Forbidden, Message: protocol.MsgViewerWrite, Code: protocol.CodeViewerReadOnly}
)

func badRequest(format string, args ...any) error {
	return protocol.Errorf(protocol.Invalid, format, args...)
}

// rank orders roles; 0 is no role.
func rank(role string) int {
	switch role {
	case protocol.TeamRoleOwner:
		return 4
	case protocol.TeamRoleAdmin:
		return 3
	case protocol.TeamRoleMember:
		return 2
	case protocol.TeamRoleViewer:
		return 1
	}
	return 0
}

// permit says whether role may take action.
func permit(role, action string) error {
	switch action {
	case protocol.ActionRead:
		return nil
	case protocol.ActionWrite:
		if rank(role) < rank(protocol.TeamRoleMember) {
			return errViewerWrite
		}
		return nil
	case protocol.ActionChat:
		if rank(role) < rank(protocol.TeamRoleMember) {
			return errViewerChat
		}
		return nil
	case protocol.ActionAdmin:
		if rank(role) < rank(protocol.TeamRoleAdmin) {
			return errNeedAdmin
		}
		return nil
	}
	return badRequest("unknown action %q", action)
}

// workspaceTeam is the team of ws, or 404.
func (t *Teams) workspaceTeam(ctx context.Context, ws string) (string, error) {
	if !protocol.ValidID(ws) {
		return "", errWorkspaceNotFound
	}
	team, err := t.cfg.Workspaces.WorkspaceTeam(ctx, ws)
	if protocol.KindOf(err) == protocol.NotFound {
		return "", errWorkspaceNotFound
	}
	if err != nil {
		return "", fmt.Errorf("teams: team of workspace %s: %w", ws, err)
	}
	return team, nil
}

// AuthorizeWorkspace checks that user may take action on ws and returns
// ws's team and the user's role there (both "" for a personal workspace
// when those are allowed). A workspace outside the user's teams is a 404.
func (t *Teams) AuthorizeWorkspace(ctx context.Context, user, ws, action string) (team, role string, err error) {
	team, err = t.workspaceTeam(ctx, ws)
	if err != nil {
		return "", "", err
	}
	if team == "" {
		if t.cfg.PersonalWorkspaces {
			return "", "", nil
		}
		return "", "", errWorkspaceNotFound
	}
	role, err = t.store.Role(ctx, team, user)
	if err != nil {
		return "", "", err
	}
	if role == "" {
		return "", "", errWorkspaceNotFound
	}
	return team, role, permit(role, action)
}

// AuthorizeTeam checks that user may take action on team and returns the
// user's role; a team the user is not in is a 404. The operator (empty
// user) may do anything.
func (t *Teams) AuthorizeTeam(ctx context.Context, user, team, action string) (string, error) {
	if !validSlug(team) {
		return "", errTeamNotFound
	}
	if user == "" {
		if _, err := t.store.Team(ctx, team); err != nil {
			return "", err
		}
		return protocol.TeamRoleOwner, nil
	}
	role, err := t.store.Role(ctx, team, user)
	if err != nil {
		return "", err
	}
	if role == "" {
		return "", errTeamNotFound
	}
	return role, permit(role, action)
}

func (t *Teams) authenticate(ctx context.Context, req protocol.AuthenticateRequest) (protocol.AuthenticateReply, error) {
	if req.Token == "" {
		return protocol.AuthenticateReply{}, &protocol.Error{Kind: protocol.Unauthenticated, Message: "Unauthorized", Code: protocol.CodeMissingToken}
	}
	user, err := t.store.Verify(ctx, req.Token)
	if err != nil {
		return protocol.AuthenticateReply{}, err
	}
	rep := protocol.AuthenticateReply{User: user}
	if rep.Teams, err = t.store.Memberships(ctx, user); err != nil {
		return rep, err
	}
	if req.Workspace != "" {
		action := req.Action
		if action == "" {
			action = protocol.ActionRead
		}
		if rep.Team, rep.Role, err = t.AuthorizeWorkspace(ctx, user, req.Workspace, action); err != nil {
			return protocol.AuthenticateReply{}, err
		}
	}
	return rep, nil
}

func (t *Teams) authorize(ctx context.Context, req protocol.AuthorizeRequest) (protocol.AuthorizeReply, error) {
	if req.User == "" {
		return protocol.AuthorizeReply{}, badRequest("user is required")
	}
	if req.Workspace != "" {
		team, role, err := t.AuthorizeWorkspace(ctx, req.User, req.Workspace, req.Action)
		return protocol.AuthorizeReply{Team: team, Role: role}, err
	}
	if req.Team == "" {
		return protocol.AuthorizeReply{}, badRequest("workspace or team is required")
	}
	role, err := t.AuthorizeTeam(ctx, req.User, req.Team, req.Action)
	return protocol.AuthorizeReply{Team: req.Team, Role: role}, err
}

// toolPolicy is the governance of one turn: the role's blocked tools, plus
// the code-running tools unless the team enabled them, and the team's
// autonomy cap (one for every role: a viewer cannot chat, and an owner or
// admin who wants more raises the team's policy for everyone, visibly).
func (t *Teams) toolPolicy(ctx context.Context, req protocol.ToolPolicyRequest) (protocol.ToolPolicy, error) {
	team, err := t.workspaceTeam(ctx, req.Workspace)
	if err != nil {
		return protocol.ToolPolicy{}, err
	}
	if team == "" {
		return protocol.ToolPolicy{BlockedTools: []string{}}, nil
	}
	role := protocol.TeamRoleMember
	if req.User != "" {
		if role, err = t.store.Role(ctx, team, req.User); err != nil {
			return protocol.ToolPolicy{}, err
		}
		if role == "" {
			return protocol.ToolPolicy{}, errWorkspaceNotFound
		}
	}
	tm, err := t.store.Team(ctx, team)
	if err != nil {
		return protocol.ToolPolicy{}, err
	}
	blocked, err := t.store.BlockedTools(ctx, team, role)
	if err != nil {
		return protocol.ToolPolicy{}, err
	}
	if !tm.CodeTools {
		blocked = append(blocked, protocol.CodeTools...)
	}
	slices.Sort(blocked)
	return protocol.ToolPolicy{Governed: true, Team: team, Role: role, BlockedTools: slices.Compact(blocked), MaxAutonomy: tm.MaxAutonomy}, nil
}

var slugRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

func validSlug(s string) bool { return slugRE.MatchString(s) }

func (t *Teams) createTeam(ctx context.Context, req protocol.TeamCreateRequest) (protocol.Team, error) {
	if !validSlug(req.ID) {
		return protocol.Team{}, badRequest("team id must be 1 to 63 lower-case letters, digits or '-', starting with a letter or digit")
	}
	owner := req.Actor
	if owner == "" {
		owner = req.Owner
	} else if req.Owner != "" && req.Owner != req.Actor {
		return protocol.Team{}, errNeedOwner
	}
	if owner != "" && !protocol.ValidID(owner) {
		return protocol.Team{}, badRequest("invalid owner")
	}
	name := req.Name
	if name == "" {
		name = req.ID
	}
	tm, err := t.store.CreateTeam(ctx, req.ID, name, owner)
	if err != nil || t.cfg.DefaultWorkspace == nil {
		return tm, err
	}
	// The team exists either way; a team without its first workspace is
	// still usable (a member creates one), so this is not the request's
	// failure.
	if err := t.cfg.DefaultWorkspace(ctx, tm); err != nil {
		t.log.Warn("teams: default workspace not created", "team", tm.ID, "err", err)
	}
	return tm, nil
}

func (t *Teams) listTeams(ctx context.Context, req protocol.TeamListRequest) (protocol.TeamListReply, error) {
	all, err := t.store.Teams(ctx)
	if err != nil {
		return protocol.TeamListReply{}, err
	}
	rep := protocol.TeamListReply{Teams: []protocol.TeamListEntry{}}
	if req.Actor == "" {
		for _, tm := range all {
			rep.Teams = append(rep.Teams, protocol.TeamListEntry{Team: tm})
		}
		return rep, nil
	}
	ms, err := t.store.Memberships(ctx, req.Actor)
	if err != nil {
		return rep, err
	}
	roles := make(map[string]string, len(ms))
	for _, m := range ms {
		roles[m.Team] = m.Role
	}
	for _, tm := range all {
		if role, ok := roles[tm.ID]; ok {
			rep.Teams = append(rep.Teams, protocol.TeamListEntry{Team: tm, Role: role})
		}
	}
	return rep, nil
}

func (t *Teams) getTeam(ctx context.Context, req protocol.TeamRef) (protocol.TeamDetail, error) {
	if _, err := t.AuthorizeTeam(ctx, req.Actor, req.Team, protocol.ActionRead); err != nil {
		return protocol.TeamDetail{}, err
	}
	var d protocol.TeamDetail
	var err error
	if d.Team, err = t.store.Team(ctx, req.Team); err != nil {
		return d, err
	}
	if d.Members, err = t.store.Members(ctx, req.Team); err != nil {
		return d, err
	}
	d.Policies, err = t.store.Policies(ctx, req.Team)
	return d, err
}

func (t *Teams) updateTeam(ctx context.Context, req protocol.TeamUpdateRequest) (protocol.Team, error) {
	if _, err := t.AuthorizeTeam(ctx, req.Actor, req.Team, protocol.ActionAdmin); err != nil {
		return protocol.Team{}, err
	}
	if req.Name != nil && *req.Name == "" {
		return protocol.Team{}, badRequest("name must not be empty")
	}
	if req.MaxAutonomy != nil && !protocol.ValidAutonomy(*req.MaxAutonomy) {
		return protocol.Team{}, badRequest("maxAutonomy must be one of normal, trusted, yolo")
	}
	tm, err := t.store.UpdateTeam(ctx, req.Team, TeamChange{Name: req.Name, CodeTools: req.CodeTools, MaxAutonomy: req.MaxAutonomy})
	if err == nil && (req.CodeTools != nil || req.MaxAutonomy != nil) {
		t.policyChanged(req.Team)
	}
	return tm, err
}

func (t *Teams) deleteTeam(ctx context.Context, req protocol.TeamRef) (protocol.DeletedReply, error) {
	role, err := t.AuthorizeTeam(ctx, req.Actor, req.Team, protocol.ActionAdmin)
	if err != nil {
		return protocol.DeletedReply{}, err
	}
	if role != protocol.TeamRoleOwner {
		return protocol.DeletedReply{}, errNeedOwner
	}
	if err := t.store.DeleteTeam(ctx, req.Team); err != nil {
		return protocol.DeletedReply{}, err
	}
	t.policyChanged(req.Team)
	if t.cfg.Deleted != nil {
		if err := t.cfg.Deleted(ctx, req.Team); err != nil {
			return protocol.DeletedReply{}, fmt.Errorf("teams: after deleting %s: %w", req.Team, err)
		}
	}
	return protocol.DeletedReply{Deleted: true}, nil
}

// mayChangeMember checks the actor's right to change user's membership:
// admins manage members, only owners touch the owner role.
func (t *Teams) mayChangeMember(ctx context.Context, ref protocol.TeamRef, user, newRole string) error {
	role, err := t.AuthorizeTeam(ctx, ref.Actor, ref.Team, protocol.ActionAdmin)
	if err != nil {
		return err
	}
	if role == protocol.TeamRoleOwner {
		return nil
	}
	current, err := t.store.Role(ctx, ref.Team, user)
	if err != nil {
		return err
	}
	if current == protocol.TeamRoleOwner || newRole == protocol.TeamRoleOwner {
		return errNeedOwner
	}
	return nil
}

func (t *Teams) putMember(ctx context.Context, req protocol.MemberPutRequest) (protocol.TeamMember, error) {
	if !protocol.ValidID(req.User) {
		return protocol.TeamMember{}, badRequest("invalid user")
	}
	if rank(req.Role) == 0 {
		return protocol.TeamMember{}, badRequest("role must be one of owner, admin, member, viewer")
	}
	if err := t.mayChangeMember(ctx, req.TeamRef, req.User, req.Role); err != nil {
		return protocol.TeamMember{}, err
	}
	m, err := t.store.PutMember(ctx, req.Team, req.User, req.Role)
	if err == nil {
		t.policyChanged(req.Team)
	}
	return m, err
}

func (t *Teams) removeMember(ctx context.Context, req protocol.MemberRef) (protocol.DeletedReply, error) {
	if !protocol.ValidID(req.User) {
		return protocol.DeletedReply{}, errMemberNotFound
	}
	if err := t.mayChangeMember(ctx, req.TeamRef, req.User, ""); err != nil {
		return protocol.DeletedReply{}, err
	}
	if err := t.store.RemoveMember(ctx, req.Team, req.User); err != nil {
		return protocol.DeletedReply{}, err
	}
	t.policyChanged(req.Team)
	return protocol.DeletedReply{Deleted: true}, nil
}

// maxPolicyTools bounds one role's blocked-tool list.
const maxPolicyTools = 256

func (t *Teams) setPolicy(ctx context.Context, req protocol.PolicySetRequest) (protocol.TeamPolicy, error) {
	if rank(req.Role) == 0 {
		return protocol.TeamPolicy{}, badRequest("role must be one of owner, admin, member, viewer")
	}
	if len(req.BlockedTools) > maxPolicyTools {
		return protocol.TeamPolicy{}, badRequest("at most %d blocked tools", maxPolicyTools)
	}
	for _, tool := range req.BlockedTools {
		if !protocol.ValidID(tool) {
			return protocol.TeamPolicy{}, badRequest("invalid tool name %q", tool)
		}
	}
	if _, err := t.AuthorizeTeam(ctx, req.Actor, req.Team, protocol.ActionAdmin); err != nil {
		return protocol.TeamPolicy{}, err
	}
	tools := slices.Clone(req.BlockedTools)
	slices.Sort(tools)
	p, err := t.store.SetPolicy(ctx, req.Team, req.Role, slices.Compact(tools))
	if err == nil {
		t.policyChanged(req.Team)
	}
	return p, err
}

// tokenUser is whose tokens a request concerns: users manage their own,
// the operator anyone's.
func tokenUser(actor, user string) (string, error) {
	switch {
	case actor == "" && user == "":
		return "", badRequest("user is required")
	case actor == "":
	case user == "":
		user = actor
	case user != actor:
		return "", &protocol.Error{Kind: protocol.Forbidden, Message: "You can only manage your own tokens.", Code: protocol.CodeForbidden}
	}
	if !protocol.ValidID(user) {
		return "", badRequest("invalid user")
	}
	return user, nil
}

func (t *Teams) createToken(ctx context.Context, req protocol.TokenCreateRequest) (protocol.TokenCreated, error) {
	user, err := tokenUser(req.Actor, req.User)
	if err != nil {
		return protocol.TokenCreated{}, err
	}
	if len(req.Name) > 200 {
		return protocol.TokenCreated{}, badRequest("name is too long")
	}
	return t.store.CreateToken(ctx, user, req.Name)
}

func (t *Teams) listTokens(ctx context.Context, req protocol.TokenListRequest) (protocol.TokenListReply, error) {
	user, err := tokenUser(req.Actor, req.User)
	if err != nil {
		return protocol.TokenListReply{}, err
	}
	toks, err := t.store.Tokens(ctx, user)
	if toks == nil {
		toks = []protocol.TokenInfo{}
	}
	return protocol.TokenListReply{Tokens: toks}, err
}

func (t *Teams) revokeToken(ctx context.Context, req protocol.TokenRevokeRequest) (protocol.TokenInfo, error) {
	if !protocol.ValidID(req.ID) {
		return protocol.TokenInfo{}, errTokenNotFound
	}
	tok, err := t.store.Token(ctx, req.ID)
	if err != nil {
		return tok, err
	}
	if req.Actor != "" && tok.User != req.Actor {
		// Someone else's token: as if it did not exist.
		return protocol.TokenInfo{}, errTokenNotFound
	}
	return t.store.RevokeToken(ctx, req.ID)
}

// policyChanged tells every runner to drop its cached policies of team.
func (t *Teams) policyChanged(team string) {
	if t.cfg.Conn == nil {
		return
	}
	if err := bus.Publish(t.cfg.Conn, protocol.PolicyChanges, protocol.TeamPolicyChanged{Team: team}); err != nil {
		t.log.Warn("teams: publish policy change", "team", team, "err", err)
	}
}
