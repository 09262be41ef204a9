package desktop

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestGroupRunJobIsPolled: the app starts a group run and polls its job
// at /api/jobs/{id} until it completes, with the members' output.
func TestGroupRunJobIsPolled(t *testing.T) {
	llm := newLLM(t, llmtest.WithDefault(llmtest.Reply("member says hi")))
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()))
	var group struct{ ID string }
	if code := srv.JSON("POST", "/api/agent-groups", map[string]any{"name": "Pair", "strategy": "sequential",
		"members": []any{map[string]any{"agentId": "researcher", "roleInGroup": "lead", "executionOrder": 0}}}, &group); code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("create group: %d", code)
	}
	var started struct{ JobID string }
	if code := srv.JSON("POST", "/api/agent-groups/"+group.ID+"/run", map[string]any{"task": "say hi", "workspaceId": "desk"}, &started); code/100 != 2 || started.JobID == "" {
		t.Fatalf("run: %d %+v", code, started)
	}
	var job struct {
		Status, Output, CompletedAt, GroupID string
	}
	waitfor.NoError(t, "the job completes", func() error {
		if code := srv.JSON("GET", "/api/jobs/"+started.JobID, nil, &job); code != http.StatusOK {
			return fmt.Errorf("poll: %d", code)
		}
		if job.Status != "completed" {
			return fmt.Errorf("status %s", job.Status)
		}
		return nil
	})
	if job.Output != "member says hi" || job.CompletedAt == "" || job.GroupID != group.ID {
		t.Fatalf("job %+v", job)
	}
	if code := srv.JSON("GET", "/api/jobs/no-such-job", nil, nil); code != http.StatusNotFound {
		t.Fatalf("unknown job: %d", code)
	}
}

// TestGroupRunJobIsCancelled: the app cancels a running group run at
// /api/jobs/{id}/cancel. The member's model stream is cut (the scripted
// model sees the request cancelled), the job reads cancelled with the next
// member skipped, and a second cancel is the original's 409.
func TestGroupRunJobIsCancelled(t *testing.T) {
	hold := llmtest.NewPause()
	t.Cleanup(hold.Release)
	llm := newLLM(t, llmtest.WithDefault(llmtest.Response{Steps: []llmtest.Step{llmtest.Content("thinking"), llmtest.Wait(hold)}}))
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()))
	var group struct{ ID string }
	if code := srv.JSON("POST", "/api/agent-groups", map[string]any{"name": "Slow pair", "strategy": "sequential",
		"members": []any{
			map[string]any{"agentId": "researcher", "roleInGroup": "lead", "executionOrder": 0},
			map[string]any{"agentId": "writer", "roleInGroup": "worker", "executionOrder": 1},
		}}, &group); code/100 != 2 {
		t.Fatalf("create group: %d", code)
	}
	var started struct{ JobID string }
	if code := srv.JSON("POST", "/api/agent-groups/"+group.ID+"/run", map[string]any{"task": "research", "workspaceId": "desk"}, &started); code/100 != 2 || started.JobID == "" {
		t.Fatalf("run: %d %+v", code, started)
	}
	select {
	case <-hold.Reached():
	case <-time.After(60 * time.Second):
		t.Fatal("the first member's model call never came")
	}

	var cancelled struct {
		Cancelled bool
		JobID     string
	}
	if code := srv.JSON("POST", "/api/jobs/"+started.JobID+"/cancel", nil, &cancelled); code != http.StatusOK || !cancelled.Cancelled || cancelled.JobID != started.JobID {
		t.Fatalf("cancel: %d %+v", code, cancelled)
	}
	waitfor.True(t, "the member's model stream is cut", func() bool { return llm.Cancellations() > 0 })
	var job struct {
		Status, Error string
		Steps         []struct{ AgentID, Status string }
	}
	if code := srv.JSON("GET", "/api/jobs/"+started.JobID, nil, &job); code != http.StatusOK {
		t.Fatalf("poll: %d", code)
	}
	if job.Status != "cancelled" || job.Error != "Cancelled by user" || len(job.Steps) != 2 ||
		job.Steps[0].Status != "cancelled" || job.Steps[1].Status != "skipped" {
		t.Fatalf("job after cancel %+v", job)
	}
	if n := len(llm.ChatRequests()); n != 1 {
		t.Fatalf("the model got %d chat requests, want 1 (the second member never runs)", n)
	}
	resp := srv.Do("POST", "/api/jobs/"+started.JobID+"/cancel", nil)
	if b := body(t, resp); resp.StatusCode != http.StatusConflict || !strings.Contains(b, `Cannot cancel job with status \"cancelled\"`) {
		t.Fatalf("second cancel: %d %s", resp.StatusCode, b)
	}
	if code := srv.JSON("POST", "/api/jobs/no-such-job/cancel", nil, nil); code != http.StatusNotFound {
		t.Fatalf("cancel of an unknown job: %d", code)
	}
}
