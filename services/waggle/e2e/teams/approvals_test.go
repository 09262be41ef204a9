package teams_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestApprovalsAreTeamScoped: a pending approval carries a tool's input, so
// another team's member neither sees it nor decides it; the owner's team
// member does, and an "always" grant stays scoped to the workspace.
func TestApprovalsAreTeamScoped(t *testing.T) {
	llm := llmtest.New(llmtest.WithResponses(
		llmtest.Response{Steps: llmtest.ToolCall(0, "c1", "write_file", `{"path":"secret.txt","content":"team secret"}`, 2)},
		llmtest.Reply("written"),
	))
	llm.Start()
	defer llm.Close()
	natsAddr := waggletest.FreeAddr(t)
	srv := waggletest.Start(t, waggletest.WithConfig(func(c *app.Config) {
		c.SessionStore.PostgresURL = pgtest.URL(t)
		c.Gateway.Auth = "required"
		c.NATSListen = natsAddr
		c.TurnRunner.LLMURL = llm.URL()
	}))
	nc := srv.DialNATS()
	waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "acme", Owner: "olga"})
	waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "rival", Owner: "rita"})
	olga := waggletest.Operate(t, nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "olga"}).Token
	rita := waggletest.Operate(t, nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "rita"}).Token
	var ws map[string]any
	if st := srv.JSON("POST", "/api/workspaces", map[string]any{"name": "Acme Ops", "teamId": "acme"}, &ws, bearer(olga)...); st != 201 && st != 200 {
		t.Fatalf("create workspace: %d %v", st, ws)
	}
	id := fmt.Sprint(ws["id"])

	st := srv.Chat(map[string]any{"message": "write it", "workspace": id}, bearer(olga)...)
	var requestID string
	for requestID == "" {
		ev, err := st.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Name == "approval_required" {
			var a struct{ RequestID string }
			ev.Decode(t, &a)
			requestID = a.RequestID
		}
	}
	// Following or cancelling another team's turn is 404.
	turn := st.Resp.Header.Get("X-Waggle-Turn-Id")
	if code := srv.JSON("GET", "/api/chat/turns/"+turn+"/events", nil, nil, bearer(rita)...); code != 404 {
		t.Fatalf("rival follows the turn: %d", code)
	}
	if code := srv.JSON("POST", "/api/chat/turns/"+turn+"/cancel", nil, nil, bearer(rita)...); code != 404 {
		t.Fatalf("rival cancels the turn: %d", code)
	}
	var pend struct{ Count int }
	if code := srv.JSON("GET", "/api/approval/pending", nil, &pend, bearer(rita)...); code != 200 || pend.Count != 0 {
		t.Fatalf("rival sees %d pending (status %d)", pend.Count, code)
	}
	var out map[string]any
	if code := srv.JSON("POST", "/api/approval/"+requestID, map[string]any{"approved": true, "always": true, "sourceWorkspaceId": nil}, &out, bearer(rita)...); code != 404 {
		t.Fatalf("rival decides: %d %v", code, out)
	}
	if code := srv.JSON("GET", "/api/approval/pending", nil, &pend, bearer(olga)...); code != 200 || pend.Count != 1 {
		t.Fatalf("owner sees %d pending (status %d)", pend.Count, code)
	}
	if code := srv.JSON("POST", "/api/approval/"+requestID, map[string]any{"approved": true, "always": true, "sourceWorkspaceId": nil}, &out, bearer(olga)...); code != 200 {
		t.Fatalf("owner decides: %d %v", code, out)
	}
	evs := st.All(t)
	if last := evs[len(evs)-1]; last.Name != "done" {
		t.Fatalf("turn ended with %s", last.Name)
	}
	// The team's own member can replay the finished turn.
	if evs := waggletest.NewStream(srv.Do("GET", "/api/chat/turns/"+turn+"/events", nil, bearer(olga)...)).All(t); len(evs) == 0 || evs[len(evs)-1].Name != "done" {
		t.Fatalf("owner replays: %v", waggletest.Names(evs))
	}
	// The grant is scoped to the workspace despite the null in the body,
	// and the rival does not see it.
	var grants struct {
		Grants []protocol.ApprovalGrant
		Count  int
	}
	srv.JSON("GET", "/api/approval/grants", nil, &grants, bearer(olga)...)
	if grants.Count != 1 || grants.Grants[0].SourceWorkspaceID == nil || *grants.Grants[0].SourceWorkspaceID != id {
		t.Fatalf("owner's grants: %+v", grants)
	}
	srv.JSON("GET", "/api/approval/grants", nil, &grants, bearer(rita)...)
	if grants.Count != 0 {
		t.Fatalf("rival sees grants: %+v", grants)
	}
	if code := srv.JSON(http.MethodDelete, "/api/approval/grants/"+firstGrantID(t, srv, olga), nil, &out, bearer(rita)...); code != 404 || !strings.Contains(fmt.Sprint(out), "Grant not found") {
		t.Fatalf("rival revokes: %d %v", code, out)
	}
}

func firstGrantID(t *testing.T, srv *waggletest.Server, tok string) string {
	var g struct{ Grants []protocol.ApprovalGrant }
	srv.JSON("GET", "/api/approval/grants", nil, &g, bearer(tok)...)
	if len(g.Grants) == 0 {
		t.Fatal("no grant")
	}
	return g.Grants[0].ID
}
