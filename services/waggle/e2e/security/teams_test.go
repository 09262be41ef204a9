package security

// Team scope on a team server (--auth=required on PostgreSQL): two teams,
// acme (alice owner, bob member, vic viewer, workspace acme's) and evil
// (mal, its owner, who made it himself over HTTP). Each test is one attack
// of the review's findings 7-12 by mal or vic on acme.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// teamsWorld is a team server with acme and evil set up.
type teamsWorld struct {
	srv                  *waggletest.Server
	nc                   *nats.Conn
	alice, bob, vic, mal string // bearer tokens
	acmeWS, evilWS       string // workspace ids
}

func teamsBearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

// teamsSetup starts a team server (with a model at llmURL when not "")
// and makes the two teams.
func teamsSetup(t *testing.T, llmURL string) *teamsWorld {
	t.Helper()
	natsAddr := waggletest.FreeAddr(t)
	opts := []waggletest.Option{waggletest.WithConfig(func(c *app.Config) {
		c.SessionStore.PostgresURL = pgtest.URL(t)
		c.Gateway.Auth = "required"
		c.NATSListen = natsAddr
	})}
	if llmURL != "" {
		opts = append(opts, waggletest.WithLLM(llmURL))
	}
	w := &teamsWorld{srv: waggletest.Start(t, opts...)}
	w.nc = w.srv.DialNATS()
	token := func(user string) string {
		return waggletest.Operate(t, w.nc, protocol.CreateToken, protocol.TokenCreateRequest{User: user}).Token
	}
	waggletest.Operate(t, w.nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "acme", Owner: "alice"})
	w.alice, w.bob, w.vic, w.mal = token("alice"), token("bob"), token("vic"), token("mal")
	for user, role := range map[string]string{"bob": "member", "vic": "viewer"} {
		waggletest.Operate(t, w.nc, protocol.PutMember, protocol.MemberPutRequest{TeamRef: protocol.TeamRef{Team: "acme"}, User: user, Role: role})
	}
	// Any user may make a team; mal does, and owns it.
	if st := w.srv.JSON("POST", "/api/teams", map[string]any{"id": "evil"}, nil, teamsBearer(w.mal)...); st != 201 {
		t.Fatalf("mal creates evil: %d", st)
	}
	w.acmeWS = teamsWorkspace(t, w.srv, w.alice, "Acme Ops", "acme")
	w.evilWS = teamsWorkspace(t, w.srv, w.mal, "Evil Lair", "evil")
	return w
}

func teamsWorkspace(t *testing.T, srv *waggletest.Server, tok, name, team string) string {
	t.Helper()
	var ws map[string]any
	if st := srv.JSON("POST", "/api/workspaces", map[string]any{"name": name, "teamId": team}, &ws, teamsBearer(tok)...); st != 200 && st != 201 {
		t.Fatalf("create workspace %s: %d %v", name, st, ws)
	}
	return fmt.Sprint(ws["id"])
}

// teamsFrames lists the frame contents alice sees in acme's workspace.
func teamsFrames(t *testing.T, w *teamsWorld) string {
	t.Helper()
	var out struct {
		Results []struct {
			Content string `json:"content"`
		} `json:"results"`
	}
	if st := w.srv.JSON("GET", "/api/memory/frames?workspace="+w.acmeWS, nil, &out, teamsBearer(w.alice)...); st != 200 {
		t.Fatalf("alice lists acme frames: %d", st)
	}
	var b strings.Builder
	for _, r := range out.Results {
		b.WriteString(r.Content + "\n")
	}
	return b.String()
}

// Finding 8: workspacePath pointed mal's chat at acme's workspace
// directory; and 200 vs 400 PATH_TRAVERSAL told him where the data dir
// is. Every workspacePath is refused on a team server, with one answer
// that names no path, before any stream starts.
func TestTeamsWorkspacePathReadsOtherTeamsFiles(t *testing.T) {
	llm := llmtest.New(llmtest.WithDefault(llmtest.Reply("ok")))
	llm.Start()
	defer llm.Close()
	w := teamsSetup(t, llm.URL())
	for _, path := range []string{
		w.srv.DataDir + "/workspaces/" + w.acmeWS, // inside the data dir
		w.srv.DataDir,
		"/etc", // outside it: the same answer, so no oracle
	} {
		resp := w.srv.Do("POST", "/api/chat", map[string]any{"message": "read config.json", "workspace": w.evilWS, "workspacePath": path}, teamsBearer(w.mal)...)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || resp.Header.Get("Content-Type") == "text/event-stream" {
			t.Errorf("workspacePath %s: %d %s", path, resp.StatusCode, body)
		}
		if strings.Contains(string(body), w.srv.DataDir) || strings.Contains(string(body), "PATH_TRAVERSAL") {
			t.Errorf("workspacePath %s: the answer reveals the path: %s", path, body)
		}
	}
	if n := len(llm.ChatRequests()); n != 0 {
		t.Errorf("the model was asked %d times: a turn ran", n)
	}
}

// Finding 9: POST /api/agent/run had no team scope; mal's retrieval run
// over acme's workspace read acme's memories.
func TestTeamsAgentRunOverOtherTeamsWorkspace(t *testing.T) {
	const secret = "acme launch code is 4242"
	llm := llmtest.New(llmtest.WithDefault(llmtest.Reply("ok")), llmtest.WithResponses(
		llmtest.Response{Steps: llmtest.Steps(llmtest.ToolCall(0, "call_1", "retrieve", `{"query":"launch code"}`, 1))},
		llmtest.Reply("done"),
	))
	llm.Start()
	defer llm.Close()
	w := teamsSetup(t, llm.URL())
	if st := w.srv.JSON("POST", "/api/memory/frames", map[string]any{"content": secret, "workspace": w.acmeWS}, nil, teamsBearer(w.alice)...); st != 200 {
		t.Fatalf("alice saves a memory: %d", st)
	}
	for _, key := range []string{"workspace", "workspaceId"} {
		resp := w.srv.Do("POST", "/api/agent/run", map[string]any{"question": "what is the launch code?", key: w.acmeWS}, teamsBearer(w.mal)...)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 404 || strings.Contains(string(body), "4242") {
			t.Errorf("mal's agent run over acme (%s): %d %s", key, resp.StatusCode, body)
		}
	}
	for _, r := range llm.ChatRequests() {
		if strings.Contains(string(r.RawBody), "4242") {
			t.Errorf("acme's memory reached mal's run: %s", r.RawBody)
		}
	}
}

// Finding 10: team auth read "workspace" (empty: no workspace, so the
// global rule let mal through) while the handler used "workspaceId".
func TestTeamsMemoryAliasSplit(t *testing.T) {
	w := teamsSetup(t, "")
	for name, tok := range map[string]string{"mal": w.mal, "vic": w.vic} {
		for _, body := range []map[string]any{
			{"content": "planted by " + name, "workspace": "", "workspaceId": w.acmeWS},
			{"content": "planted by " + name, "workspace": nil, "workspaceId": w.acmeWS},
			{"content": "planted by " + name, "workspace": w.evilWS, "workspaceId": w.acmeWS},
		} {
			var out map[string]any
			if st := w.srv.JSON("POST", "/api/memory/frames", body, &out, teamsBearer(tok)...); st != 400 {
				t.Errorf("%s %v: %d %v", name, body, st, out)
			}
		}
	}
	if got := teamsFrames(t, w); strings.Contains(got, "planted") {
		t.Errorf("acme's mind holds a planted frame:\n%s", got)
	}
}

// Finding 11: any user may make a team and so be "more than a viewer
// somewhere"; vic (a viewer in acme) did, then changed every team's
// model.
func TestTeamsViewerChangesAgentModel(t *testing.T) {
	w := teamsSetup(t, "")
	if st := w.srv.JSON("POST", "/api/teams", map[string]any{"id": "vics"}, nil, teamsBearer(w.vic)...); st != 201 {
		t.Fatalf("vic creates a team: %d", st)
	}
	var before, after map[string]any
	w.srv.JSON("GET", "/api/agent/model", nil, &before, teamsBearer(w.alice)...)
	for _, tok := range []string{w.vic, w.mal} {
		var out map[string]any
		if st := w.srv.JSON("PUT", "/api/agent/model", map[string]any{"model": "evil-model"}, &out, teamsBearer(tok)...); st != 403 {
			t.Errorf("PUT /api/agent/model: %d %v", st, out)
		}
		if st := w.srv.JSON("POST", "/api/agent/cost/reset", nil, &out, teamsBearer(tok)...); st != 403 {
			t.Errorf("POST /api/agent/cost/reset: %d %v", st, out)
		}
	}
	w.srv.JSON("GET", "/api/agent/model", nil, &after, teamsBearer(w.alice)...)
	if after["model"] == "evil-model" || fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("model changed: %v -> %v", before, after)
	}
	// The server-wide usage totals (every team's spending) are no team's
	// to read either.
	for _, route := range []string{"/api/agent/cost", "/api/agent/status"} {
		var out map[string]any
		if st := w.srv.JSON("GET", route, nil, &out, teamsBearer(w.mal)...); st != 403 || out["code"] != "OPERATOR_ONLY" {
			t.Errorf("mal reads %s: %d %v", route, st, out)
		}
	}
}

// Finding 11: agent groups were server-wide; mal listed, edited and
// deleted acme's.
func TestTeamsOtherTeamsGroups(t *testing.T) {
	w := teamsSetup(t, "")
	var g struct{ ID, TeamID string }
	if st := w.srv.JSON("POST", "/api/agent-groups", map[string]any{"name": "acme-reviewers", "strategy": "parallel", "teamId": "acme",
		"members": []any{map[string]any{"agentId": "reviewer"}}}, &g, teamsBearer(w.alice)...); st != 201 {
		t.Fatalf("alice creates acme's group: %d %+v", st, g)
	}
	if g.TeamID != "acme" {
		t.Errorf("acme's group has team %q", g.TeamID)
	}
	var list []protocol.AgentGroup
	if st := w.srv.JSON("GET", "/api/agent-groups", nil, &list, teamsBearer(w.mal)...); st != 200 || len(list) != 0 {
		t.Errorf("mal lists groups: %d %+v", st, list)
	}
	if st := w.srv.JSON("GET", "/api/agent-groups/"+g.ID, nil, nil, teamsBearer(w.mal)...); st != 404 {
		t.Errorf("mal reads acme's group: %d", st)
	}
	if st := w.srv.JSON("PATCH", "/api/agent-groups/"+g.ID, map[string]any{"name": "pwned"}, nil, teamsBearer(w.mal)...); st != 404 {
		t.Errorf("mal edits acme's group: %d", st)
	}
	if st := w.srv.JSON("DELETE", "/api/agent-groups/"+g.ID, nil, nil, teamsBearer(w.mal)...); st != 404 {
		t.Errorf("mal deletes acme's group: %d", st)
	}
	if st := w.srv.JSON("POST", "/api/agent-groups/"+g.ID+"/run", map[string]any{"task": "t", "workspaceId": w.evilWS}, nil, teamsBearer(w.mal)...); st != 404 {
		t.Errorf("mal runs acme's group: %d", st)
	}
	// A viewer of acme sees the group but cannot change it.
	if st := w.srv.JSON("PATCH", "/api/agent-groups/"+g.ID, map[string]any{"name": "viewer-was-here"}, nil, teamsBearer(w.vic)...); st != 403 {
		t.Errorf("vic edits acme's group: %d", st)
	}
	var got protocol.AgentGroup
	if st := w.srv.JSON("GET", "/api/agent-groups/"+g.ID, nil, &got, teamsBearer(w.alice)...); st != 200 || got.Name != "acme-reviewers" {
		t.Errorf("acme's group after the attacks: %d %+v", st, got)
	}
	list = nil
	if st := w.srv.JSON("GET", "/api/agent-groups", nil, &list, teamsBearer(w.bob)...); st != 200 || len(list) != 1 {
		t.Errorf("bob lists acme's groups: %d %+v", st, list)
	}
}

// Finding 12: group runs carried no user, so acme's governance (members
// may not use write_file) did not apply to bob's group run.
func TestTeamsGroupRunIgnoresGovernance(t *testing.T) {
	llm := llmtest.New(llmtest.WithDefault(llmtest.Reply("member's answer")))
	llm.Start()
	defer llm.Close()
	w := teamsSetup(t, llm.URL())
	waggletest.Operate(t, w.nc, protocol.SetPolicy, protocol.PolicySetRequest{TeamRef: protocol.TeamRef{Team: "acme"}, Role: "member", BlockedTools: []string{"write_file"}})
	var g protocol.AgentGroup
	if st := w.srv.JSON("POST", "/api/agent-groups", map[string]any{"name": "solo", "strategy": "sequential", "teamId": "acme",
		"members": []any{map[string]any{"agentId": "coder"}}}, &g, teamsBearer(w.alice)...); st != 201 {
		t.Fatalf("create group: %d", st)
	}
	var job protocol.GroupJob
	if st := w.srv.JSON("POST", "/api/agent-groups/"+g.ID+"/run", map[string]any{"task": "write a file", "workspaceId": w.acmeWS}, &job, teamsBearer(w.bob)...); st != 200 {
		t.Fatalf("bob runs the group: %d %+v", st, job)
	}
	waitfor.True(t, "the group run ends", func() bool {
		var j protocol.GroupJob
		w.srv.JSON("GET", "/api/agent-groups/"+g.ID+"/runs/"+job.JobID, nil, &j, teamsBearer(w.bob)...)
		return j.Status == protocol.JobCompleted || j.Status == protocol.JobFailed
	})
	reqs := llm.ChatRequests()
	if len(reqs) == 0 {
		t.Fatal("the member's turn never asked the model")
	}
	for _, r := range reqs {
		for _, tool := range r.Chat.Tools {
			if tool.Function.Name == "write_file" {
				t.Fatalf("bob's group run offered write_file, which acme blocks for members")
			}
		}
	}
}

// Finding 11: GET /api/agents/active listed every team's running group
// steps (group names, agents, sessions, turn ids).
func TestTeamsActiveAgentsOfOtherTeams(t *testing.T) {
	pause := llmtest.NewPause()
	llm := llmtest.New(llmtest.WithDefault(llmtest.Response{Steps: llmtest.Steps(llmtest.Wait(pause), llmtest.Content("done"))}))
	llm.Start()
	defer llm.Close()
	defer pause.Release()
	w := teamsSetup(t, llm.URL())
	var g struct{ ID string }
	if st := w.srv.JSON("POST", "/api/agent-groups", map[string]any{"name": "acme-secret-project", "strategy": "sequential", "teamId": "acme",
		"members": []any{map[string]any{"agentId": "coder"}}}, &g, teamsBearer(w.alice)...); st != 201 {
		t.Fatalf("create group: %d", st)
	}
	if st := w.srv.JSON("POST", "/api/agent-groups/"+g.ID+"/run", map[string]any{"task": "t", "workspaceId": w.acmeWS}, nil, teamsBearer(w.bob)...); st != 200 {
		t.Fatalf("bob runs the group: %d", st)
	}
	<-pause.Reached()
	type active struct {
		Workers []struct{ GroupName string } `json:"workers"`
	}
	var bobs, mals active
	waitfor.True(t, "bob sees his run's worker", func() bool {
		w.srv.JSON("GET", "/api/agents/active", nil, &bobs, teamsBearer(w.bob)...)
		return len(bobs.Workers) == 1
	})
	if st := w.srv.JSON("GET", "/api/agents/active", nil, &mals, teamsBearer(w.mal)...); st != 200 || len(mals.Workers) != 0 {
		t.Errorf("mal sees acme's run: %d %+v", st, mals)
	}
}

// Finding 7 (part): the body was read before the token was checked, so a
// bogus token could hold a request open with a body that never ends.
func TestTeamsBogusTokenBodyNeverCompletes(t *testing.T) {
	w := teamsSetup(t, "")
	conn, err := net.Dial("tcp", strings.TrimPrefix(w.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Headers and the start of a 1 MB body; the rest never comes.
	fmt.Fprintf(conn, "POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer bogus\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{\"message\":\"")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	_ = conn.SetReadDeadline(deadline)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer while the body is incomplete: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("bogus token: %d", resp.StatusCode)
	}
}
