package security

// Who may raise the autonomy level (issue "Trust boundaries", 2b): a chat
// body asking for "yolo" makes bash run anything not on the short critical
// list without asking. Whoever sends a chat must not be able to raise it:
// locally only a same-origin or non-browser client may (the edge's origin
// rule), and on a team server the team's policy caps it.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// autonomyCommand is a bash call the "normal" gate asks about and "yolo"
// (and "trusted") would run without asking: not read-only, not critical.
// Its effect is a file the test can look for.
const autonomyCommand = "touch pwned.txt"

// autonomyModel answers a user message "CALL <tool> <json>" with that tool
// call and a tool result with a short reply, so every chat in a test drives
// one tool call without a shared script.
func autonomyModel(t *testing.T) *llmtest.Server {
	t.Helper()
	s := llmtest.New(llmtest.WithHandler(llmtest.ToolCaller("tool said: ")))
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// autonomyBashChat is a chat body in workspace ws whose model runs
// autonomyCommand; autonomy is the body's raw "autonomy" value (nil: none).
func autonomyBashChat(ws string, autonomy any) map[string]any {
	args, _ := json.Marshal(map[string]string{"command": autonomyCommand})
	b := map[string]any{"message": "please CALL bash " + string(args), "workspace": ws}
	if autonomy != nil {
		b["autonomy"] = autonomy
	}
	return b
}

// autonomyPwned reports whether autonomyCommand ran in workspace ws.
func autonomyPwned(t *testing.T, p *waggletest.Proc, ws string) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(p.DataDir, "workspaces", ws, "files", "pwned.txt"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return err == nil
}

// autonomyTeam is a team server with team "acme" (bash enabled), its
// owner olga, admin ada and member greg, and a team workspace.
type autonomyTeam struct {
	proc            *waggletest.Proc
	nc              *nats.Conn
	olga, ada, greg string // tokens
	workspace       string
}

// autonomyTeamServer starts `waggle serve` in team-server mode on
// PostgreSQL, offering bash, with the scripted model, and sets up acme.
func autonomyTeamServer(t *testing.T) *autonomyTeam {
	t.Helper()
	llm := autonomyModel(t)
	natsAddr := waggletest.FreeAddr(t)
	p := waggletest.StartProc(t, waggleBin,
		waggletest.ProcArgs("--nats-listen", natsAddr, "--enable-bash", "true"),
		waggletest.ProcEnv("WAGGLE_AUTH=required", "WAGGLE_POSTGRES_URL="+pgtest.URL(t), "WAGGLE_LLM_URL="+llm.URL()))
	tm := &autonomyTeam{proc: p, nc: p.DialNATS(t, natsAddr)}
	waggletest.Operate(t, tm.nc, protocol.CreateTeam, protocol.TeamCreateRequest{ID: "acme", Owner: "olga"})
	codeTools := true
	waggletest.Operate(t, tm.nc, protocol.UpdateTeam, protocol.TeamUpdateRequest{TeamRef: protocol.TeamRef{Team: "acme"}, CodeTools: &codeTools})
	waggletest.Operate(t, tm.nc, protocol.PutMember, protocol.MemberPutRequest{TeamRef: protocol.TeamRef{Team: "acme"}, User: "ada", Role: protocol.TeamRoleAdmin})
	waggletest.Operate(t, tm.nc, protocol.PutMember, protocol.MemberPutRequest{TeamRef: protocol.TeamRef{Team: "acme"}, User: "greg", Role: protocol.TeamRoleMember})
	tm.olga = waggletest.Operate(t, tm.nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "olga"}).Token
	tm.ada = waggletest.Operate(t, tm.nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "ada"}).Token
	tm.greg = waggletest.Operate(t, tm.nc, protocol.CreateToken, protocol.TokenCreateRequest{User: "greg"}).Token
	var ws map[string]any
	if st := autonomyJSON(t, p, "POST", "/api/workspaces", map[string]any{"name": "Acme Ops", "teamId": "acme"}, &ws, tm.olga); st != http.StatusCreated && st != http.StatusOK {
		t.Fatalf("create team workspace: %d %v", st, ws)
	}
	tm.workspace = fmt.Sprint(ws["id"])
	return tm
}

// autonomyJSON sends a request with a bearer token ("" for none, as a
// local client) and decodes the answer
// into out (when not nil).
func autonomyJSON(t *testing.T, p *waggletest.Proc, method, path string, body, out any, token string) int {
	t.Helper()
	var auth []string
	if token != "" {
		auth = []string{"Authorization", "Bearer " + token}
	}
	resp := p.Do(t, method, path, body, auth...)
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: decode the answer (%d): %v", method, path, resp.StatusCode, err)
		}
	}
	return resp.StatusCode
}

// autonomySetPolicy has token's holder set acme's maxAutonomy and returns
// the status and the team as answered.
func (tm *autonomyTeam) autonomySetPolicy(t *testing.T, token string, level any) (int, map[string]any) {
	t.Helper()
	var team map[string]any
	st := autonomyJSON(t, tm.proc, http.MethodPatch, "/api/teams/acme", map[string]any{"maxAutonomy": level}, &team, token)
	return st, team
}

// autonomyLoweringSteps is the steps that say the level was lowered.
func autonomyLoweringSteps(evs []waggletest.Event) []string {
	var out []string
	for _, s := range waggletest.Steps(evs) {
		if strings.HasPrefix(s, "Autonomy lowered") {
			out = append(out, s)
		}
	}
	return out
}

// autonomyDeny denies the approval the stream is waiting for and reads the
// stream to its end.
func autonomyDeny(t *testing.T, p *waggletest.Proc, approval waggletest.Event, token string, st *waggletest.Stream) []waggletest.Event {
	t.Helper()
	var a struct {
		RequestID string `json:"requestId"`
	}
	approval.Decode(t, &a)
	if code := autonomyJSON(t, p, "POST", "/api/approval/"+a.RequestID, map[string]any{"approved": false}, nil, token); code != http.StatusOK {
		t.Fatalf("deny: %d", code)
	}
	return st.All(t)
}

// TestAutonomyTeamMemberYoloIsLowered: a member's chat asks for yolo on a
// team whose policy is the default; the bash call still waits for an
// approval, the stream says the level was lowered and why, and the command
// did not run.
func TestAutonomyTeamMemberYoloIsLowered(t *testing.T) {
	tm := autonomyTeamServer(t)
	st := waggletest.NewStream(tm.proc.Do(t, "POST", "/api/chat",
		autonomyBashChat(tm.workspace, map[string]any{"level": "yolo"}), "Authorization", "Bearer "+tm.greg))
	defer st.Close()
	evs := st.Until(t, protocol.EventApprovalRequired, protocol.EventDone, protocol.EventError)
	if last := evs[len(evs)-1]; last.Name != protocol.EventApprovalRequired {
		t.Fatalf("yolo from a member ran bash without asking: ended at %s, steps %q", last.Name, waggletest.Steps(evs))
	}
	want := "Autonomy lowered to normal: this team allows at most normal."
	if got := autonomyLoweringSteps(evs); len(got) != 1 || got[0] != want {
		t.Fatalf("lowering steps = %q, want [%q]", got, want)
	}
	if autonomyPwned(t, tm.proc, tm.workspace) {
		t.Fatal("the command ran before its approval")
	}
	rest := autonomyDeny(t, tm.proc, evs[len(evs)-1], tm.greg, st)
	if last := rest[len(rest)-1]; last.Name != protocol.EventDone {
		t.Fatalf("turn ended with %s", last.Name)
	}
	if autonomyPwned(t, tm.proc, tm.workspace) {
		t.Fatal("the denied command ran")
	}
	var team map[string]any
	if st := autonomyJSON(t, tm.proc, "GET", "/api/teams/acme", nil, &team, tm.greg); st != http.StatusOK || team["maxAutonomy"] != protocol.AutonomyNormal {
		t.Fatalf("the team's policy as a member sees it: %d maxAutonomy=%v", st, team["maxAutonomy"])
	}
}

// TestAutonomyTeamMemberCannotRaisePolicy: a member who cannot get yolo
// through a chat cannot get it by setting the team's policy either, and a
// level the gate does not know is refused rather than stored.
func TestAutonomyTeamMemberCannotRaisePolicy(t *testing.T) {
	tm := autonomyTeamServer(t)
	if st, team := tm.autonomySetPolicy(t, tm.greg, "yolo"); st != http.StatusForbidden || team["code"] != protocol.CodeForbidden {
		t.Fatalf("member raises the policy: %d %v", st, team)
	}
	for _, bad := range []any{"YOLO", "root", "", 3, true} {
		if st, team := tm.autonomySetPolicy(t, tm.ada, bad); st != http.StatusBadRequest {
			t.Fatalf("maxAutonomy %#v: %d %v", bad, st, team)
		}
	}
	var team map[string]any
	if st := autonomyJSON(t, tm.proc, "GET", "/api/teams/acme", nil, &team, tm.olga); st != http.StatusOK || team["maxAutonomy"] != protocol.AutonomyNormal {
		t.Fatalf("policy after the refused changes: %d maxAutonomy=%v", st, team["maxAutonomy"])
	}
}

// TestAutonomyTeamAdminRaisesPolicyToYolo: once a team admin sets the
// policy to yolo, the same member chat runs the command without asking and
// without a lowering step.
func TestAutonomyTeamAdminRaisesPolicyToYolo(t *testing.T) {
	tm := autonomyTeamServer(t)
	if st, team := tm.autonomySetPolicy(t, tm.ada, protocol.AutonomyYolo); st != http.StatusOK || team["maxAutonomy"] != protocol.AutonomyYolo {
		t.Fatalf("admin raises the policy: %d %v", st, team)
	}
	st := waggletest.NewStream(tm.proc.Do(t, "POST", "/api/chat",
		autonomyBashChat(tm.workspace, map[string]any{"level": "yolo"}), "Authorization", "Bearer "+tm.greg))
	defer st.Close()
	evs := st.Until(t, protocol.EventApprovalRequired, protocol.EventDone, protocol.EventError)
	if last := evs[len(evs)-1]; last.Name != protocol.EventDone {
		t.Fatalf("yolo under a yolo policy: ended at %s, steps %q", last.Name, waggletest.Steps(evs))
	}
	if got := autonomyLoweringSteps(evs); len(got) != 0 {
		t.Fatalf("lowering steps under a yolo policy: %q", got)
	}
	if !autonomyPwned(t, tm.proc, tm.workspace) {
		t.Fatal("the command did not run under the yolo policy")
	}
}

// TestAutonomyTeamChatWithinPolicyIsNotLowered: a chat that asks for no
// more than the policy allows gets no lowering step: at normal it asks as
// always; at trusted under a trusted policy the call is auto-approved.
func TestAutonomyTeamChatWithinPolicyIsNotLowered(t *testing.T) {
	tm := autonomyTeamServer(t)
	st := waggletest.NewStream(tm.proc.Do(t, "POST", "/api/chat",
		autonomyBashChat(tm.workspace, map[string]any{"level": "normal"}), "Authorization", "Bearer "+tm.greg))
	evs := st.Until(t, protocol.EventApprovalRequired, protocol.EventDone, protocol.EventError)
	if last := evs[len(evs)-1]; last.Name != protocol.EventApprovalRequired {
		t.Fatalf("normal chat: ended at %s", last.Name)
	}
	if got := autonomyLoweringSteps(evs); len(got) != 0 {
		t.Fatalf("lowering steps at normal: %q", got)
	}
	autonomyDeny(t, tm.proc, evs[len(evs)-1], tm.greg, st)
	st.Close()

	if code, team := tm.autonomySetPolicy(t, tm.olga, protocol.AutonomyTrusted); code != http.StatusOK || team["maxAutonomy"] != protocol.AutonomyTrusted {
		t.Fatalf("owner sets trusted: %d %v", code, team)
	}
	st = waggletest.NewStream(tm.proc.Do(t, "POST", "/api/chat",
		autonomyBashChat(tm.workspace, map[string]any{"level": "trusted"}), "Authorization", "Bearer "+tm.greg))
	defer st.Close()
	evs = st.Until(t, protocol.EventApprovalRequired, protocol.EventDone, protocol.EventError)
	if last := evs[len(evs)-1]; last.Name != protocol.EventDone {
		t.Fatalf("trusted under a trusted policy: ended at %s, steps %q", last.Name, waggletest.Steps(evs))
	}
	if got := autonomyLoweringSteps(evs); len(got) != 0 {
		t.Fatalf("lowering steps at trusted under trusted: %q", got)
	}
	if !autonomyPwned(t, tm.proc, tm.workspace) {
		t.Fatal("the command did not run at trusted")
	}
}

// TestAutonomyMalformedObjectIsNoElevation: an autonomy object that is not
// exactly {level, expiresAt?} with a known level and an unexpired integer
// time raises nothing, even on a local server where the client may ask for
// yolo: the bash call waits for an approval.
func TestAutonomyMalformedObjectIsNoElevation(t *testing.T) {
	llm := autonomyModel(t)
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL()))
	past := time.Now().Add(-time.Minute).UnixMilli()
	cases := map[string]string{
		"expired":            fmt.Sprintf(`{"level":"yolo","expiresAt":%d}`, past),
		"key case":           `{"LEVEL":"yolo"}`,
		"level case":         `{"level":"YOLO"}`,
		"duplicate level":    `{"level":"normal","level":"yolo"}`,
		"unknown key":        `{"level":"yolo","scope":"all"}`,
		"expiresAt string":   `{"level":"yolo","expiresAt":"never"}`,
		"expiresAt float":    `{"level":"yolo","expiresAt":1.5e20}`,
		"level not a string": `{"level":["yolo"]}`,
		"not an object":      `"yolo"`,
	}
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			ws := "ws-" + strings.ReplaceAll(name, " ", "-")
			st := waggletest.NewStream(p.Do(t, "POST", "/api/chat", autonomyBashChat(ws, json.RawMessage(raw))))
			defer st.Close()
			evs := st.Until(t, protocol.EventApprovalRequired, protocol.EventDone, protocol.EventError)
			if last := evs[len(evs)-1]; last.Name != protocol.EventApprovalRequired {
				t.Fatalf("autonomy %s elevated: ended at %s, steps %q", raw, last.Name, waggletest.Steps(evs))
			}
			if autonomyPwned(t, p, ws) {
				t.Fatal("the command ran before its approval")
			}
			autonomyDeny(t, p, evs[len(evs)-1], "", st)
		})
	}
}

// TestAutonomyForeignOriginYoloChatIsRefused: locally the request's level
// is kept, so only a client the edge's origin rule lets through may send
// it; a page on another origin asking for yolo gets 403 before any stream
// and nothing runs. (The origin rule is the edge area's; this test passes
// once it is merged.)
func TestAutonomyForeignOriginYoloChatIsRefused(t *testing.T) {
	llm := autonomyModel(t)
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL()))
	resp := p.Do(t, "POST", "/api/chat", autonomyBashChat("victim", map[string]any{"level": "yolo"}),
		"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("foreign-origin yolo chat: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if autonomyPwned(t, p, "victim") {
		t.Fatal("the foreign page's command ran")
	}
	if n := len(llm.ChatRequests()); n != 0 {
		t.Fatalf("the model was called %d times for a refused chat", n)
	}
}
