package security

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
)

// A group run's job holds the task and every member's output, produced in
// the run's workspace. alice (in acme and in evil) runs acme's group in
// evil's workspace: bob, a member of acme (the group's team) but not of
// evil, read the job's outputs through GET
// /api/agent-groups/{id}/runs/{jobId}, although GET /api/jobs/{id} told
// him it does not exist. Now both routes answer 404 to him; evil's members
// and alice read it.
func TestTeamsGroupRunInAnotherTeamsWorkspace(t *testing.T) {
	const secret = "evil's launch codes are 1234"
	llm := llmtest.New(llmtest.WithDefault(llmtest.Reply(secret)))
	llm.Start()
	defer llm.Close()
	w := teamsSetup(t, llm.URL())
	putMember(t, w, "evil", "alice", "member")
	var g protocol.AgentGroup
	if st := w.srv.JSON("POST", "/api/agent-groups", map[string]any{"name": "acme-solo", "strategy": "sequential", "teamId": "acme",
		"members": []any{map[string]any{"agentId": "researcher"}}}, &g, teamsBearer(w.alice)...); st != 201 {
		t.Fatalf("create group: %d", st)
	}
	var job protocol.GroupJob
	if st := w.srv.JSON("POST", "/api/agent-groups/"+g.ID+"/run", map[string]any{"task": "read evil's plans", "workspaceId": w.evilWS}, &job, teamsBearer(w.alice)...); st != 200 {
		t.Fatalf("alice runs acme's group in evil's workspace: %d", st)
	}
	runs := "/api/agent-groups/" + g.ID + "/runs/" + job.JobID
	waitfor.True(t, "the group run ends", func() bool {
		var j protocol.GroupJob
		w.srv.JSON("GET", runs, nil, &j, teamsBearer(w.alice)...)
		return j.Status == protocol.JobCompleted || j.Status == protocol.JobFailed
	})
	var j protocol.GroupJob
	if st := w.srv.JSON("GET", runs, nil, &j, teamsBearer(w.alice)...); st != 200 || !strings.Contains(j.Result, secret) {
		t.Fatalf("alice reads her run: %d %+v", st, j)
	}
	if st := w.srv.JSON("GET", "/api/jobs/"+job.JobID, nil, nil, teamsBearer(w.mal)...); st != 200 {
		t.Errorf("mal (evil's owner) polls the run in his workspace: %d", st)
	}
	for _, path := range []string{runs, "/api/jobs/" + job.JobID} {
		resp := w.srv.Do("GET", path, nil, teamsBearer(w.bob)...)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || strings.Contains(string(b), secret) || strings.Contains(string(b), "evil's plans") {
			t.Errorf("bob (acme only) reads %s: %d %s", path, resp.StatusCode, b)
		}
	}
}

func putMember(t *testing.T, w *teamsWorld, team, user, role string) {
	t.Helper()
	if st := w.srv.JSON("PUT", "/api/teams/"+team+"/members/"+user, map[string]any{"role": role}, nil, teamsBearer(w.mal)...); st != 200 {
		t.Fatalf("put %s in %s: %d", user, team, st)
	}
}
