package agentcontext

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// teamServer is a team server (PostgreSQL, tokens) with teams acme (owner
// olga, member mark) and rival (owner rita), a model that answers "ok",
// and a workspace of acme's.
type teamServer struct {
	srv              *waggletest.Server
	llm              *llmtest.Server
	olga, mark, rita []string
	ws               string
}

func startTeams(t *testing.T) teamServer {
	t.Helper()
	llm := llmtest.New(llmtest.WithDefault(llmtest.Reply("ok")))
	llm.Start()
	t.Cleanup(llm.Close)
	natsAddr := waggletest.FreeAddr(t)
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()), waggletest.WithConfig(func(c *app.Config) {
		c.SessionStore.PostgresURL = pgtest.URL(t)
		c.Gateway.Auth = "required"
		c.NATSListen = natsAddr
	}))
	nc := srv.DialNATS()
	waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "acme", Owner: "olga"})
	waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "rival", Owner: "rita"})
	ts := teamServer{srv: srv, llm: llm,
		olga: bearer(waggletest.Operate(t, nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "olga"}).Token),
		mark: bearer(waggletest.Operate(t, nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "mark"}).Token),
		rita: bearer(waggletest.Operate(t, nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "rita"}).Token),
	}
	if st := srv.JSON(http.MethodPut, "/api/teams/acme/members/mark", obj{"role": "member"}, nil, ts.olga...); st != 200 {
		t.Fatalf("add member: %d", st)
	}
	ts.ws = ts.createWorkspace(t, "Acme Deals", "acme", ts.olga)
	return ts
}

func (ts teamServer) createWorkspace(t *testing.T, name, team string, who []string) string {
	t.Helper()
	var ws obj
	if st := ts.srv.JSON(http.MethodPost, "/api/workspaces", obj{"name": name, "teamId": team}, &ws, who...); st != 200 && st != 201 {
		t.Fatalf("create workspace %s: %d %v", name, st, ws)
	}
	return fmt.Sprint(ws["id"])
}

// TestTeamSharedPersonas: a team's admins share personas with it; its
// members list them beside the built-ins and their turns in the team's
// workspaces run them (prompt and tool allowlist); another team neither
// lists, reads, changes nor runs them; a plain member cannot change them.
func TestTeamSharedPersonas(t *testing.T) {
	ts := startTeams(t)
	srv := ts.srv
	shared := obj{"id": "acme-closer", "name": "Acme Closer", "systemPrompt": "Close every deal with the Acme discount table.", "tools": []string{"read_file"}}

	for _, tc := range []struct {
		who  []string
		path string
		want int
	}{
		{ts.mark, "/api/team-personas?team=acme", http.StatusForbidden}, // a member does not write
		{ts.rita, "/api/team-personas?team=acme", http.StatusNotFound},  // another team does not see acme
		{ts.olga, "/api/team-personas", http.StatusBadRequest},          // no team named
	} {
		if st := srv.JSON(http.MethodPost, tc.path, shared, nil, tc.who...); st != tc.want {
			t.Errorf("POST %s: %d, want %d", tc.path, st, tc.want)
		}
	}
	var created obj
	if st := srv.JSON(http.MethodPost, "/api/team-personas?team=acme", shared, &created, ts.olga...); st != http.StatusCreated || created["id"] != "acme-closer" {
		t.Fatalf("admin shares a persona: %d %v", st, created)
	}
	if st := srv.JSON(http.MethodPost, "/api/team-personas?team=acme", obj{"id": "coder", "name": "C", "systemPrompt": "x"}, nil, ts.olga...); st != http.StatusConflict {
		t.Errorf("a built-in id: %d", st)
	}

	// Members read the team's set whole; another team cannot.
	var set protocol.CustomPersonaList
	if st := srv.JSON(http.MethodGet, "/api/team-personas?team=acme", nil, &set, ts.mark...); st != 200 || len(set.Personas) != 1 || set.Personas[0].SystemPrompt != shared["systemPrompt"] {
		t.Errorf("member reads the team's personas: %d %+v", st, set)
	}
	if st := srv.JSON(http.MethodGet, "/api/team-personas?team=acme", nil, nil, ts.rita...); st != http.StatusNotFound {
		t.Errorf("rival reads acme's personas: %d", st)
	}
	// The picker lists them, marked, for a workspace of the team only.
	type entry struct {
		ID     string `json:"id"`
		TeamID string `json:"teamId"`
	}
	var list struct {
		Personas []entry `json:"personas"`
	}
	srv.JSON(http.MethodGet, "/api/personas?workspace="+ts.ws, nil, &list, ts.mark...)
	if !slices.Contains(list.Personas, entry{ID: "acme-closer", TeamID: "acme"}) {
		t.Errorf("member's picker in acme's workspace: %+v", list.Personas)
	}
	list.Personas = nil
	srv.JSON(http.MethodGet, "/api/personas", nil, &list, ts.mark...)
	if slices.ContainsFunc(list.Personas, func(e entry) bool { return e.TeamID != "" }) {
		t.Errorf("picker without a workspace lists team personas: %+v", list.Personas)
	}
	if st := srv.JSON(http.MethodGet, "/api/personas?workspace="+ts.ws, nil, nil, ts.rita...); st != http.StatusNotFound {
		t.Errorf("rival lists personas of acme's workspace: %d", st)
	}
	// Plain members and other teams change nothing.
	for _, who := range [][]string{ts.mark, ts.rita} {
		if st := srv.JSON(http.MethodPatch, "/api/team-personas/acme-closer?team=acme", obj{"systemPrompt": "Give everything away."}, nil, who...); st != http.StatusForbidden && st != http.StatusNotFound {
			t.Errorf("patch by a non-admin: %d", st)
		}
		if st := srv.JSON(http.MethodDelete, "/api/team-personas/acme-closer?team=acme", nil, nil, who...); st != http.StatusForbidden && st != http.StatusNotFound {
			t.Errorf("delete by a non-admin: %d", st)
		}
	}

	// A member's turn in the team's workspace runs the shared persona.
	before := len(ts.llm.ChatRequests())
	evs := srv.Chat(obj{"message": "price this deal", "workspace": ts.ws, "session": "s1", "persona": "acme-closer"}, ts.mark...).All(t)
	if names := waggletest.Names(evs); names[len(names)-1] != "done" {
		t.Fatalf("turn events %v", names)
	}
	reqs := ts.llm.ChatRequests()
	if len(reqs) <= before {
		t.Fatal("the turn reached no model")
	}
	sys := reqs[before].Chat.Messages[0].Content
	mustContain(t, "system prompt", sys, "## Persona: Acme Closer", "Acme discount table")
	if tools := toolNames(reqs[before]); slices.Contains(tools, "bash") || slices.Contains(tools, "write_file") {
		t.Errorf("the shared persona's allowlist is not applied: %v", tools)
	}

	// Rival's own workspace does not run acme's persona: it is only named.
	rivalWS := ts.createWorkspace(t, "Rival Deals", "rival", ts.rita)
	before = len(ts.llm.ChatRequests())
	srv.Chat(obj{"message": "price this deal", "workspace": rivalWS, "session": "s1", "persona": "acme-closer"}, ts.rita...).All(t)
	reqs = ts.llm.ChatRequests()
	if len(reqs) <= before {
		t.Fatal("rival's turn reached no model")
	}
	if sys := reqs[before].Chat.Messages[0].Content; strings.Contains(sys, "Acme discount table") {
		t.Errorf("rival's turn runs acme's shared persona:\n%s", sys)
	}

	// The admin deletes it; deleting the team would have too.
	var del obj
	if st := srv.JSON(http.MethodDelete, "/api/team-personas/acme-closer?team=acme", nil, &del, ts.olga...); st != 200 || del["deleted"] != true {
		t.Errorf("admin deletes: %d %v", st, del)
	}
	set = protocol.CustomPersonaList{}
	if srv.JSON(http.MethodGet, "/api/team-personas?team=acme", nil, &set, ts.olga...); len(set.Personas) != 0 {
		t.Errorf("after delete: %+v", set)
	}
}

// TestDeletedWorkspaceTakesItsMind: deleting a team's workspace deletes
// its identity and awareness too; a workspace created later under the
// same id — by another team — starts without them, and a deleted team's
// shared personas do not reach a new team of the same id.
func TestDeletedWorkspaceTakesItsMind(t *testing.T) {
	ts := startTeams(t)
	srv := ts.srv
	if st := srv.JSON(http.MethodPost, "/api/identity", obj{"workspace": ts.ws, "name": "Acme Secret Bot", "role": "knows the margins"}, nil, ts.olga...); st != 200 {
		t.Fatalf("set identity: %d", st)
	}
	// The task the agent's add_task would add (the tool's own test is
	// TestIdentityAndAwareness).
	waggletest.Operate(t, srv.DialNATS(), protocol.AddAwareness, protocol.AwarenessAddRequest{
		MindRef: protocol.MindRef{Workspace: ts.ws}, Category: "task", Content: "Renegotiate the margins", Priority: 5})
	var aw struct {
		Awareness string `json:"awareness"`
	}
	if srv.JSON(http.MethodGet, "/api/mind/awareness?workspace="+ts.ws, nil, &aw, ts.olga...); !strings.Contains(aw.Awareness, "Renegotiate the margins") {
		t.Fatalf("awareness before delete: %q", aw.Awareness)
	}
	if st := srv.JSON(http.MethodDelete, "/api/workspaces/"+ts.ws, nil, nil, ts.olga...); st != 200 {
		t.Fatalf("delete workspace: %d", st)
	}
	// Rival creates a workspace of the same name: the same id.
	again := ts.createWorkspace(t, "Acme Deals", "rival", ts.rita)
	if again != ts.ws {
		t.Fatalf("the new workspace's id %q differs from %q: the test needs the same id", again, ts.ws)
	}
	var id obj
	if st := srv.JSON(http.MethodGet, "/api/identity?workspace="+again, nil, &id, ts.rita...); st != 200 || id["configured"] != false || id["name"] != nil {
		t.Errorf("rival's new workspace inherits the identity: %d %v", st, id)
	}
	aw.Awareness = ""
	if srv.JSON(http.MethodGet, "/api/mind/awareness?workspace="+again, nil, &aw, ts.rita...); strings.Contains(aw.Awareness, "margins") {
		t.Errorf("rival's new workspace inherits the awareness: %q", aw.Awareness)
	}
	before := len(ts.llm.ChatRequests())
	srv.Chat(obj{"message": "who are you", "workspace": again, "session": "s2"}, ts.rita...).All(t)
	reqs := ts.llm.ChatRequests()
	if len(reqs) <= before {
		t.Fatal("the turn reached no model")
	}
	if sys := reqs[before].Chat.Messages[0].Content; strings.Contains(sys, "Acme Secret Bot") || strings.Contains(sys, "margins") {
		t.Errorf("rival's prompt carries the deleted workspace's mind:\n%s", sys)
	}

	// A deleted team's shared personas go with it.
	if st := srv.JSON(http.MethodPost, "/api/team-personas?team=acme", obj{"id": "acme-closer", "name": "Acme Closer", "systemPrompt": "Acme only."}, nil, ts.olga...); st != http.StatusCreated {
		t.Fatalf("share: %d", st)
	}
	if st := srv.JSON(http.MethodDelete, "/api/teams/acme", nil, nil, ts.olga...); st != 200 {
		t.Fatalf("delete team: %d", st)
	}
	waggletest.Operate(t, srv.DialNATS(), protocol.CreateTeam, protocol.TeamCreateRequest{ID: "acme", Owner: "rita"})
	var set protocol.CustomPersonaList
	if st := srv.JSON(http.MethodGet, "/api/team-personas?team=acme", nil, &set, ts.rita...); st != 200 || len(set.Personas) != 0 {
		t.Errorf("a new team acme inherits the old one's personas: %d %+v", st, set)
	}
}
