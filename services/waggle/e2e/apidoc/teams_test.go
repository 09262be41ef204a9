package apidoc

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestTeamTrafficMatchesDescription is the team-server half: the teams
// and tokens routes, and the 401/403/404/429 answers of --auth=required,
// against the description (PostgreSQL needed; skipped without it).
func TestTeamTrafficMatchesDescription(t *testing.T) {
	pg := pgtest.URL(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	natsAddr := ln.Addr().String()
	ln.Close()
	srv := waggletest.Start(t, waggletest.WithConfig(func(c *app.Config) {
		c.SessionStore.PostgresURL = pg
		c.Gateway.Auth = "required"
		c.NATSListen = natsAddr
		c.Gateway.RateLimit = 8
	}))
	nc := srv.DialNATS()
	token := func(user string) []string {
		rep, err := bus.Call(context.Background(), nc, protocol.CreateToken, protocol.TokenCreateRequest{User: user})
		if err != nil {
			t.Fatal(err)
		}
		return []string{"Authorization", "Bearer " + rep.Token}
	}
	olga, vic, greg := token("olga"), token("vic"), token("greg")
	s := loadSpec(t, srv, olga...)

	s.call(t, srv, http.MethodGet, "/api/teams", "/api/teams", nil)
	s.call(t, srv, http.MethodGet, "/api/teams", "/api/teams", nil, "Authorization", "Bearer wrong")
	s.call(t, srv, http.MethodPost, "/api/teams", "/api/teams", map[string]any{"id": "acme", "name": "Acme"}, olga...)
	s.call(t, srv, http.MethodPost, "/api/teams", "/api/teams", map[string]any{"id": "acme"}, olga...)
	s.call(t, srv, http.MethodGet, "/api/teams", "/api/teams", nil, olga...)
	s.call(t, srv, http.MethodPut, "/api/teams/acme/members/vic", "/api/teams/{team}/members/{user}", map[string]any{"role": "viewer"}, olga...)
	s.call(t, srv, http.MethodPut, "/api/teams/acme/members/greg", "/api/teams/{team}/members/{user}", map[string]any{"role": "member"}, vic...)
	s.call(t, srv, http.MethodPut, "/api/teams/acme/members/greg", "/api/teams/{team}/members/{user}", map[string]any{"role": "member"}, olga...)
	s.call(t, srv, http.MethodGet, "/api/teams/acme", "/api/teams/{team}", nil, olga...)
	s.call(t, srv, http.MethodGet, "/api/teams/nope", "/api/teams/{team}", nil, olga...)
	s.call(t, srv, http.MethodPatch, "/api/teams/acme", "/api/teams/{team}", map[string]any{"name": "Acme Inc", "codeTools": true}, olga...)
	s.call(t, srv, http.MethodPut, "/api/teams/acme/capability-policies/member", "/api/teams/{team}/capability-policies/{role}", map[string]any{"blockedTools": []string{"bash"}}, olga...)
	s.call(t, srv, http.MethodGet, "/api/teams/acme/capability-policies", "/api/teams/{team}/capability-policies", nil, olga...)
	_, ws := s.call(t, srv, http.MethodPost, "/api/workspaces", "/api/workspaces", map[string]any{"name": "Acme Ops", "teamId": "acme"}, olga...)
	id := field(t, ws, "id")
	s.call(t, srv, http.MethodPost, "/api/workspaces", "/api/workspaces", map[string]any{"name": "Loose"}, olga...)
	s.call(t, srv, http.MethodPost, "/api/chat", "/api/chat", map[string]any{"message": "hi", "workspace": id}, vic...)
	s.call(t, srv, http.MethodGet, "/api/workspaces/"+id+"/sessions", "/api/workspaces/{id}/sessions", nil, vic...)
	s.call(t, srv, http.MethodGet, "/api/workspaces/"+id+"/sessions", "/api/workspaces/{id}/sessions", nil, "Authorization", "Bearer wrong")
	s.call(t, srv, http.MethodGet, "/api/sessions/s1/summary", "/api/sessions/{sessionId}/summary", nil, olga...)
	// A viewer may not branch a session of the team's workspace.
	if code, _ := s.call(t, srv, http.MethodPost, "/api/workspaces/"+id+"/sessions/s1/branch", "/api/workspaces/{id}/sessions/{sessionId}/branch", map[string]any{"at": 0}, vic...); code != http.StatusForbidden {
		t.Errorf("a viewer's branch: %d", code)
	}
	s.call(t, srv, http.MethodDelete, "/api/teams/acme/members/greg", "/api/teams/{team}/members/{user}", nil, olga...)
	s.call(t, srv, http.MethodGet, "/api/workspaces/"+id, "/api/workspaces/{id}", nil, greg...)
	// Nor may someone outside the team (greg was just removed).
	if code, _ := s.call(t, srv, http.MethodPost, "/api/workspaces/"+id+"/sessions/s1/branch", "/api/workspaces/{id}/sessions/{sessionId}/branch", map[string]any{"at": 0}, greg...); code != http.StatusForbidden && code != http.StatusNotFound {
		t.Errorf("an outsider's branch: %d", code)
	}
	s.call(t, srv, http.MethodGet, "/api/approval/grants", "/api/approval/grants", nil, olga...)

	_, created := s.call(t, srv, http.MethodPost, "/api/tokens", "/api/tokens", map[string]any{"name": "laptop"}, olga...)
	s.call(t, srv, http.MethodPost, "/api/tokens", "/api/tokens", map[string]any{"user": "someone"}, olga...)
	s.call(t, srv, http.MethodGet, "/api/tokens", "/api/tokens", nil, olga...)
	s.call(t, srv, http.MethodDelete, "/api/tokens/"+field(t, created, "id"), "/api/tokens/{id}", nil, olga...)
	s.call(t, srv, http.MethodDelete, "/api/tokens/none", "/api/tokens/{id}", nil, olga...)

	// Past the limit of one route: 429 with its headers.
	for range 10 {
		s.call(t, srv, http.MethodGet, "/api/agent/model", "/api/agent/model", nil, greg...)
	}
	if !s.seen["GET /api/agent/model 429"] {
		t.Errorf("the rate limit never answered 429")
	}
	s.call(t, srv, http.MethodDelete, "/api/teams/acme", "/api/teams/{team}", nil, olga...)
	for _, want := range []string{"POST /api/teams 201", "GET /api/teams 401", "POST /api/chat 403", "GET /api/workspaces/{id} 404", "DELETE /api/teams/{team} 200"} {
		if !s.seen[want] {
			t.Errorf("no %s was checked", want)
		}
	}
	t.Logf("checked %d answers against the description", len(s.seen))
}
