// Package teamauth is the gateway's team-server mode (WAGGLE_AUTH=required):
// every request carries a bearer token, the token names a user, and the user
// sees and touches only the workspaces of the teams they belong to. Viewers
// read; they cannot chat or change anything. Requests are rate limited per
// user and route, with the windows shared by every gateway replica.
//
// The decisions themselves are made by the session store's teams service
// (protocol.Authenticate, protocol.Authorize); this package checks the
// token before reading any body, then finds out — once, from every alias
// in the path, the query or the JSON body — which workspace a request
// concerns and which action it takes, before any handler runs, so a
// refused chat never starts a stream. The handler gets the result as a
// Scope and never reads the workspace from the request again; local mode
// resolves the same Scope (Resolve) without a user.
package teamauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/forward"
	"github.com/waggle-os/core/services/gateway/internal/input"
	"github.com/waggle-os/core/services/gateway/internal/ratelimit"
	"github.com/waggle-os/core/services/gateway/internal/respond"
	"github.com/waggle-os/core/services/gateway/internal/routematch"
)

// Config configures team-server authentication.
type Config struct {
	// Limits configures per-user rate limiting (defaults: 100 requests per
	// route per minute, /api/chat 120).
	Limits ratelimit.Config
	// PersonalWorkspaces lets every authenticated user use workspaces of
	// no team. It must match the teams service's setting. Default false.
	PersonalWorkspaces bool
}

// Validate checks c and fills defaults.
func (c *Config) Validate() error { return c.Limits.Validate() }

// User is the authenticated user of a request.
type User struct {
	ID    string
	Teams []protocol.TeamMembership
}

// Role is the user's role in team, "" when not a member.
func (u User) Role(team string) string {
	for _, m := range u.Teams {
		if m.Team == team {
			return m.Role
		}
	}
	return ""
}

type userKey struct{}

// UserFrom returns the authenticated user of ctx.
func UserFrom(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(userKey{}).(User)
	return u, ok
}

// WithUser returns ctx carrying u.
func WithUser(ctx context.Context, u User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// Scope is what the authorization step resolved for a request, once: the
// workspace it acts on and, on a team server, that workspace's team, the
// user and the user's role there. Handlers take the workspace from here and
// never read it from the request again, so what was authorized is what is
// acted on. Local mode resolves the same value (without a user).
type Scope struct {
	// Workspace is the workspace the request acts on: the value of Field,
	// or the route's default when no field named one; "" when the route
	// acts on no workspace (or on the user's personal mind).
	Workspace string
	// Field is the body field, query parameter or path parameter the
	// workspace came from ("" when defaulted), for the handler's
	// validation messages.
	Field string
	// Team is the team of Workspace (or of the agent group a route acts
	// on); "" for a personal workspace and in local mode.
	Team string
	// User is the authenticated user; "" in local mode.
	User string
	// Role is User's role in Team.
	Role string
}

type scopeKey struct{}

// ScopeFrom returns the resolved scope of a request; ok is false when no
// authorization step ran (a handler mounted outside the router).
func ScopeFrom(ctx context.Context) (Scope, bool) {
	s, ok := ctx.Value(scopeKey{}).(Scope)
	return s, ok
}

// WithScope returns ctx carrying s.
func WithScope(ctx context.Context, s Scope) context.Context {
	return context.WithValue(ctx, scopeKey{}, s)
}

var (
	errMissingToken      = &protocol.Error{Kind: protocol.Unauthenticated, Message: "Unauthorized", Code: protocol.CodeMissingToken}
	errInvalidToken      = &protocol.Error{Kind: protocol.Unauthenticated, Message: "Unauthorized", Code: protocol.CodeInvalidToken}
	errTeamRequired      = &protocol.Error{Kind: protocol.Invalid, Message: "teamId is required on a team server", Code: "TEAM_REQUIRED"}
	errNeedWorkspace     = &protocol.Error{Kind: protocol.Invalid, Message: "workspace is required on a team server", Code: "WORKSPACE_REQUIRED"}
	errTeamQueryRequired = &protocol.Error{Kind: protocol.Invalid, Message: "?team= is required on a team server", Code: "TEAM_REQUIRED"}
	errNoTeams           = &protocol.Error{Kind: protocol.Invalid, Message: "team is only for team servers", Code: "NO_TEAMS"}
	errOperatorOnly      = &protocol.Error{Kind: protocol.Forbidden, Message: "Only the server's operator can change this on a team server", Code: "OPERATOR_ONLY"}
	errGroupNotFound     = &protocol.Error{Kind: protocol.NotFound, Message: "Group not found"}
)

// errConflict refuses a request whose aliases name different workspaces:
// guessing which one counts is how a check and a handler came to disagree.
func errConflict(a, b string) error {
	return &protocol.Error{Kind: protocol.Invalid, Message: a + " and " + b + " disagree", Code: "ALIAS_CONFLICT"}
}

// Middleware authenticates and authorizes every request except OPTIONS and
// /health, then rate limits it per user and route. It must run inside the
// chi router (r.Use) so it can match the request's route. It panics when
// cfg does not Validate: check the config when parsing flags.
func Middleware(d forward.Deps, cfg Config) func(http.Handler) http.Handler {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	lim, err := ratelimit.NewLimiter(d.NC, cfg.Limits, d.Log)
	if err != nil {
		panic(err)
	}
	g := &guard{d: d, cfg: cfg, lim: lim}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.serve(w, r, next) })
	}
}

// Resolve is local mode's authorization step: nobody is authenticated,
// but the request's workspace is resolved by the same rules (aliases that
// disagree are refused) and handed to the handler as its Scope, so
// handlers have one code path. It must run inside the chi router.
func Resolve(d forward.Deps) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			pattern, params := routematch.Match(r)
			t, err := resolveTarget(w, r, ruleFor(r.Method, pattern), params, d.BodyLimit)
			if err != nil {
				respond.Error(w, d.Log, err)
				return
			}
			if t.team != "" && ruleFor(r.Method, pattern).scope == scopeTeamQuery {
				// Local mode has no teams: one vault, not one per name.
				respond.Error(w, d.Log, errNoTeams)
				return
			}
			next.ServeHTTP(w, r.WithContext(WithScope(r.Context(), Scope{Workspace: t.workspace, Field: t.field})))
		})
	}
}

type guard struct {
	d   forward.Deps
	cfg Config
	lim *ratelimit.Limiter
}

func (g *guard) fail(w http.ResponseWriter, err error) { respond.Error(w, g.d.Log, err) }

func (g *guard) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if r.Method == http.MethodOptions || r.URL.Path == "/health" {
		next.ServeHTTP(w, r)
		return
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		g.fail(w, errMissingToken)
		return
	}
	token, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || token == "" {
		g.fail(w, errInvalidToken)
		return
	}
	// The token first, before a byte of the body is read: a stranger
	// must not be able to hold a request open with a body that never
	// ends.
	ctx, cancel := context.WithTimeout(r.Context(), g.d.Timeout)
	rep, err := bus.Call(ctx, g.d.NC, protocol.Authenticate, protocol.AuthenticateRequest{Token: token})
	cancel()
	if err != nil {
		g.fail(w, err)
		return
	}
	user := User{ID: rep.User, Teams: rep.Teams}
	pattern, params := routematch.Match(r)
	if g.lim.Enabled() && !g.lim.Apply(w, r, "user:"+user.ID, patternOrUnmatched(pattern)) {
		return
	}
	rule := ruleFor(r.Method, pattern)
	t, err := resolveTarget(w, r, rule, params, g.d.BodyLimit)
	if err != nil {
		g.fail(w, err)
		return
	}
	sc := Scope{Workspace: t.workspace, Field: t.field, User: user.ID}
	if err := g.authorize(r.Context(), user, rule, t, params, &sc); err != nil {
		g.fail(w, err)
		return
	}
	r = r.WithContext(WithScope(WithUser(r.Context(), user), sc))
	if rule.scope == scopeWorkspaceList {
		g.filterWorkspaces(w, r, next, user)
		return
	}
	next.ServeHTTP(w, r)
}

func patternOrUnmatched(p string) string {
	if p == "" {
		return "unmatched"
	}
	return p
}

// target is what a request acts on, as far as the authorization step must
// know.
type target struct {
	// workspace and field as in Scope.
	workspace, field string
	// team is the teamId of a workspace or group being created, or of a
	// workspace being moved; teamPresent says the body named one (null
	// included).
	team        string
	teamPresent bool
}

// resolveTarget finds the workspace (and, for creations and moves, the
// team) a request names, once, from every alias the route accepts.
// Reading the body leaves it in place for the handler.
func resolveTarget(w http.ResponseWriter, r *http.Request, rule rule, params map[string]string, limit int64) (target, error) {
	var t target
	if rule.scope == scopeWorkspaceParam {
		t.workspace, t.field = params["id"], "id"
	}
	if rule.scope == scopeTeamQuery {
		t.team = r.URL.Query().Get("team")
		t.teamPresent = t.team != ""
	}
	if len(rule.queryKeys) > 0 {
		a, err := agree(queryAliases(r.URL.Query(), rule.queryKeys))
		if err != nil {
			return t, err
		}
		t.workspace, t.field = a.value, a.field
		if a.field == "" {
			t.workspace = rule.queryDefault
		}
	}
	if len(rule.bodyKeys) == 0 && !rule.teamBody {
		return t.personalized(rule), nil
	}
	fields, err := readBody(w, r, limit)
	if err != nil || fields == nil {
		// Unreadable or not JSON: the handler rejects it with the
		// contract's error, before it acts on anything; the default
		// workspace it would fall back to is what gets authorized.
		t.workspace = rule.bodyDefault
		return t.personalized(rule), err
	}
	if len(rule.bodyKeys) > 0 {
		as, err := bodyAliases(fields, rule.bodyKeys)
		if err != nil {
			return t, err
		}
		a, err := agree(as)
		if err != nil {
			return t, err
		}
		t.workspace, t.field = a.value, a.field
		if a.field == "" {
			t.workspace = rule.bodyDefault
		}
	}
	if rule.teamBody {
		raw, present := fields["teamId"]
		t.teamPresent = present
		if present && string(raw) != "null" {
			_ = json.Unmarshal(raw, &t.team)
		}
	}
	return t.personalized(rule), nil
}

// personalized maps the route's name for the personal mind to no
// workspace.
func (t target) personalized(rule rule) target {
	if rule.personal != "" && t.workspace == rule.personal {
		t.workspace = ""
	}
	return t
}

// alias is one value of a workspace alias: the field it came from and its
// value ("" for an empty string or null).
type alias struct {
	field, value string
	null         bool
}

// agree returns the one workspace the aliases name, or an error when they
// name different ones (an empty or null alias beside a set one included).
// Aliases that are all null name none (the zero alias).
func agree(as []alias) (alias, error) {
	var found alias
	for i, a := range as {
		if i > 0 && a.value != as[0].value {
			return alias{}, errConflict(as[0].field, a.field)
		}
		if !a.null && found.field == "" {
			found = a
		}
	}
	return found, nil
}

// queryAliases are the values of keys in q, every repetition included.
func queryAliases(q url.Values, keys []string) []alias {
	var as []alias
	for _, k := range keys {
		for _, v := range q[k] {
			as = append(as, alias{field: k, value: v})
		}
	}
	return as
}

// bodyAliases are the values of keys in a body (null as ""); a value that
// is neither a string nor null is refused as the handler would refuse it.
func bodyAliases(f bodyFields, keys []string) ([]alias, error) {
	var as []alias
	for _, k := range keys {
		raw, ok := f[k]
		if !ok {
			continue
		}
		var v string
		null := string(bytes.TrimSpace(raw)) == "null"
		if !null && json.Unmarshal(raw, &v) != nil {
			return nil, input.BadSegment(k)
		}
		as = append(as, alias{field: k, value: v, null: null})
	}
	return as, nil
}

type bodyFields map[string]json.RawMessage

// readBody reads a JSON object body (bounded by limit) and puts the bytes
// back for the handler. It returns nil fields for a body that is not a
// JSON object.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) (bodyFields, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return bodyFields{}, nil
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	r.Body.Close()
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &respond.RequestError{Kind: protocol.TooLarge, Code: "FST_ERR_CTP_BODY_TOO_LARGE", Message: "Request body is too large"}
		}
		return nil, &respond.RequestError{Kind: protocol.Invalid, Message: "Could not read the request body"}
	}
	r.Body = io.NopCloser(bytes.NewReader(data))
	var f bodyFields
	if trimmed := bytes.TrimSpace(data); len(trimmed) == 0 {
		return bodyFields{}, nil
	}
	if json.Unmarshal(data, &f) != nil || f == nil {
		return nil, nil
	}
	return f, nil
}

// authorize decides a resolved request on a team server and completes sc
// with the team and role it concerns. Being more than a viewer in some
// team grants nothing by itself: anyone may create a team of their own.
func (g *guard) authorize(ctx context.Context, u User, rule rule, t target, params map[string]string, sc *Scope) error {
	switch rule.scope {
	case scopeGlobal:
		if rule.action != protocol.ActionRead {
			return errOperatorOnly
		}
		return nil
	case scopeOperator:
		return errOperatorOnly
	case scopeSelf, scopeTeams, scopeWorkspaceList, scopeGroupList:
		return nil
	case scopeWorkspaceCreate:
		if !t.teamPresent || t.team == "" {
			if g.cfg.PersonalWorkspaces {
				return nil
			}
			return errTeamRequired
		}
		return g.authorizeTeam(ctx, u, t.team, protocol.ActionWrite, sc)
	case scopeTeamQuery:
		if t.team == "" {
			return errTeamQueryRequired
		}
		return g.authorizeTeam(ctx, u, t.team, rule.action, sc)
	case scopeGroupCreate:
		// A group belongs to a team from its creation.
		if !t.teamPresent || t.team == "" {
			return errTeamRequired
		}
		return g.authorizeTeam(ctx, u, t.team, rule.action, sc)
	}
	if rule.group {
		action := protocol.ActionRead // running: read the group, chat in the workspace
		if rule.scope == scopeGroup {
			action = rule.action
		}
		if err := g.authorizeGroup(ctx, u, params["id"], action, sc); err != nil {
			return err
		}
		if rule.scope == scopeGroup {
			return nil
		}
	}
	if t.workspace == "" {
		if rule.needWorkspace || rule.scope == scopeWorkspaceQueryRequired {
			return errNeedWorkspace
		}
		// No workspace: the handler acts on the user's personal mind
		// (memory, agent runs) or refuses the empty name itself.
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, g.d.Timeout)
	rep, err := bus.Call(cctx, g.d.NC, protocol.Authorize,
		protocol.AuthorizeRequest{User: u.ID, Workspace: t.workspace, Action: rule.action})
	cancel()
	if err != nil {
		return err
	}
	// The workspace's team wins over a group's: it is where the request
	// acts and whose governance applies.
	sc.Team, sc.Role = rep.Team, rep.Role
	if rule.teamBody && t.teamPresent {
		// Moving a workspace: admin in the team it goes to as well.
		if t.team == "" {
			if g.cfg.PersonalWorkspaces {
				return nil
			}
			return errTeamRequired
		}
		return g.authorizeTeam(ctx, u, t.team, protocol.ActionAdmin, nil)
	}
	return nil
}

// authorizeGroup checks action on the team of agent group id. A group of
// no team (made before groups had one) is the operator's, and a group of a
// team the user is not in does not exist for them: both are 404, like an
// unknown id, so ids do not leak.
func (g *guard) authorizeGroup(ctx context.Context, u User, id, action string, sc *Scope) error {
	if !protocol.ValidID(id) {
		return errGroupNotFound
	}
	cctx, cancel := context.WithTimeout(ctx, g.d.Timeout)
	grp, err := bus.Call(cctx, g.d.NC, protocol.GetGroup, protocol.AgentGroupRef{ID: id})
	cancel()
	if err != nil {
		return err
	}
	if grp.TeamID == "" || u.Role(grp.TeamID) == "" {
		return errGroupNotFound
	}
	return g.authorizeTeam(ctx, u, grp.TeamID, action, sc)
}

// authorizeTeam checks action on team and, when sc is not nil, records the
// team and the user's role there in it.
func (g *guard) authorizeTeam(ctx context.Context, u User, team, action string, sc *Scope) error {
	ctx, cancel := context.WithTimeout(ctx, g.d.Timeout)
	defer cancel()
	rep, err := bus.Call(ctx, g.d.NC, protocol.Authorize,
		protocol.AuthorizeRequest{User: u.ID, Team: team, Action: action})
	if err != nil {
		return err
	}
	if sc != nil {
		sc.Team, sc.Role = rep.Team, rep.Role
	}
	return nil
}

// filterWorkspaces lets GET /api/workspaces list only the workspaces of
// the user's teams.
func (g *guard) filterWorkspaces(w http.ResponseWriter, r *http.Request, next http.Handler, u User) {
	rec := &bufferWriter{header: http.Header{}, status: http.StatusOK}
	next.ServeHTTP(rec, r)
	body := rec.buf.Bytes()
	if rec.status == http.StatusOK {
		var all []map[string]json.RawMessage
		if err := json.Unmarshal(body, &all); err == nil {
			kept := make([]map[string]json.RawMessage, 0, len(all))
			for _, ws := range all {
				var team string
				_ = json.Unmarshal(ws["teamId"], &team)
				if (team == "" && g.cfg.PersonalWorkspaces) || (team != "" && u.Role(team) != "") {
					kept = append(kept, ws)
				}
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(kept); err == nil {
				body = buf.Bytes()
			}
		} else {
			// Not the expected shape: show nothing rather than everything.
			g.d.Log.Error("teamauth: workspace list has an unexpected shape", "err", err)
			respond.Error(w, g.d.Log, protocol.ErrInternal)
			return
		}
	}
	for k, v := range rec.header {
		if k != "Content-Length" {
			w.Header()[k] = v
		}
	}
	w.WriteHeader(rec.status)
	_, _ = w.Write(body)
}

// bufferWriter holds a JSON response so it can be filtered.
type bufferWriter struct {
	header http.Header
	status int
	buf    bytes.Buffer
}

func (b *bufferWriter) Header() http.Header         { return b.header }
func (b *bufferWriter) WriteHeader(status int)      { b.status = status }
func (b *bufferWriter) Write(p []byte) (int, error) { return b.buf.Write(p) }
