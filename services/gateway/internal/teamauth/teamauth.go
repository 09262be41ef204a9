// Package teamauth is the gateway's team-server mode (WAGGLE_AUTH=required):
// every request carries a bearer token, the token names a user, and the user
// sees and touches only the workspaces of the teams they belong to. Viewers
// read; they cannot chat or change anything. Requests are rate limited per
// user and route, with the windows shared by every gateway replica.
//
// The decisions themselves are made by the session store's teams service
// (protocol.Authenticate.Subject); this package finds out which workspace
// a request concerns — from the path, the query or the JSON body — and
// which action it takes, before any handler runs, so a refused chat never
// starts a stream.
package teamauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/forward"
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

var (
	errMissingToken  = &protocol.Error{Kind: protocol.Unauthenticated, Message: "Unauthorized", Code: protocol.CodeMissingToken}
	errInvalidToken  = &protocol.Error{Kind: protocol.Unauthenticated, Message: "Unauthorized", Code: protocol.CodeInvalidToken}
	errViewerWrite   = &protocol.Error{Kind: protocol.Forbidden, Message: protocol.MsgViewerWrite, Code: protocol.CodeViewerReadOnly}
	errTeamRequired  = &protocol.Error{Kind: protocol.Invalid, Message: "teamId is required on a team server", Code: "TEAM_REQUIRED"}
	errNeedWorkspace = &protocol.Error{Kind: protocol.Invalid, Message: "workspace is required on a team server", Code: "WORKSPACE_REQUIRED"}
)

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
	pattern, params := routematch.Match(r)
	rule := ruleFor(r.Method, pattern)
	target, err := g.target(w, r, rule, params)
	if err != nil {
		g.fail(w, err)
		return
	}
	req := protocol.AuthenticateRequest{Token: token}
	if target.workspace != "" {
		req.Workspace, req.Action = target.workspace, rule.action
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.d.Timeout)
	rep, err := bus.Call(ctx, g.d.NC, protocol.Authenticate, req)
	cancel()
	if err != nil {
		g.fail(w, err)
		return
	}
	user := User{ID: rep.User, Teams: rep.Teams}
	if err := g.check(r.Context(), user, rule, target); err != nil {
		g.fail(w, err)
		return
	}
	if g.lim.Enabled() && !g.lim.Apply(w, r, "user:"+user.ID, patternOrUnmatched(pattern)) {
		return
	}
	r = r.WithContext(WithUser(r.Context(), user))
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

// target is what a request acts on, as far as the middleware must know.
type target struct {
	workspace string
	// team is the teamId of a workspace being created or moved; present
	// says the body named one (null included).
	team        string
	teamPresent bool
}

// target finds the workspace (and, for workspace writes, the team) a
// request names. Reading the body leaves it in place for the handler.
func (g *guard) target(w http.ResponseWriter, r *http.Request, rule rule, params map[string]string) (target, error) {
	var t target
	switch rule.scope {
	case scopeWorkspaceParam:
		t.workspace = params["id"]
	case scopeWorkspaceQuery:
		t.workspace = "default"
		if q := r.URL.Query(); q.Has("workspace") {
			t.workspace = q.Get("workspace")
		}
	case scopeWorkspaceQueryOptional:
		q := r.URL.Query()
		t.workspace = q.Get("workspaceId")
		if q.Has("workspace") {
			t.workspace = q.Get("workspace")
		}
	case scopeWorkspaceQueryRequired:
		if t.workspace = r.URL.Query().Get("workspace"); t.workspace == "" {
			return t, errNeedWorkspace
		}
	}
	if len(rule.bodyKeys) == 0 && !rule.teamBody {
		return t, nil
	}
	fields, err := readBody(w, r, g.d.BodyLimit)
	if err != nil || fields == nil {
		// Unreadable or not JSON: the handler rejects it with the
		// contract's error, before it acts on anything.
		return t, err
	}
	for _, k := range rule.bodyKeys {
		if v, ok := fields.str(k); ok {
			t.workspace = v
			break
		}
	}
	if rule.bodyKeys != nil && t.workspace == "" && rule.bodyDefault != "" {
		t.workspace = rule.bodyDefault
	}
	if rule.teamBody {
		raw, present := fields["teamId"]
		t.teamPresent = present
		if present && string(raw) != "null" {
			_ = json.Unmarshal(raw, &t.team)
		}
	}
	return t, nil
}

type bodyFields map[string]json.RawMessage

// str is a string field; a missing, null or non-string field is absent.
func (f bodyFields) str(k string) (string, bool) {
	raw, ok := f[k]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

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

// check applies what the teams service's answer leaves to the gateway:
// global writes need a non-viewer role somewhere; creating or moving a
// workspace needs a role in the target team.
func (g *guard) check(ctx context.Context, u User, rule rule, t target) error {
	switch {
	case rule.scope == scopeWorkspaceCreate:
		if !t.teamPresent || t.team == "" {
			if g.cfg.PersonalWorkspaces {
				return nil
			}
			return errTeamRequired
		}
		return g.authorizeTeam(ctx, u, t.team, protocol.ActionWrite)
	case rule.teamBody && t.teamPresent:
		// Moving a workspace: admin in the team it goes to as well.
		if t.team == "" {
			if g.cfg.PersonalWorkspaces {
				return nil
			}
			return errTeamRequired
		}
		return g.authorizeTeam(ctx, u, t.team, protocol.ActionAdmin)
	case (rule.scope == scopeGlobal || t.workspace == "" && (rule.scope == scopeWorkspaceBody || rule.scope == scopeWorkspaceQueryOptional)) && rule.action != protocol.ActionRead:
		for _, m := range u.Teams {
			if m.Role != protocol.TeamRoleViewer {
				return nil
			}
		}
		return errViewerWrite
	}
	return nil
}

func (g *guard) authorizeTeam(ctx context.Context, u User, team, action string) error {
	ctx, cancel := context.WithTimeout(ctx, g.d.Timeout)
	defer cancel()
	_, err := bus.Call(ctx, g.d.NC, protocol.Authorize,
		protocol.AuthorizeRequest{User: u.ID, Team: team, Action: action})
	return err
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
