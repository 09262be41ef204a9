package tools

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// callerModel is a scripted model that, for a user message containing
// "CALL <tool> <json args>", calls that tool once and then answers
// "tool said: <result>".
func callerModel(t *testing.T) *llmtest.Server {
	t.Helper()
	s := llmtest.New(llmtest.WithHandler(func(r *llmtest.Request) llmtest.Response {
		msgs := r.Chat.Messages
		if len(msgs) == 0 {
			return llmtest.Reply("no messages")
		}
		last := msgs[len(msgs)-1]
		if last.Role == "tool" {
			return llmtest.Reply("tool said: " + last.Content)
		}
		_, rest, ok := strings.Cut(last.Content, "CALL ")
		if !ok {
			return llmtest.Reply("nothing to do")
		}
		tool, args, _ := strings.Cut(strings.TrimSpace(rest), " ")
		return llmtest.Response{Steps: llmtest.ToolCall(0, "call_1", tool, args, 2)}
	}))
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// callChat is a chat body in workspace ws whose model calls tool with args.
func callChat(ws, tool string, args any) map[string]any {
	b, _ := json.Marshal(args)
	return map[string]any{"message": "please CALL " + tool + " " + string(b), "workspace": ws}
}

// toolResults are the tool results the model was sent, in order.
func toolResults(llm *llmtest.Server) []string {
	var out []string
	for _, r := range llm.ChatRequests() {
		msgs := r.Chat.Messages
		if n := len(msgs); n > 0 && msgs[n-1].Role == "tool" {
			out = append(out, msgs[n-1].Content)
		}
	}
	return out
}

// offeredTools are the tool names of the model's last request.
func offeredTools(llm *llmtest.Server) []string {
	reqs := llm.ChatRequests()
	if len(reqs) == 0 {
		return nil
	}
	return requestTools(reqs[len(reqs)-1])
}

// requestTools are the tool names one model request offered.
func requestTools(r *llmtest.Request) []string {
	var out []string
	for _, tl := range r.Chat.Tools {
		out = append(out, tl.Function.Name)
	}
	return out
}

// runChat sends a chat whose model calls tool with args, reads it to its
// end (which must be done, with no approval asked) and returns the events.
func runChat(t *testing.T, p *waggletest.Proc, ws, tool string, args any) []waggletest.Event {
	t.Helper()
	evs := waggletest.NewStream(p.Do(t, "POST", "/api/chat", callChat(ws, tool, args))).All(t)
	for _, ev := range evs {
		if ev.Name == protocol.EventApprovalRequired {
			t.Fatalf("%s asked for an approval: %s", tool, ev.Data)
		}
	}
	if end := evs[len(evs)-1]; end.Name != protocol.EventDone {
		t.Fatalf("%s: turn ended with %s: %s", tool, end.Name, end.Data)
	}
	return evs
}

// approval is an approval_required event's data.
type approval struct {
	RequestID string          `json:"requestId"`
	ToolName  string          `json:"toolName"`
	Input     json.RawMessage `json:"input"`
}

// teamServer is a team server (PostgreSQL, user tokens) whose data dir
// holds config.json with cfg (none when nil) and whose model is llmURL;
// nc is an operator's connection to its bus.
type teamServer struct {
	p  *waggletest.Proc
	nc *nats.Conn
}

func startTeamServer(t *testing.T, llmURL string, cfg map[string]any) teamServer {
	t.Helper()
	dir := t.TempDir()
	if cfg != nil {
		b, _ := json.Marshal(cfg)
		if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	natsAddr := waggletest.FreeAddr(t)
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcDataDir(dir), waggletest.ProcArgs("--nats-listen", natsAddr),
		waggletest.ProcEnv("WAGGLE_AUTH=required", "WAGGLE_POSTGRES_URL="+pgtest.URL(t), "WAGGLE_LLM_URL="+llmURL))
	return teamServer{p: p, nc: p.DialNATS(t, natsAddr)}
}

// team creates team id owned by owner, with members, and returns the
// owner's Authorization header value.
func (s teamServer) team(t *testing.T, id, owner string, members ...string) string {
	t.Helper()
	waggletest.Operate(t, s.nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: id, Owner: owner})
	for _, m := range members {
		waggletest.Operate(t, s.nc, protocol.PutMember, protocol.MemberPutRequest{TeamRef: protocol.TeamRef{Team: id}, User: m, Role: protocol.TeamRoleMember})
	}
	return s.token(t, owner)
}

// token is a new token of user as an Authorization header value.
func (s teamServer) token(t *testing.T, user string) string {
	t.Helper()
	return "Bearer " + waggletest.Operate(t, s.nc, protocol.CreateToken, protocol.TokenCreateRequest{User: user}).Token
}

// workspace creates a workspace of team as auth's holder and returns its id.
func (s teamServer) workspace(t *testing.T, team, name, auth string) string {
	t.Helper()
	resp := s.p.Do(t, "POST", "/api/workspaces", map[string]any{"name": name, "teamId": team}, "Authorization", auth)
	defer resp.Body.Close()
	var ws struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ws); err != nil || ws.ID == "" || resp.StatusCode >= 300 {
		t.Fatalf("create %s's workspace: %d %v", team, resp.StatusCode, err)
	}
	return ws.ID
}
