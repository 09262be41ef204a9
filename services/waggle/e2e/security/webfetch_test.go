package security

// The web_fetch tool (issue "The tools a Waggle user expects", item 1) and
// its trust boundary: a URL whose host is on the user's own network
// (loopback, link-local, private, metadata) is fetched on a desktop only
// after an approval, and not at all on a team server unless the operator
// passes --web-fetch-allow-private.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// webfetchPage is a loopback web page that counts its requests.
func webfetchPage(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<html><head><title>Router admin</title><script>var token="s3cr3t-script";</script></head>`+
			`<body><nav>Menu</nav><h1>Status</h1><p>The loopback page says hello. See <a href="/logs">the logs</a>.</p></body></html>`)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// webfetchChat is a chat body whose model (autonomyModel) calls web_fetch
// on url.
func webfetchChat(ws, url string) map[string]any {
	args, _ := json.Marshal(map[string]string{"url": url})
	return map[string]any{"message": "please CALL web_fetch " + string(args), "workspace": ws}
}

// webfetchToolMessages are the tool results the model was sent.
func webfetchToolMessages(llm *llmtest.Server) []string {
	var out []string
	for _, r := range llm.ChatRequests() {
		for _, m := range r.Chat.Messages {
			if m.Role == "tool" {
				out = append(out, m.Content)
			}
		}
	}
	return out
}

// TestWebFetchLoopbackPageAfterApproval: on a desktop, fetching a loopback
// page waits for an approval (nothing is fetched before it); once
// approved, the page's readable text — not its script — reaches the model
// in the tool result.
func TestWebFetchLoopbackPageAfterApproval(t *testing.T) {
	page, hits := webfetchPage(t)
	llm := autonomyModel(t)
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL()))
	st := waggletest.NewStream(p.Do(t, "POST", "/api/chat", webfetchChat("wf", page.URL+"/status")))
	defer st.Close()
	evs := st.Until(t, protocol.EventApprovalRequired, protocol.EventDone, protocol.EventError)
	last := evs[len(evs)-1]
	if last.Name != protocol.EventApprovalRequired {
		t.Fatalf("a loopback fetch ran without asking: ended at %s, steps %q", last.Name, waggletest.Steps(evs))
	}
	var a struct {
		RequestID string          `json:"requestId"`
		ToolName  string          `json:"toolName"`
		Input     json.RawMessage `json:"input"`
	}
	last.Decode(t, &a)
	if a.ToolName != "web_fetch" || !strings.Contains(string(a.Input), `"_private":true`) || !strings.Contains(string(a.Input), `"127.0.0.1"`) {
		t.Fatalf("approval asked for %s %s: want web_fetch marked _private with its address", a.ToolName, a.Input)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the page was fetched %d times before the approval", n)
	}
	if code := autonomyJSON(t, p, "POST", "/api/approval/"+a.RequestID, map[string]any{"approved": true}, nil, ""); code != http.StatusOK {
		t.Fatalf("approve: %d", code)
	}
	rest := st.All(t)
	if end := rest[len(rest)-1]; end.Name != protocol.EventDone {
		t.Fatalf("turn ended with %s", end.Name)
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("the page was fetched %d times, want once", n)
	}
	results := webfetchToolMessages(llm)
	if len(results) != 1 {
		t.Fatalf("tool results sent to the model: %q", results)
	}
	for _, want := range []string{"Title: Router admin", "# Status", "The loopback page says hello.", "the logs (" + page.URL + "/logs)"} {
		if !strings.Contains(results[0], want) {
			t.Errorf("tool result lacks %q:\n%s", want, results[0])
		}
	}
	if strings.Contains(results[0], "s3cr3t-script") || strings.Contains(results[0], "Menu") {
		t.Errorf("tool result has the script or the navigation:\n%s", results[0])
	}
}

// webfetchTeamServer is a team server (PostgreSQL, --auth=required) with
// the scripted model, extra flags args, and team acme owned by olga with
// a team workspace; it returns the server, olga's token and the workspace.
func webfetchTeamServer(t *testing.T, llm *llmtest.Server, args ...string) (*waggletest.Proc, string, string) {
	t.Helper()
	natsAddr := waggletest.FreeAddr(t)
	p := waggletest.StartProc(t, waggleBin,
		waggletest.ProcArgs(append([]string{"--nats-listen", natsAddr}, args...)...),
		waggletest.ProcEnv("WAGGLE_AUTH=required", "WAGGLE_POSTGRES_URL="+pgtest.URL(t), "WAGGLE_LLM_URL="+llm.URL()))
	nc := p.DialNATS(t, natsAddr)
	waggletest.Operate(t, nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "acme", Owner: "olga"})
	token := waggletest.Operate(t, nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "olga"}).Token
	var ws map[string]any
	if st := autonomyJSON(t, p, "POST", "/api/workspaces", map[string]any{"name": "Acme Web", "teamId": "acme"}, &ws, token); st != http.StatusCreated && st != http.StatusOK {
		t.Fatalf("create team workspace: %d %v", st, ws)
	}
	return p, token, fmt.Sprint(ws["id"])
}

// TestWebFetchTeamServerRefusesLoopback: on a team server a model told to
// fetch the server's own loopback (where its admin pages, metadata service
// or NATS may answer) gets an error result at once: no approval is asked
// and the page is never requested.
func TestWebFetchTeamServerRefusesLoopback(t *testing.T) {
	page, hits := webfetchPage(t)
	llm := autonomyModel(t)
	p, token, ws := webfetchTeamServer(t, llm)
	evs := waggletest.NewStream(p.Do(t, "POST", "/api/chat", webfetchChat(ws, page.URL), "Authorization", "Bearer "+token)).All(t)
	for _, ev := range evs {
		if ev.Name == protocol.EventApprovalRequired {
			t.Fatalf("a refused fetch asked for an approval: %s", ev.Data)
		}
	}
	if end := evs[len(evs)-1]; end.Name != protocol.EventDone {
		t.Fatalf("turn ended with %s", end.Name)
	}
	results := webfetchToolMessages(llm)
	if len(results) != 1 || !strings.Contains(results[0], "does not fetch loopback, link-local, private or metadata addresses") {
		t.Fatalf("tool results sent to the model: %q", results)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback page was fetched %d times", n)
	}
}

// TestWebFetchTeamServerAllowPrivateAsks: with --web-fetch-allow-private a
// team server treats a loopback fetch as a desktop does: it asks first.
func TestWebFetchTeamServerAllowPrivateAsks(t *testing.T) {
	page, hits := webfetchPage(t)
	llm := autonomyModel(t)
	p, token, ws := webfetchTeamServer(t, llm, "--web-fetch-allow-private")
	st := waggletest.NewStream(p.Do(t, "POST", "/api/chat", webfetchChat(ws, page.URL), "Authorization", "Bearer "+token))
	defer st.Close()
	evs := st.Until(t, protocol.EventApprovalRequired, protocol.EventDone, protocol.EventError)
	if last := evs[len(evs)-1]; last.Name != protocol.EventApprovalRequired {
		t.Fatalf("ended at %s, want an approval; steps %q", last.Name, waggletest.Steps(evs))
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the page was fetched %d times before the approval", n)
	}
	autonomyDeny(t, p, evs[len(evs)-1], token, st)
	if n := hits.Load(); n != 0 {
		t.Fatalf("the denied page was fetched %d times", n)
	}
}
