package agentcontext

import (
	"net/http"
	"testing"
)

func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

// TestTeamServerScopesTheAgentsContext: on a team server (PostgreSQL,
// tokens), each user has their own profile and custom personas; another
// team's member cannot read a workspace's briefing or identity, and a
// plain member cannot change the workspace's identity.
func TestTeamServerScopesTheAgentsContext(t *testing.T) {
	ts := startTeams(t)
	srv, olga, rita, mark, id := ts.srv, ts.olga, ts.rita, ts.mark, ts.ws

	// Profiles are per user.
	if st := srv.JSON(http.MethodPut, "/api/profile", obj{"name": "Olga"}, nil, olga...); st != 200 {
		t.Fatalf("olga's profile: %d", st)
	}
	var p obj
	if st := srv.JSON(http.MethodGet, "/api/profile", nil, &p, rita...); st != 200 || p["name"] != "" {
		t.Errorf("rita reads %d %v", st, p)
	}
	if srv.JSON(http.MethodGet, "/api/profile", nil, &p, olga...); p["name"] != "Olga" {
		t.Errorf("olga reads %v", p)
	}
	// Custom personas are per user.
	if st := srv.JSON(http.MethodPost, "/api/personas", obj{"name": "Olga's Critic", "systemPrompt": "Be harsh."}, nil, olga...); st != http.StatusCreated {
		t.Fatalf("olga's persona: %d", st)
	}
	var list struct {
		Personas []personaEntry `json:"personas"`
	}
	srv.JSON(http.MethodGet, "/api/personas", nil, &list, rita...)
	for _, e := range list.Personas {
		if e.ID == "olga-s-critic" {
			t.Errorf("rita sees olga's persona: %+v", list.Personas)
		}
	}
	if st := srv.JSON(http.MethodDelete, "/api/personas/olga-s-critic", nil, nil, rita...); st != http.StatusNotFound {
		t.Errorf("rita deletes olga's persona: %d", st)
	}
	// The workspace's briefing and identity are the team's.
	if st := srv.JSON(http.MethodGet, "/api/workspaces/"+id+"/context", nil, nil, olga...); st != 200 {
		t.Errorf("olga's briefing: %d", st)
	}
	if st := srv.JSON(http.MethodGet, "/api/workspaces/"+id+"/context", nil, nil, rita...); st != http.StatusNotFound {
		t.Errorf("rival reads the briefing: %d", st)
	}
	if st := srv.JSON(http.MethodGet, "/api/identity?workspace="+id, nil, nil, rita...); st != http.StatusNotFound {
		t.Errorf("rival reads the identity: %d", st)
	}
	if st := srv.JSON(http.MethodPost, "/api/identity", obj{"workspace": id, "name": "Bee"}, nil, mark...); st != http.StatusForbidden {
		t.Errorf("member sets the workspace identity: %d", st)
	}
	if st := srv.JSON(http.MethodPost, "/api/identity", obj{"workspace": id, "name": "Bee"}, nil, olga...); st != 200 {
		t.Errorf("owner sets the workspace identity: %d", st)
	}
	var mi struct {
		Identity string `json:"identity"`
	}
	if st := srv.JSON(http.MethodGet, "/api/mind/identity?workspace="+id, nil, &mi, mark...); st != 200 || mi.Identity != "Name: Bee" {
		t.Errorf("member reads the identity: %d %q", st, mi.Identity)
	}
	// A personal identity is the user's own.
	srv.JSON(http.MethodPost, "/api/identity", obj{"name": "Rita's bot"}, nil, rita...)
	if srv.JSON(http.MethodGet, "/api/mind/identity", nil, &mi, olga...); mi.Identity != "No identity configured yet." {
		t.Errorf("olga's personal identity %q", mi.Identity)
	}
}
