package desktop

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/vault"
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
	// The same as a form (the original app's upload): a member writes, a
	// viewer is refused before anything is written.
	ctype, form1 := form(t, formPart{field: "file", filename: "form.txt", data: []byte("by form")}, formPart{field: "path", data: []byte("/")})
	if code, out := postForm(t, srv.URL+files+"upload", ctype, bytes.NewReader(form1), bearer(vic)...); code != http.StatusForbidden {
		t.Errorf("a viewer uploads a form: %d %s, want 403", code, out)
	}
	if b := body(t, srv.Do("GET", files+"download?path=/form.txt", nil, bearer(alice)...)); b == "by form" {
		t.Error("a viewer's form was written")
	}
	if code, out := postForm(t, srv.URL+files+"upload", ctype, bytes.NewReader(form1), bearer(alice)...); code != http.StatusCreated {
		t.Errorf("alice uploads a form: %d %s", code, out)
	}
	if b := body(t, srv.Do("GET", files+"download?path=/form.txt", nil, bearer(vic)...)); b != "by form" {
		t.Errorf("a viewer downloads alice's form upload: %q", b)
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

// TestTeamVaultKeysReachOnlyTheirTeamsTurns: on a team server whose model
// server wants a key (its /models answers 401 to the probe), each team's
// admin saves the team's key; a turn in acme's workspace sends acme's key
// to the model, one in bolt's sends bolt's, one in a team with no key
// sends neither (echo mode). An acme member who is not an admin can
// neither list nor reveal acme's key, and no file holds a key in clear.
func TestTeamVaultKeysReachOnlyTheirTeamsTurns(t *testing.T) {
	llm := newLLM(t, llmtest.WithDefault(llmtest.Reply("team reply")))
	llm.SetModelsStatus(http.StatusUnauthorized)
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
	for team, owner := range map[string]string{"acme": "alice", "bolt": "bob", "crew": "carl"} {
		waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: team, Owner: owner})
	}
	waggletest.Operate(t, nc, protocol.PutMember, protocol.MemberPutRequest{TeamRef: protocol.TeamRef{Team: "acme"}, User: "mia", Role: "member"})
	alice, bob, carl, mia := token("alice"), token("bob"), token("carl"), token("mia")
	workspace := func(team, tok string) string {
		var ws map[string]any
		if code := srv.JSON("POST", "/api/workspaces", map[string]any{"name": team + " work", "teamId": team}, &ws, bearer(tok)...); code/100 != 2 {
			t.Fatalf("%s workspace: %d", team, code)
		}
		return fmt.Sprint(ws["id"])
	}
	acmeWS, boltWS, crewWS := workspace("acme", alice), workspace("bolt", bob), workspace("crew", carl)

	const acmeKey, boltKey = "sk-acme-team-key-0001", "sk-bolt-team-key-0002"
	if code := srv.JSON("POST", "/api/vault?team=acme", map[string]any{"name": "openai", "value": acmeKey}, nil, bearer(alice)...); code != http.StatusOK {
		t.Fatalf("alice saves acme's key: %d", code)
	}
	if code := srv.JSON("POST", "/api/vault?team=bolt", map[string]any{"name": "openai", "value": boltKey}, nil, bearer(bob)...); code != http.StatusOK {
		t.Fatalf("bob saves bolt's key: %d", code)
	}

	// chat runs one turn and returns the Authorization headers of the
	// model calls it made.
	chat := func(ws, tok string) []string {
		before := len(llm.ChatRequests())
		st := srv.Chat(map[string]any{"message": "hello", "workspace": ws, "session": "s1"}, bearer(tok)...)
		defer st.Close()
		if names := waggletest.Names(st.All(t)); len(names) == 0 || names[len(names)-1] != "done" {
			t.Fatalf("turn in %s ended with %v", ws, names)
		}
		var auth []string
		for _, r := range llm.ChatRequests()[before:] {
			auth = append(auth, r.Header.Get("Authorization"))
		}
		return auth
	}
	if got := chat(acmeWS, alice); len(got) == 0 || got[0] != "Bearer "+acmeKey {
		t.Errorf("acme's turn sent %q, want acme's key", got)
	}
	if got := chat(boltWS, bob); len(got) == 0 || got[0] != "Bearer "+boltKey {
		t.Errorf("bolt's turn sent %q, want bolt's key", got)
	}
	if got := chat(crewWS, carl); len(got) != 0 {
		t.Errorf("crew (no key) made model calls with %q; want echo mode", got)
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/vault?team=acme"},
		{"POST", "/api/vault/openai/reveal?team=acme"},
		{"POST", "/api/vault?team=acme"},
	} {
		resp := srv.Do(c.method, c.path, map[string]any{"name": "openai", "value": "mia-was-here"}, bearer(mia)...)
		if b := body(t, resp); resp.StatusCode != http.StatusForbidden || strings.Contains(b, acmeKey) {
			t.Errorf("mia (acme member) %s %s: %d %s", c.method, c.path, resp.StatusCode, b)
		}
	}
	for _, secret := range []string{acmeKey, boltKey} {
		if files := filesHolding(t, srv.DataDir, secret); len(files) > 0 {
			t.Errorf("a team key is in clear in %v", files)
		}
	}
}

// TestOldTeamVaultFileMovesIntoPostgres: a team server of the previous
// version kept the teams' vaults in <data-dir>/vault.json. Started on that
// data dir, this version moves them into PostgreSQL: the team's admin
// lists the key, the team's turn sends it to the model, the file no
// longer holds it (the local vault's entry stays there), and a restart
// changes nothing.
func TestOldTeamVaultFileMovesIntoPostgres(t *testing.T) {
	dir := t.TempDir()
	old, err := vault.New(vault.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	const acmeKey, localKey = "sk-acme-from-the-old-file-01", "sk-local-from-the-old-file-02"
	for _, s := range []protocol.VaultSetRequest{{Team: "acme", Name: "openai", Value: acmeKey}, {Name: "tavily", Value: localKey}} {
		if _, err := old.Set(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}

	llm := newLLM(t, llmtest.WithDefault(llmtest.Reply("team reply")))
	llm.SetModelsStatus(http.StatusUnauthorized)
	srv := waggletest.Start(t, waggletest.WithLLM(llm.URL()), waggletest.WithDataDir(dir), waggletest.WithConfig(func(c *app.Config) {
		c.SessionStore.PostgresURL = pgtest.URL(t)
		c.Gateway.Auth = "required"
		c.NATSListen = waggletest.FreeAddr(t)
	}))
	nc := srv.DialNATS()
	defer nc.Close()
	waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "acme", Owner: "alice"})
	alice := waggletest.Operate(t, nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "alice"}).Token
	var ws map[string]any
	if code := srv.JSON("POST", "/api/workspaces", map[string]any{"name": "Acme Ops", "teamId": "acme"}, &ws, bearer(alice)...); code/100 != 2 {
		t.Fatalf("workspace: %d", code)
	}
	check := func(when string) {
		t.Helper()
		var list struct{ Secrets []struct{ Name string } }
		if code := srv.JSON("GET", "/api/vault?team=acme", nil, &list, bearer(alice)...); code != http.StatusOK || len(list.Secrets) != 1 || list.Secrets[0].Name != "openai" {
			t.Fatalf("%s: acme's vault = %d %+v", when, code, list)
		}
		before := len(llm.ChatRequests())
		st := srv.Chat(map[string]any{"message": "hello", "workspace": fmt.Sprint(ws["id"]), "session": "s1"}, bearer(alice)...)
		names := waggletest.Names(st.All(t))
		st.Close()
		reqs := llm.ChatRequests()[before:]
		if len(reqs) == 0 || reqs[0].Header.Get("Authorization") != "Bearer "+acmeKey {
			t.Fatalf("%s: acme's turn (%v) did not send the moved key", when, names)
		}
		raw, err := os.ReadFile(filepath.Join(dir, vault.SecretsFile))
		if err != nil {
			t.Fatalf("%s: the local vault's file: %v", when, err)
		}
		var f struct {
			Teams map[string]map[string]json.RawMessage `json:"teams"`
		}
		if err := json.Unmarshal(raw, &f); err != nil || len(f.Teams) != 1 || len(f.Teams[""]) != 1 {
			t.Fatalf("%s: vault.json = %s, want the local entry only", when, raw)
		}
	}
	check("after the start")
	srv.Restart()
	check("after a restart")
}

// TestDeletedTeamsVaultIsNotInherited: a team's vault goes with the team,
// so whoever creates a team under the same id later finds none of its
// keys.
func TestDeletedTeamsVaultIsNotInherited(t *testing.T) {
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
	alice, mal := token("alice"), token("mal")
	waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "acme", Owner: "alice"})
	const secret = "sk-acme-before-the-delete-01"
	if code := srv.JSON("POST", "/api/vault?team=acme", map[string]any{"name": "openai", "value": secret}, nil, bearer(alice)...); code != http.StatusOK {
		t.Fatalf("alice saves acme's key: %d", code)
	}
	if resp := srv.Do("DELETE", "/api/teams/acme", nil, bearer(alice)...); resp.StatusCode != http.StatusOK {
		t.Fatalf("alice deletes acme: %d %s", resp.StatusCode, body(t, resp))
	}
	waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "acme", Owner: "mal"})
	var list struct{ Secrets []struct{ Name string } }
	if code := srv.JSON("GET", "/api/vault?team=acme", nil, &list, bearer(mal)...); code != http.StatusOK || len(list.Secrets) != 0 {
		t.Errorf("the new acme's vault = %d %+v, want empty", code, list)
	}
	resp := srv.Do("POST", "/api/vault/openai/reveal?team=acme", nil, bearer(mal)...)
	if b := body(t, resp); resp.StatusCode != http.StatusNotFound || strings.Contains(b, secret) {
		t.Errorf("the new acme reveals the old key: %d %s", resp.StatusCode, b)
	}
}
