package commands

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

func createGroup(t *testing.T, srv *waggletest.Server, body any) protocol.AgentGroup {
	t.Helper()
	var g protocol.AgentGroup
	if st := srv.JSON(http.MethodPost, "/api/agent-groups", body, &g); st != 201 {
		t.Fatalf("create %v: status %d", body, st)
	}
	return g
}

func TestGroupValidation(t *testing.T) {
	srv := waggletest.Start(t)
	g := createGroup(t, srv, map[string]any{"name": "g", "strategy": "parallel"})
	tests := []struct {
		name, method, path string
		body               any
		wantStatus         int
		wantBody           string
	}{
		{"create no name", "POST", "/api/agent-groups", map[string]any{"strategy": "parallel"}, 400, `{"error":"name is required"}`},
		{"create empty body", "POST", "/api/agent-groups", "", 400, `{"error":"name is required"}`},
		{"create name number", "POST", "/api/agent-groups", map[string]any{"name": 1, "strategy": "parallel"}, 400, `{"error":"name must be a string"}`},
		{"create no strategy", "POST", "/api/agent-groups", map[string]any{"name": "x"}, 400, `{"error":"strategy is required (parallel, sequential or coordinator)"}`},
		{"create bad strategy", "POST", "/api/agent-groups", map[string]any{"name": "x", "strategy": "swarm"}, 400, `{"error":"strategy must be one of: parallel, sequential, coordinator"}`},
		{"create members object", "POST", "/api/agent-groups", map[string]any{"name": "x", "strategy": "parallel", "members": map[string]any{}}, 400, `{"error":"members must be an array"}`},
		{"create member no agentId", "POST", "/api/agent-groups", map[string]any{"name": "x", "strategy": "parallel", "members": []any{map[string]any{"roleInGroup": "lead"}}}, 400, `{"error":"members[0].agentId must be a non-empty string"}`},
		{"create member bad order", "POST", "/api/agent-groups", map[string]any{"name": "x", "strategy": "parallel", "members": []any{map[string]any{"agentId": "a", "executionOrder": "first"}}}, 400, `{"error":"members[0].executionOrder must be an integer"}`},
		{"create member bad role", "POST", "/api/agent-groups", map[string]any{"name": "x", "strategy": "parallel", "members": []any{map[string]any{"agentId": "a", "roleInGroup": true}}}, 400, `{"error":"members[0].roleInGroup must be a string"}`},
		{"patch unknown", "PATCH", "/api/agent-groups/nope", map[string]any{"name": "y"}, 404, `{"error":"Group not found"}`},
		{"patch unsafe id", "PATCH", "/api/agent-groups/a.b", map[string]any{"name": "y"}, 404, `{"error":"Group not found"}`},
		{"patch bad strategy", "PATCH", "/api/agent-groups/" + g.ID, map[string]any{"strategy": "x"}, 400, `{"error":"strategy must be one of: parallel, sequential, coordinator"}`},
		{"patch empty name", "PATCH", "/api/agent-groups/" + g.ID, map[string]any{"name": ""}, 400, `{"error":"name is required"}`},
		{"delete unknown", "DELETE", "/api/agent-groups/nope", nil, 404, `{"error":"Group not found"}`},
		{"get unknown", "GET", "/api/agent-groups/nope", nil, 404, `{"error":"Group not found"}`},
		{"run unknown before task", "POST", "/api/agent-groups/nope/run", map[string]any{}, 404, `{"error":"Group not found"}`},
		{"run no task", "POST", "/api/agent-groups/" + g.ID + "/run", map[string]any{}, 400, `{"error":"task is required"}`},
		{"run empty task", "POST", "/api/agent-groups/" + g.ID + "/run", map[string]any{"task": ""}, 400, `{"error":"task is required"}`},
		{"run task number", "POST", "/api/agent-groups/" + g.ID + "/run", map[string]any{"task": 3}, 400, `{"error":"task is required"}`},
		{"run unsafe workspace", "POST", "/api/agent-groups/" + g.ID + "/run", map[string]any{"task": "t", "workspaceId": "a/b"}, 400,
			`{"statusCode":400,"error":"Bad Request","message":"Invalid workspaceId: contains illegal characters"}`},
		{"job unknown", "GET", "/api/agent-groups/" + g.ID + "/runs/" + protocol.NewUUID(), nil, 404, `{"error":"Job not found"}`},
		{"job unsafe id", "GET", "/api/agent-groups/" + g.ID + "/runs/x.y", nil, 404, `{"error":"Job not found"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, got := rawJSON(t, srv, tt.method, tt.path, tt.body)
			if st != tt.wantStatus || got != tt.wantBody {
				t.Fatalf("got %d %s, want %d %s", st, got, tt.wantStatus, tt.wantBody)
			}
		})
	}
}

func TestGroupCRUD(t *testing.T) {
	srv := waggletest.Start(t)
	if st, got := rawJSON(t, srv, http.MethodGet, "/api/agent-groups", nil); st != 200 || got != "[]" {
		t.Fatalf("empty list %d %s", st, got)
	}
	g := createGroup(t, srv, map[string]any{
		"name": "Research crew", "description": "finds things", "strategy": "sequential",
		"members": []any{
			map[string]any{"agentId": "researcher", "roleInGroup": "lead", "executionOrder": 2},
			map[string]any{"agentId": "writer"},
		},
	})
	if !protocol.ValidID(g.ID) || g.Name != "Research crew" || *g.Description != "finds things" || g.Strategy != "sequential" {
		t.Fatalf("created %+v", g)
	}
	if _, err := time.Parse(time.RFC3339, g.CreatedAt); err != nil {
		t.Fatalf("createdAt %q", g.CreatedAt)
	}
	wantMembers := []protocol.AgentGroupMember{{AgentID: "researcher", RoleInGroup: "lead", ExecutionOrder: 2}, {AgentID: "writer", RoleInGroup: "worker", ExecutionOrder: 1}}
	if fmt.Sprint(g.Members) != fmt.Sprint(wantMembers) {
		t.Fatalf("members %+v", g.Members)
	}
	// No description: the key is left out, as in the original.
	g2 := createGroup(t, srv, map[string]any{"name": "Pair", "strategy": "parallel"})
	if st, got := rawJSON(t, srv, http.MethodGet, "/api/agent-groups/"+g2.ID, nil); st != 200 || strings.Contains(got, "description") || !strings.Contains(got, `"members":[]`) {
		t.Fatalf("get g2 %d %s", st, got)
	}

	var up protocol.AgentGroup
	if st := srv.JSON(http.MethodPatch, "/api/agent-groups/"+g.ID, map[string]any{"name": "Renamed", "description": nil, "id": "hijack"}, &up); st != 200 {
		t.Fatalf("patch status %d", st)
	}
	if up.ID != g.ID || up.Name != "Renamed" || up.Description != nil || up.Strategy != "sequential" || len(up.Members) != 2 || up.CreatedAt != g.CreatedAt {
		t.Fatalf("patched %+v", up)
	}

	// The file is the original's format: a JSON array, two-space indent.
	data, err := os.ReadFile(filepath.Join(srv.DataDir, "agent-groups.json"))
	if err != nil {
		t.Fatal(err)
	}
	var onDisk []protocol.AgentGroup
	if err := json.Unmarshal(data, &onDisk); err != nil || len(onDisk) != 2 || !strings.HasPrefix(string(data), "[\n  {\n    \"id\": ") {
		t.Fatalf("file %s (%v)", data, err)
	}

	srv.Restart()
	var list []protocol.AgentGroup
	srv.JSON(http.MethodGet, "/api/agent-groups", nil, &list)
	if len(list) != 2 || list[0].Name != "Renamed" || list[1].ID != g2.ID {
		t.Fatalf("list after restart %+v", list)
	}
	if st, got := rawJSON(t, srv, http.MethodDelete, "/api/agent-groups/"+g.ID, nil); st != 200 || got != `{"deleted":true}` {
		t.Fatalf("delete %d %s", st, got)
	}
	if st, _ := rawJSON(t, srv, http.MethodDelete, "/api/agent-groups/"+g.ID, nil); st != 404 {
		t.Fatalf("second delete %d", st)
	}
	srv.JSON(http.MethodGet, "/api/agent-groups", nil, &list)
	if len(list) != 1 || list[0].ID != g2.ID {
		t.Fatalf("list after delete %+v", list)
	}
}

// runGroup queues a run, checks the queued reply and polls the job until
// it ends.
func runGroup(t *testing.T, srv *waggletest.Server, g protocol.AgentGroup, task string) protocol.GroupJob {
	t.Helper()
	st, got := rawJSON(t, srv, http.MethodPost, "/api/agent-groups/"+g.ID+"/run", map[string]any{"task": task, "teamId": "default"})
	if st != 200 {
		t.Fatalf("run: %d %s", st, got)
	}
	var q map[string]any
	if err := json.Unmarshal([]byte(got), &q); err != nil {
		t.Fatal(err)
	}
	jobID, _ := q["jobId"].(string)
	want := map[string]any{"jobId": jobID, "groupId": g.ID, "groupName": g.Name, "strategy": g.Strategy,
		"memberCount": float64(len(g.Members)), "task": task, "status": "queued"}
	if !protocol.ValidID(jobID) || fmt.Sprint(q) != fmt.Sprint(want) {
		t.Fatalf("queued reply %s", got)
	}
	var job protocol.GroupJob
	waitfor.Within(30*time.Second).NoError(t, "job "+jobID+" finished", func() error {
		job = protocol.GroupJob{}
		if st := srv.JSON(http.MethodGet, "/api/agent-groups/"+g.ID+"/runs/"+jobID, nil, &job); st != 200 {
			t.Fatalf("job status %d", st)
		}
		if job.Status == protocol.JobCompleted || job.Status == protocol.JobFailed {
			return nil
		}
		return fmt.Errorf("job did not finish: %+v", job)
	})
	return job
}

func ts(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("timestamp %q: %v", s, err)
	}
	return v
}

// checkSteps asserts every step completed, in the given agent/phase order,
// with its turn persisted as a session.
func checkSteps(t *testing.T, srv *waggletest.Server, job protocol.GroupJob, want []string) {
	t.Helper()
	if job.Status != protocol.JobCompleted || job.Error != "" {
		t.Fatalf("job %+v", job)
	}
	var got []string
	for _, st := range job.Steps {
		name := st.AgentID
		if st.Phase != "" {
			name += ":" + st.Phase
		}
		got = append(got, name)
		if st.Status != protocol.JobCompleted || st.Output == "" || st.TurnID == "" {
			t.Errorf("step %+v", st)
		}
		if !strings.Contains(st.Output, fmt.Sprintf("agent %q", st.AgentID)) {
			t.Errorf("step %s output does not come from its own turn: %q", st.AgentID, st.Output)
		}
		var h struct {
			Messages []struct{ Role, Content string }
		}
		srv.JSON(http.MethodGet, "/api/history?workspace="+job.Workspace+"&session="+st.Session, nil, &h)
		if len(h.Messages) != 2 || h.Messages[1].Content != st.Output {
			t.Errorf("session %s history %+v", st.Session, h.Messages)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("steps %v, want %v", got, want)
	}
}

func echoDelay(d time.Duration) waggletest.Option {
	return waggletest.WithConfig(func(c *app.Config) { c.TurnRunner.EchoDelay = d })
}

func TestGroupRunSequential(t *testing.T) {
	srv := waggletest.Start(t)
	g := createGroup(t, srv, map[string]any{"name": "Chain", "strategy": "sequential", "members": []any{
		map[string]any{"agentId": "third", "executionOrder": 3},
		map[string]any{"agentId": "first", "executionOrder": 1},
		map[string]any{"agentId": "second", "executionOrder": 2},
	}})
	job := runGroup(t, srv, g, "write a haiku")
	checkSteps(t, srv, job, []string{"first", "second", "third"})
	for i := 1; i < len(job.Steps); i++ {
		prev, cur := job.Steps[i-1], job.Steps[i]
		if ts(t, cur.StartedAt).Before(ts(t, prev.FinishedAt)) {
			t.Errorf("%s started before %s finished", cur.AgentID, prev.AgentID)
		}
		// Each member is handed the previous member's output.
		if !strings.Contains(cur.Output, fmt.Sprintf("Output of the previous member, agent %q", prev.AgentID)) {
			t.Errorf("%s was not handed %s's output: %q", cur.AgentID, prev.AgentID, cur.Output)
		}
	}
	if job.Result != job.Steps[2].Output || !strings.Contains(job.Result, "write a haiku") {
		t.Errorf("result %q", job.Result)
	}
}

func TestGroupRunParallel(t *testing.T) {
	// Echo tokens 3ms apart make each turn last long enough to see overlap.
	srv := waggletest.Start(t, echoDelay(3*time.Millisecond))
	g := createGroup(t, srv, map[string]any{"name": "Fan", "strategy": "parallel", "members": []any{
		map[string]any{"agentId": "a"}, map[string]any{"agentId": "b"}, map[string]any{"agentId": "c"},
	}})
	job := runGroup(t, srv, g, "list ideas")
	checkSteps(t, srv, job, []string{"a", "b", "c"})
	var lastStart, firstEnd time.Time
	for i, st := range job.Steps {
		s, e := ts(t, st.StartedAt), ts(t, st.FinishedAt)
		if i == 0 || s.After(lastStart) {
			lastStart = s
		}
		if i == 0 || e.Before(firstEnd) {
			firstEnd = e
		}
	}
	if !lastStart.Before(firstEnd) {
		t.Errorf("members did not run at once: last start %v, first end %v", lastStart, firstEnd)
	}
	for _, id := range []string{"a", "b", "c"} {
		if !strings.Contains(job.Result, "### "+id+"\n") {
			t.Errorf("result lacks %s: %q", id, job.Result)
		}
	}
}

func TestGroupRunCoordinator(t *testing.T) {
	srv := waggletest.Start(t)
	g := createGroup(t, srv, map[string]any{"name": "Team", "strategy": "coordinator", "members": []any{
		map[string]any{"agentId": "w1", "executionOrder": 1},
		map[string]any{"agentId": "boss", "roleInGroup": "lead", "executionOrder": 5},
		map[string]any{"agentId": "w2", "executionOrder": 2},
	}})
	job := runGroup(t, srv, g, "ship it")
	checkSteps(t, srv, job, []string{"boss:plan", "w1:work", "w2:work", "boss:combine"})
	plan, combine := job.Steps[0], job.Steps[3]
	for _, w := range job.Steps[1:3] {
		if ts(t, w.StartedAt).Before(ts(t, plan.FinishedAt)) || ts(t, combine.StartedAt).Before(ts(t, w.FinishedAt)) {
			t.Errorf("worker %s ran outside plan..combine", w.AgentID)
		}
		if !strings.Contains(w.Output, `Your lead "boss" planned the work`) {
			t.Errorf("worker %s did not get the plan: %q", w.AgentID, w.Output)
		}
		if !strings.Contains(combine.Output, "### "+w.AgentID+"\n") {
			t.Errorf("combine lacks %s's result", w.AgentID)
		}
	}
	if job.Result != combine.Output {
		t.Errorf("result is not the lead's combination")
	}
}

func TestGroupRunWithoutMembersFails(t *testing.T) {
	srv := waggletest.Start(t)
	g := createGroup(t, srv, map[string]any{"name": "Empty", "strategy": "parallel"})
	job := runGroup(t, srv, g, "anything")
	if job.Status != protocol.JobFailed || job.Error != "the group has no members" || job.FinishedAt == "" {
		t.Fatalf("job %+v", job)
	}
}

// TestActiveAgentsDuringRun sees a slow run's members while it runs, and
// the job survives a restart.
func TestActiveAgentsDuringRun(t *testing.T) {
	srv := waggletest.Start(t, echoDelay(20*time.Millisecond))
	g := createGroup(t, srv, map[string]any{"name": "Slow", "strategy": "sequential", "members": []any{
		map[string]any{"agentId": "one"}, map[string]any{"agentId": "two"},
	}})
	var q struct{ JobID string }
	if st := srv.JSON(http.MethodPost, "/api/agent-groups/"+g.ID+"/run", map[string]any{"task": "slowly"}, &q); st != 200 {
		t.Fatalf("run %d", st)
	}
	waitfor.NoError(t, "the run active", func() error {
		var a protocol.ActiveAgents
		srv.JSON(http.MethodGet, "/api/agents/active", nil, &a)
		if len(a.Active) == 1 && len(a.Workers) == 2 {
			if a.Active[0].JobID != q.JobID || a.Active[0].GroupName != "Slow" || a.Active[0].Status != "running" {
				t.Fatalf("active %+v", a.Active)
			}
			return nil
		}
		return fmt.Errorf("never saw the run active: %+v", a)
	})
	// Stopping mid-run marks the job failed instead of leaving it running
	// forever, and the record is still there after the restart.
	srv.Restart()
	var job protocol.GroupJob
	if st := srv.JSON(http.MethodGet, "/api/agent-groups/"+g.ID+"/runs/"+q.JobID, nil, &job); st != 200 {
		t.Fatalf("job after restart %d", st)
	}
	if job.Status != protocol.JobFailed || job.Error == "" || job.FinishedAt == "" {
		t.Fatalf("job after a stop mid-run: %+v", job)
	}
	if st, got := rawJSON(t, srv, http.MethodGet, "/api/agents/active", nil); st != 200 || got != `{"workers":[],"active":[],"subAgents":[]}` {
		t.Fatalf("active after restart %s", got)
	}
}
