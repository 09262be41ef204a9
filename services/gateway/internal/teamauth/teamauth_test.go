package teamauth

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/forward"
	"github.com/waggle-os/core/services/gateway/internal/ratelimit"
	"github.com/waggle-os/core/services/gateway/internal/respond"
)

// teamsFake answers the teams subjects from a table: tokens → users,
// workspaces → teams, (team, user) → role. The real service is tested in
// sessionstore/teams and end to end in waggle/e2e/teams; this one lets the
// middleware be tested on a real bus without PostgreSQL.
type teamsFake struct {
	mu         sync.Mutex
	tokens     map[string]string
	workspaces map[string]string
	roles      map[[2]string]string
	calls      atomic.Int64
}

func (f *teamsFake) memberships(user string) []protocol.TeamMembership {
	var ms []protocol.TeamMembership
	for k, role := range f.roles {
		if k[1] == user {
			ms = append(ms, protocol.TeamMembership{Team: k[0], Role: role})
		}
	}
	return ms
}

func (f *teamsFake) authorize(user, ws, action string) (string, string, error) {
	team, ok := f.workspaces[ws]
	role := f.roles[[2]string{team, user}]
	if !ok || team == "" || role == "" {
		return "", "", &protocol.Error{Kind: protocol.NotFound, Message: "Workspace not found"}
	}
	if role == "viewer" && action == "chat" {
		return "", "", &protocol.Error{Kind: protocol.Forbidden, Message: protocol.MsgViewerChat, Code: protocol.CodeViewerReadOnly}
	}
	if role == "viewer" && action != "read" {
		return "", "", &protocol.Error{Kind: protocol.Forbidden, Message: protocol.MsgViewerWrite, Code: protocol.CodeViewerReadOnly}
	}
	return team, role, nil
}

func (f *teamsFake) register(t *testing.T, nc *nats.Conn) {
	svc, err := bus.NewService(nc, bus.ServiceConfig{Name: protocol.ServiceSessionStore})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	err = bus.Handle(svc, protocol.Authenticate, func(_ context.Context, req protocol.AuthenticateRequest) (protocol.AuthenticateReply, error) {
		f.calls.Add(1)
		f.mu.Lock()
		defer f.mu.Unlock()
		user, ok := f.tokens[req.Token]
		if !ok {
			return protocol.AuthenticateReply{}, &protocol.Error{Kind: protocol.Unauthenticated, Message: "Unauthorized", Code: protocol.CodeInvalidToken}
		}
		rep := protocol.AuthenticateReply{User: user, Teams: f.memberships(user)}
		if req.Workspace == "" {
			return rep, nil
		}
		var aerr error
		rep.Team, rep.Role, aerr = f.authorize(user, req.Workspace, req.Action)
		return rep, aerr
	})
	if err != nil {
		t.Fatal(err)
	}
	err = bus.Handle(svc, protocol.Authorize, func(_ context.Context, req protocol.AuthorizeRequest) (protocol.AuthorizeReply, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if req.Workspace != "" {
			team, role, err := f.authorize(req.User, req.Workspace, req.Action)
			return protocol.AuthorizeReply{Team: team, Role: role}, err
		}
		role := f.roles[[2]string{req.Team, req.User}]
		if role == "" {
			return protocol.AuthorizeReply{}, &protocol.Error{Kind: protocol.NotFound, Message: "Team not found"}
		}
		if role == "viewer" && req.Action != "read" {
			return protocol.AuthorizeReply{}, &protocol.Error{Kind: protocol.Forbidden, Message: protocol.MsgViewerWrite, Code: protocol.CodeViewerReadOnly}
		}
		return protocol.AuthorizeReply{Team: req.Team, Role: role}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// seen records what a handler got, to prove refused requests never reach
// one and accepted bodies arrive intact.
type seen struct {
	mu    sync.Mutex
	calls []string
}

func (s *seen) add(v string) { s.mu.Lock(); s.calls = append(s.calls, v); s.mu.Unlock() }
func (s *seen) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

type env struct {
	nc   *nats.Conn
	fake *teamsFake
	seen *seen
}

func newEnv(t *testing.T) *env {
	t.Helper()
	nc := natstest.Start(t).Conn("teamauth")
	f := &teamsFake{
		tokens:     map[string]string{"tok-olga": "olga", "tok-vic": "vic", "tok-greg": "greg"},
		workspaces: map[string]string{"acme-ws": "acme", "globex-ws": "globex", "default": ""},
		roles: map[[2]string]string{
			{"acme", "olga"}: "owner", {"acme", "vic"}: "viewer", {"globex", "greg"}: "member",
		},
	}
	f.register(t, nc)
	return &env{nc: nc, fake: f, seen: &seen{}}
}

// server is a gateway-shaped router (routes under /api) behind the
// middleware, whose handlers echo what they got.
func (e *env) server(t *testing.T, cfg Config) *httptest.Server {
	t.Helper()
	d := forward.Deps{NC: e.nc, Log: slog.New(slog.DiscardHandler), BodyLimit: 1 << 10, Timeout: 5 * time.Second}
	r := chi.NewRouter()
	r.Use(Middleware(d, cfg))
	r.Get("/health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) })
	echo := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u, _ := UserFrom(r.Context())
		sc, _ := ScopeFrom(r.Context())
		e.seen.add(r.Method + " " + r.URL.Path + " " + string(body))
		respond.JSON(w, 200, map[string]string{"user": u.ID, "body": string(body),
			"scope": sc.User + "/" + sc.Team + "/" + sc.Role + "/" + sc.Workspace + "/" + sc.Field})
	}
	r.Route("/api", func(r chi.Router) {
		r.Post("/chat", echo)
		r.Get("/history", echo)
		r.Get("/workspaces", func(w http.ResponseWriter, _ *http.Request) {
			respond.JSON(w, 200, []map[string]any{
				{"id": "acme-ws", "teamId": "acme"}, {"id": "globex-ws", "teamId": "globex"}, {"id": "default"},
			})
		})
		r.Post("/workspaces", echo)
		r.Get("/workspaces/{id}/sessions", echo)
		r.Delete("/workspaces/{id}", echo)
		r.Patch("/sessions/{sessionId}", echo)
		r.Put("/agent/model", echo)
		r.Post("/agent/elsewhere", echo)
		r.Get("/agent/status", echo)
		r.Get("/commands", echo)
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv
}

type result struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func do(t *testing.T, srv *httptest.Server, method, path, token, body string) result {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, srv.URL+path, rd)
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	res := result{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &res.body)
	return res
}

func TestAuthAndWorkspaceAccess(t *testing.T) {
	e := newEnv(t)
	srv := e.server(t, Config{})
	olga, vic, greg := "Bearer tok-olga", "Bearer tok-vic", "Bearer tok-greg"
	cases := []struct {
		name, method, path, token, body string
		status                          int
		code                            string
		reaches                         bool
	}{
		{"health needs no token", "GET", "/health", "", "", 200, "", false},
		{"missing token", "GET", "/api/commands", "", "", 401, "MISSING_TOKEN", false},
		{"not a bearer", "GET", "/api/commands", "Basic abc", "", 401, "INVALID_TOKEN", false},
		{"unknown token", "GET", "/api/commands", "Bearer nope", "", 401, "INVALID_TOKEN", false},
		{"global read", "GET", "/api/commands", vic, "", 200, "", true},
		{"every team's usage totals", "GET", "/api/agent/status", vic, "", 403, "OPERATOR_ONLY", false},
		{"own workspace by path", "GET", "/api/workspaces/acme-ws/sessions", olga, "", 200, "", true},
		{"other team's workspace by path", "GET", "/api/workspaces/globex-ws/sessions", olga, "", 404, "", false},
		{"missing workspace by path", "GET", "/api/workspaces/nope/sessions", olga, "", 404, "", false},
		{"workspace by query", "GET", "/api/history?workspace=acme-ws&session=s1", vic, "", 200, "", true},
		{"no workspace: default is nobody's", "GET", "/api/history", olga, "", 404, "", false},
		{"required query missing", "PATCH", "/api/sessions/s1", olga, `{"title":"x"}`, 400, "WORKSPACE_REQUIRED", false},
		{"viewer write by query", "PATCH", "/api/sessions/s1?workspace=acme-ws", vic, `{"title":"x"}`, 403, "VIEWER_READ_ONLY", false},
		{"chat by body", "POST", "/api/chat", olga, `{"message":"hi","workspace":"acme-ws"}`, 200, "", true},
		{"chat by workspaceId alias", "POST", "/api/chat", olga, `{"message":"hi","workspaceId":"acme-ws"}`, 200, "", true},
		{"aliases that disagree", "POST", "/api/chat", olga, `{"message":"hi","workspace":"globex-ws","workspaceId":"acme-ws"}`, 400, "ALIAS_CONFLICT", false},
		{"empty alias beside a set one", "POST", "/api/chat", greg, `{"message":"hi","workspace":"","workspaceId":"acme-ws"}`, 400, "ALIAS_CONFLICT", false},
		{"null alias beside a set one", "POST", "/api/chat", greg, `{"message":"hi","workspace":null,"workspaceId":"acme-ws"}`, 400, "ALIAS_CONFLICT", false},
		{"aliases that agree", "POST", "/api/chat", olga, `{"message":"hi","workspace":"acme-ws","workspaceId":"acme-ws"}`, 200, "", true},
		{"repeated query parameter", "GET", "/api/history?workspace=globex-ws&workspace=acme-ws", olga, "", 400, "ALIAS_CONFLICT", false},
		{"cross-team chat", "POST", "/api/chat", greg, `{"message":"hi","workspace":"acme-ws"}`, 404, "", false},
		{"viewer chat", "POST", "/api/chat", vic, `{"message":"hi","workspace":"acme-ws"}`, 403, "VIEWER_READ_ONLY", false},
		{"body too large", "POST", "/api/chat", olga, `{"message":"` + strings.Repeat("x", 2000) + `","workspace":"acme-ws"}`, 413, "FST_ERR_CTP_BODY_TOO_LARGE", false},
		{"viewer changes the shared model", "PUT", "/api/agent/model", vic, `{"model":"m"}`, 403, "OPERATOR_ONLY", false},
		{"owner changes the shared model", "PUT", "/api/agent/model", olga, `{"model":"m"}`, 403, "OPERATOR_ONLY", false},
		{"unlisted global write", "POST", "/api/agent/elsewhere", greg, `{}`, 403, "OPERATOR_ONLY", false},
		{"create workspace without team", "POST", "/api/workspaces", olga, `{"name":"x"}`, 400, "TEAM_REQUIRED", false},
		{"create workspace in foreign team", "POST", "/api/workspaces", olga, `{"name":"x","teamId":"globex"}`, 404, "", false},
		{"viewer creates workspace", "POST", "/api/workspaces", vic, `{"name":"x","teamId":"acme"}`, 403, "VIEWER_READ_ONLY", false},
		{"create workspace in own team", "POST", "/api/workspaces", olga, `{"name":"x","teamId":"acme"}`, 200, "", true},
		{"viewer deletes workspace", "DELETE", "/api/workspaces/acme-ws", vic, "", 403, "VIEWER_READ_ONLY", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(e.seen.list())
			res := do(t, srv, c.method, c.path, c.token, c.body)
			if res.status != c.status {
				t.Fatalf("status = %d, want %d (%s)", res.status, c.status, res.raw)
			}
			if c.code != "" && res.body["code"] != c.code {
				t.Fatalf("code = %v, want %s (%s)", res.body["code"], c.code, res.raw)
			}
			reached := len(e.seen.list()) > before
			if reached != c.reaches {
				t.Fatalf("handler reached = %v, want %v", reached, c.reaches)
			}
			if c.reaches && c.body != "" && res.body["body"] != c.body {
				t.Fatalf("handler got body %q, want %q", res.body["body"], c.body)
			}
		})
	}

	res := do(t, srv, "POST", "/api/chat", olga, `{"message":"hi","workspaceId":"acme-ws"}`)
	if res.body["scope"] != "olga/acme/owner/acme-ws/workspaceId" {
		t.Fatalf("the handler's scope = %v", res.body["scope"])
	}
	res = do(t, srv, "POST", "/api/chat", vic, `{"message":"hi","workspace":"acme-ws"}`)
	if res.raw != `{"error":"Viewers cannot send messages in team workspaces. Ask a team admin to upgrade your role.","code":"VIEWER_READ_ONLY"}`+"\n" {
		t.Fatalf("viewer chat body = %s", res.raw)
	}
	res = do(t, srv, "GET", "/api/commands", "", "")
	if res.raw != `{"error":"Unauthorized","code":"MISSING_TOKEN"}`+"\n" {
		t.Fatalf("missing token body = %s", res.raw)
	}
}

func TestWorkspaceListShowsOnlyOwnTeams(t *testing.T) {
	e := newEnv(t)
	srv := e.server(t, Config{})
	res := do(t, srv, "GET", "/api/workspaces", "Bearer tok-greg", "")
	if res.status != 200 || strings.TrimSpace(res.raw) != `[{"id":"globex-ws","teamId":"globex"}]` {
		t.Fatalf("greg's workspaces = %d %s", res.status, res.raw)
	}
	res = do(t, srv, "GET", "/api/workspaces", "Bearer tok-vic", "")
	if strings.TrimSpace(res.raw) != `[{"id":"acme-ws","teamId":"acme"}]` {
		t.Fatalf("vic's workspaces = %s", res.raw)
	}
}

func TestRevokedTokenStopsAtOnce(t *testing.T) {
	e := newEnv(t)
	srv := e.server(t, Config{})
	if res := do(t, srv, "GET", "/api/commands", "Bearer tok-olga", ""); res.status != 200 {
		t.Fatalf("before revoke: %d", res.status)
	}
	e.fake.mu.Lock()
	delete(e.fake.tokens, "tok-olga")
	e.fake.mu.Unlock()
	if res := do(t, srv, "GET", "/api/commands", "Bearer tok-olga", ""); res.status != 401 || res.body["code"] != "INVALID_TOKEN" {
		t.Fatalf("after revoke: %d %s", res.status, res.raw)
	}
}

func TestRateLimitSharedAcrossReplicas(t *testing.T) {
	e := newEnv(t)
	now := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	cfg := Config{Limits: ratelimit.Config{Limit: 3, RouteLimits: map[string]int{"/api/chat": 4}, Now: clock}}
	a, b := e.server(t, cfg), e.server(t, cfg)
	olga := "Bearer tok-olga"

	for i, srv := range []*httptest.Server{a, b, a} {
		res := do(t, srv, "GET", "/api/commands", olga, "")
		if res.status != 200 || res.header.Get("X-RateLimit-Limit") != "3" || res.header.Get("X-RateLimit-Remaining") != string(rune('2'-i)) {
			t.Fatalf("request %d: %d limit=%s remaining=%s", i, res.status, res.header.Get("X-RateLimit-Limit"), res.header.Get("X-RateLimit-Remaining"))
		}
		mu.Lock()
		now = now.Add(10 * time.Second)
		mu.Unlock()
	}
	res := do(t, b, "GET", "/api/commands", olga, "")
	if res.status != 429 || res.body["error"] != "Too Many Requests" || res.header.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("4th request: %d %s", res.status, res.raw)
	}
	// The first request (t0) ages out at t0+60s; it is now t0+30s.
	if res.body["retryAfterMs"] != float64(30000) || res.header.Get("Retry-After") != "30" {
		t.Fatalf("retry after = %v / %s", res.body["retryAfterMs"], res.header.Get("Retry-After"))
	}
	// Other routes and other users have their own windows; chat has 4.
	if res := do(t, a, "GET", "/api/workspaces/acme-ws/sessions", olga, ""); res.status != 200 {
		t.Fatalf("other route limited: %d", res.status)
	}
	if res := do(t, a, "GET", "/api/commands", "Bearer tok-vic", ""); res.status != 200 {
		t.Fatalf("other user limited: %d", res.status)
	}
	if res := do(t, a, "POST", "/api/chat", olga, `{"message":"x","workspace":"acme-ws"}`); res.header.Get("X-RateLimit-Limit") != "4" {
		t.Fatalf("chat limit header = %s", res.header.Get("X-RateLimit-Limit"))
	}
	mu.Lock()
	now = now.Add(31 * time.Second)
	mu.Unlock()
	if res := do(t, b, "GET", "/api/commands", olga, ""); res.status != 200 {
		t.Fatalf("after the window slid: %d %s", res.status, res.raw)
	}
}

func TestConcurrentRequestsAreAllCounted(t *testing.T) {
	e := newEnv(t)
	cfg := Config{Limits: ratelimit.Config{Limit: 10}}
	a, b := e.server(t, cfg), e.server(t, cfg)
	var ok, limited atomic.Int64
	var wg sync.WaitGroup
	for i := range 16 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			switch do(t, s, "GET", "/api/commands", "Bearer tok-olga", "").status {
			case 200:
				ok.Add(1)
			case 429:
				limited.Add(1)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 10 || limited.Load() != 6 {
		t.Fatalf("ok=%d limited=%d, want 10 and 6", ok.Load(), limited.Load())
	}
}

// Local mode resolves the workspace by the same rules, so handlers read
// it from the scope in both modes.
func TestResolveLocal(t *testing.T) {
	d := forward.Deps{Log: slog.New(slog.DiscardHandler), BodyLimit: 1 << 10, Timeout: 5 * time.Second}
	r := chi.NewRouter()
	r.Use(Resolve(d))
	r.Post("/api/chat", func(w http.ResponseWriter, r *http.Request) {
		sc, _ := ScopeFrom(r.Context())
		body, _ := io.ReadAll(r.Body)
		respond.JSON(w, 200, map[string]string{"scope": sc.Workspace + "/" + sc.Field, "body": string(body)})
	})
	r.Post("/api/agent/run", func(w http.ResponseWriter, r *http.Request) {
		sc, _ := ScopeFrom(r.Context())
		respond.JSON(w, 200, map[string]string{"scope": sc.Workspace + "/" + sc.Field})
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		path, body string
		status     int
		scope      string
	}{
		{"/api/chat", `{"message":"hi"}`, 200, "default/"},
		{"/api/chat", `{"message":"hi","workspace":null}`, 200, "default/"},
		{"/api/chat", `{"message":"hi","workspaceId":"w1"}`, 200, "w1/workspaceId"},
		{"/api/chat", `{"message":"hi","workspace":"","workspaceId":"w1"}`, 400, ""},
		{"/api/chat", `{"message":"hi","workspace":"w2","workspaceId":"w1"}`, 400, ""},
		{"/api/chat", `{"message":"hi","workspace":7}`, 400, ""},
		{"/api/agent/run", `{"question":"q","workspace":"personal"}`, 200, "/workspace"},
	} {
		res := do(t, srv, "POST", c.path, "", c.body)
		if res.status != c.status || (c.status == 200 && res.body["scope"] != c.scope) {
			t.Errorf("%s %s: %d %s", c.path, c.body, res.status, res.raw)
		}
		if c.path == "/api/chat" && c.status == 200 && res.body["body"] != c.body {
			t.Errorf("%s: the handler got %q", c.body, res.body["body"])
		}
	}
}
