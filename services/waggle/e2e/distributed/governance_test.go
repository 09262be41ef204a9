package distributed

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

func offered(r *llmtest.Request) []string {
	var out []string
	for _, tool := range r.Chat.Tools {
		out = append(out, tool.Function.Name)
	}
	return out
}

// TestGovernance (team-server mode, PostgreSQL): a tool the user's role
// may not use is not offered to the model; called anyway it answers with
// the governance text; a policy change applies to the next turn.
func TestGovernance(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	t.Parallel()
	var mu sync.Mutex
	var seen []*llmtest.Request
	reqs := func() []*llmtest.Request {
		mu.Lock()
		defer mu.Unlock()
		return append([]*llmtest.Request(nil), seen...)
	}
	llm := llmtest.New(llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
		if toolResults(r) == 0 {
			return llmtest.Response{Steps: llmtest.ToolCall(0, "call_w", "write_file", `{"path":"blocked.txt","content":"x"}`, 1)}
		}
		return llmtest.Reply("ok")
	}))
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
	tok, err := bus.Call(context.Background(), nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "greg"})
	if err != nil {
		t.Fatal(err)
	}
	waggletest.Operate(t, nc, protocol.PutMember, protocol.MemberPutRequest{TeamRef: protocol.TeamRef{Team: "acme"}, User: "greg", Role: "member"})
	waggletest.Operate(t, nc, protocol.SetPolicy, protocol.PolicySetRequest{TeamRef: protocol.TeamRef{Team: "acme"}, Role: "member", BlockedTools: []string{"write_file"}})
	// The chats ask for yolo so an unblocked write runs without an
	// approval; a team's cap is normal unless its admins raise it.
	yolo := protocol.AutonomyYolo
	waggletest.Operate(t, nc, protocol.UpdateTeam, protocol.TeamUpdateRequest{TeamRef: protocol.TeamRef{Team: "acme"}, MaxAutonomy: &yolo})
	olga, err := bus.Call(context.Background(), nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "olga"})
	if err != nil {
		t.Fatal(err)
	}
	var ws map[string]any
	if st := srv.JSON(http.MethodPost, "/api/workspaces", map[string]any{"name": "Acme Ops", "teamId": "acme"}, &ws, "Authorization", "Bearer "+olga.Token); st != 200 && st != 201 {
		t.Fatalf("create workspace: %d %v", st, ws)
	}
	id := fmt.Sprint(ws["id"])
	auth := []string{"Authorization", "Bearer " + tok.Token}

	evs := srv.Chat(map[string]any{"message": "write it", "workspace": id, "autonomy": map[string]any{"level": "yolo"}}, auth...).All(t)
	if waggletest.Names(evs)[len(evs)-1] != "done" {
		t.Fatalf("turn: %v", waggletest.Names(evs))
	}
	if slices.Contains(offered(reqs()[0]), "write_file") || !slices.Contains(offered(reqs()[0]), "read_file") {
		t.Errorf("tools offered to a member: %v", offered(reqs()[0]))
	}
	i := slices.IndexFunc(evs, func(e waggletest.Event) bool {
		return e.Name == "tool_result" && strings.Contains(string(e.Data), `"name":"write_file"`)
	})
	var res struct{ Result string }
	if i < 0 {
		t.Fatalf("no tool_result for the blocked call: %v", waggletest.Names(evs))
	}
	evs[i].Decode(t, &res)
	if res.Result != protocol.GovernanceBlockedText("write_file") {
		t.Errorf("blocked call's result %q", res.Result)
	}

	// Unblock: the change reaches the runner's cache within seconds.
	waggletest.Operate(t, nc, protocol.SetPolicy, protocol.PolicySetRequest{TeamRef: protocol.TeamRef{Team: "acme"}, Role: "member", BlockedTools: []string{}})
	waitfor.Within(10*time.Second).Every(200*time.Millisecond).NoError(t, "policy change applied", func() error {
		n := len(reqs())
		srv.Chat(map[string]any{"message": "again", "workspace": id, "autonomy": map[string]any{"level": "yolo"}}, auth...).All(t)
		if got := offered(reqs()[n]); !slices.Contains(got, "write_file") {
			return fmt.Errorf("offered %v", got)
		}
		return nil
	})
}
