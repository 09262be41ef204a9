package desktop

import (
	"fmt"
	"net/http"
	"testing"

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
