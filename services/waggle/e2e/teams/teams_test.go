// Black-box tests of team-server mode through the whole app: auth
// required, the teams service in the session store, PostgreSQL.
package teams_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// teamServer starts waggle in team-server mode and returns it with an
// operator bus connection (what `waggle team` uses).
func teamServer(t *testing.T) (*waggletest.Server, *nats.Conn) {
	natsAddr := waggletest.FreeAddr(t)
	srv := waggletest.Start(t, waggletest.WithConfig(func(c *app.Config) {
		c.SessionStore.PostgresURL = pgtest.URL(t)
		c.Gateway.Auth = "required"
		c.NATSListen = natsAddr
	}))
	nc := srv.DialNATS()
	return srv, nc
}

func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

func TestTeamServer(t *testing.T) {
	srv, nc := teamServer(t)
	waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "acme", Owner: "olga"})
	olga := waggletest.Operate(t, nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "olga"}).Token
	greg := waggletest.Operate(t, nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "greg"}).Token
	vic := waggletest.Operate(t, nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "vic"})

	var body map[string]any
	if st := srv.JSON("GET", "/api/workspaces", nil, &body); st != http.StatusUnauthorized || body["code"] != "MISSING_TOKEN" {
		t.Fatalf("no token: %d %v", st, body)
	}
	// Teams and roles over HTTP.
	if st := srv.JSON("PUT", "/api/teams/acme/members/vic", map[string]any{"role": "viewer"}, nil, bearer(olga)...); st != 200 {
		t.Fatalf("add viewer: %d", st)
	}
	if st := srv.JSON("PUT", "/api/teams/acme/members/greg", map[string]any{"role": "member"}, nil, bearer(vic.Token)...); st != 403 {
		t.Fatalf("viewer adds member: %d", st)
	}
	// A new team comes with its first workspace: members can chat right
	// after the documented setup.
	var first []map[string]any
	if st := srv.JSON("GET", "/api/workspaces", nil, &first, bearer(olga)...); st != 200 || len(first) != 1 || first[0]["teamId"] != "acme" || first[0]["name"] != "acme" {
		t.Fatalf("a new team's workspaces: %d %v", st, first)
	}
	var ws map[string]any
	if st := srv.JSON("POST", "/api/workspaces", map[string]any{"name": "Acme Ops", "teamId": "acme"}, &ws, bearer(olga)...); st != 200 && st != 201 {
		t.Fatalf("create team workspace: %d %v", st, ws)
	}
	id := fmt.Sprint(ws["id"])

	// Viewer: 403 before any stream; reads fine.
	resp := srv.Do("POST", "/api/chat", map[string]any{"message": "hi", "workspace": id}, bearer(vic.Token)...)
	resp.Body.Close()
	if resp.StatusCode != 403 || resp.Header.Get("Content-Type") == "text/event-stream" {
		t.Fatalf("viewer chat: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if st := srv.JSON("GET", "/api/workspaces/"+id+"/sessions", nil, nil, bearer(vic.Token)...); st != 200 {
		t.Fatalf("viewer read: %d", st)
	}
	// Cross-team: 404, and the list does not show it.
	if st := srv.JSON("GET", "/api/workspaces/"+id+"/sessions", nil, nil, bearer(greg)...); st != 404 {
		t.Fatalf("cross-team read: %d", st)
	}
	var list []map[string]any
	if st := srv.JSON("GET", "/api/workspaces", nil, &list, bearer(greg)...); st != 200 || len(list) != 0 {
		t.Fatalf("greg's list: %d %v", st, list)
	}
	// Revoke takes effect at once.
	waggletest.Operate(t, nc, protocol.RevokeToken, protocol.TokenRevokeRequest{ID: vic.ID})
	if st := srv.JSON("GET", "/api/workspaces", nil, &body, bearer(vic.Token)...); st != 401 || body["code"] != "INVALID_TOKEN" {
		t.Fatalf("revoked token: %d %v", st, body)
	}
	// Rate limit headers are present in team mode.
	resp = srv.Do("GET", "/api/teams", nil, bearer(olga)...)
	resp.Body.Close()
	if resp.Header.Get("X-RateLimit-Limit") != "100" {
		t.Fatalf("X-RateLimit-Limit = %q", resp.Header.Get("X-RateLimit-Limit"))
	}
}

func TestMigrationsTwiceThroughRestart(t *testing.T) {
	srv, nc := teamServer(t)
	waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "acme", Owner: "olga"})
	srv.Restart()
	// The operator connection reconnects to the restarted embedded NATS.
	rep := waggletest.Operate(t, nc, protocol.ListTeams, protocol.TeamListRequest{})
	if len(rep.Teams) != 1 || rep.Teams[0].ID != "acme" {
		t.Fatalf("teams after restart: %+v", rep.Teams)
	}
}
