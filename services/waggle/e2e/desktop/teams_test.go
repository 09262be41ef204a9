package desktop

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

// TestTeamServerScopesVaultAndFiles: on a team server acme's vault is its
// admins' alone and its files its members'; mal (owner of evil) and vic
// (acme viewer) get nothing they should not.
func TestTeamServerScopesVaultAndFiles(t *testing.T) {
	srv := waggletest.Start(t, waggletest.WithConfig(func(c *app.Config) {
		c.SessionStore.PostgresURL = pgtest.URL(t)
		c.Gateway.Auth = "required"
		c.NATSListen = waggletest.FreeAddr(t)
	}))
	nc := srv.DialNATS()
	defer nc.Close()
	token := func(user string) string {
		return waggletest.Operate(t, nc, protocol.CreateToken, protocol.TokenCreateRequest{User: user}).Token
	}
	waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "acme", Owner: "alice"})
	waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "evil", Owner: "mal"})
	alice, vic, mal := token("alice"), token("vic"), token("mal")
	waggletest.Operate(t, nc, protocol.PutMember, protocol.MemberPutRequest{TeamRef: protocol.TeamRef{Team: "acme"}, User: "vic", Role: "viewer"})
	var ws map[string]any
	if code := srv.JSON("POST", "/api/workspaces", map[string]any{"name": "Acme Ops", "teamId": "acme"}, &ws, bearer(alice)...); code/100 != 2 {
		t.Fatalf("workspace: %d", code)
	}
	acmeWS := fmt.Sprint(ws["id"])

	const secret = "acme-secret-key-42"
	if code := srv.JSON("POST", "/api/vault?team=acme", map[string]any{"name": "openai", "value": secret}, nil, bearer(alice)...); code != http.StatusOK {
		t.Fatalf("alice saves acme's key: %d", code)
	}
	if code := srv.JSON("POST", "/api/vault/openai/reveal?team=acme", nil, nil, bearer(alice)...); code != http.StatusOK {
		t.Fatalf("alice reveals acme's key: %d", code)
	}
	for _, c := range []struct {
		who, method, path string
	}{
		{mal, "GET", "/api/vault?team=acme"},
		{mal, "POST", "/api/vault/openai/reveal?team=acme"},
		{mal, "DELETE", "/api/vault/openai?team=acme"},
		{vic, "GET", "/api/vault?team=acme"},
		{vic, "POST", "/api/vault/openai/reveal?team=acme"},
		{alice, "GET", "/api/vault"},
	} {
		resp := srv.Do(c.method, c.path, nil, bearer(c.who)...)
		if b := body(t, resp); resp.StatusCode < 400 || strings.Contains(b, secret) {
			t.Errorf("%s %s: %d %s", c.method, c.path, resp.StatusCode, b)
		}
	}
	// mal's own vault is another vault.
	var evil struct{ Secrets []struct{ Name string } }
	if code := srv.JSON("GET", "/api/vault?team=evil", nil, &evil, bearer(mal)...); code != http.StatusOK || len(evil.Secrets) != 0 {
		t.Fatalf("evil's vault: %d %+v", code, evil)
	}

	upload := map[string]any{"path": "/", "name": "plan.txt", "data": base64.StdEncoding.EncodeToString([]byte("acme plan"))}
	files := "/api/workspaces/" + acmeWS + "/files/"
	if resp := srv.Do("POST", files+"upload", upload, bearer(alice)...); resp.StatusCode != http.StatusCreated {
		t.Fatalf("alice uploads: %d %s", resp.StatusCode, body(t, resp))
	}
	if code := srv.JSON("POST", files+"upload", upload, nil, bearer(vic)...); code != http.StatusForbidden {
		t.Errorf("a viewer uploads: %d, want 403", code)
	}
	if b := body(t, srv.Do("GET", files+"download?path=/plan.txt", nil, bearer(vic)...)); b != "acme plan" {
		t.Errorf("a viewer downloads: %q", b)
	}
	for _, route := range []string{"list?path=/", "download?path=/plan.txt"} {
		resp := srv.Do("GET", files+route, nil, bearer(mal)...)
		if b := body(t, resp); resp.StatusCode < 400 || strings.Contains(b, "plan") {
			t.Errorf("mal %s: %d %s", route, resp.StatusCode, b)
		}
	}
}

// TestTeamServerScopesJobCancel: a group run in acme's workspace is
// cancelled by acme's members only: mal (another team) is told it does
// not exist, vic (acme viewer) may read it but not stop it.
func TestTeamServerScopesJobCancel(t *testing.T) {
	hold := llmtest.NewPause()
	t.Cleanup(hold.Release)
	llm := newLLM(t, llmtest.WithDefault(llmtest.Response{Steps: []llmtest.Step{llmtest.Content("thinking"), llmtest.Wait(hold)}}))
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()), waggletest.WithConfig(func(c *app.Config) {
		c.SessionStore.PostgresURL = pgtest.URL(t)
		c.Gateway.Auth = "required"
		c.NATSListen = waggletest.FreeAddr(t)
	}))
	nc := srv.DialNATS()
	defer nc.Close()
	token := func(user string) string {
		return waggletest.Operate(t, nc, protocol.CreateToken, protocol.TokenCreateRequest{User: user}).Token
	}
	waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "acme", Owner: "alice"})
	waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "evil", Owner: "mal"})
	alice, vic, mal := token("alice"), token("vic"), token("mal")
	waggletest.Operate(t, nc, protocol.PutMember, protocol.MemberPutRequest{TeamRef: protocol.TeamRef{Team: "acme"}, User: "vic", Role: "viewer"})
	var ws map[string]any
	if code := srv.JSON("POST", "/api/workspaces", map[string]any{"name": "Acme Ops", "teamId": "acme"}, &ws, bearer(alice)...); code/100 != 2 {
		t.Fatalf("workspace: %d", code)
	}
	var group struct{ ID string }
	if code := srv.JSON("POST", "/api/agent-groups", map[string]any{"name": "Acme pair", "strategy": "sequential", "teamId": "acme",
		"members": []any{map[string]any{"agentId": "researcher", "roleInGroup": "lead", "executionOrder": 0}}}, &group, bearer(alice)...); code/100 != 2 {
		t.Fatalf("create group: %d", code)
	}
	var started struct{ JobID string }
	if code := srv.JSON("POST", "/api/agent-groups/"+group.ID+"/run", map[string]any{"task": "research", "workspaceId": ws["id"]}, &started, bearer(alice)...); code/100 != 2 {
		t.Fatalf("run: %d", code)
	}
	select {
	case <-hold.Reached():
	case <-time.After(60 * time.Second):
		t.Fatal("the member's model call never came")
	}
	cancel := "/api/jobs/" + started.JobID + "/cancel"
	if code := srv.JSON("POST", cancel, nil, nil, bearer(mal)...); code != http.StatusNotFound {
		t.Errorf("mal cancels acme's job: %d, want 404", code)
	}
	if code := srv.JSON("GET", "/api/jobs/"+started.JobID, nil, nil, bearer(vic)...); code != http.StatusOK {
		t.Errorf("vic reads acme's job: %d", code)
	}
	if code := srv.JSON("POST", cancel, nil, nil, bearer(vic)...); code != http.StatusForbidden {
		t.Errorf("a viewer cancels: %d, want 403", code)
	}
	var job struct{ Status string }
	if code := srv.JSON("GET", "/api/jobs/"+started.JobID, nil, &job, bearer(alice)...); code != http.StatusOK || job.Status != "running" {
		t.Fatalf("job after refused cancels: %d %+v", code, job)
	}
	if code := srv.JSON("POST", cancel, nil, nil, bearer(alice)...); code != http.StatusOK {
		t.Fatalf("alice cancels: %d", code)
	}
	if code := srv.JSON("GET", "/api/jobs/"+started.JobID, nil, &job, bearer(alice)...); code != http.StatusOK || job.Status != "cancelled" {
		t.Fatalf("job after alice's cancel: %d %+v", code, job)
	}
}
