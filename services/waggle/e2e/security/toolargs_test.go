package security

// Area toolargs: a hostile model's tool calls. The scripted model
// (libs/llmtest) emits exactly the arguments an attacker would; each test
// asserts what the user would notice — an approval card showing what would
// run, or the call refused as an error the model reads — and that nothing
// else ran: no file the hidden command would have created.

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

const toolargsWorkspace = "ws1"

// toolargsSaw prefixes the model's final reply: it repeats the tool result
// it was given, so the test reads exactly what the model was told.
const toolargsSaw = "MODEL SAW: "

// toolargsStart runs `waggle serve` with bash on (unsandboxed, so the
// files a command creates are where the test looks) against a scripted
// model: a user message "CALL <tool> <raw json args>" becomes that tool call
// with those exact argument bytes; a tool result is echoed back as the
// reply.
func toolargsStart(t *testing.T) *waggletest.Proc {
	t.Helper()
	llm := llmtest.New(llmtest.WithHandler(llmtest.ToolCaller(toolargsSaw)))
	llm.Start()
	t.Cleanup(llm.Close)
	return waggletest.StartProc(t, waggleBin,
		waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL()),
		waggletest.ProcArgs("--enable-bash", "true", "--bash-sandbox", "off", "--approval-timeout", "20s"))
}

// toolargsApproval is the approval_required event's data.
type toolargsApproval struct {
	RequestID string          `json:"requestId"`
	ToolName  string          `json:"toolName"`
	Input     json.RawMessage `json:"input"`
}

// toolargsTurn is what one chat turn showed the user.
type toolargsTurn struct {
	Events    []waggletest.Event
	Approvals []toolargsApproval
}

// Reply is the model's final text (what it was told, after toolargsSaw).
func (tt toolargsTurn) Reply() string { return waggletest.Text(tt.Events) }

// ToolResults counts the tool_result events of tool (the turn's memory
// recall has its own).
func (tt toolargsTurn) ToolResults(tool string) int {
	n := 0
	for _, e := range tt.Events {
		var d struct {
			Name string `json:"name"`
		}
		if e.Name == "tool_result" && json.Unmarshal(e.Data, &d) == nil && d.Name == tool {
			n++
		}
	}
	return n
}

// toolargsChat runs one turn in which the model calls tool with the raw
// args; every approval it asks for is answered with decide's body.
func toolargsChat(t *testing.T, p *waggletest.Proc, session, tool, args string, decide map[string]any) toolargsTurn {
	t.Helper()
	resp := p.Do(t, http.MethodPost, "/api/chat", map[string]any{
		"message": "please CALL " + tool + " " + args, "workspace": toolargsWorkspace, "session": session,
	})
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("chat: %d %s", resp.StatusCode, data)
	}
	st := waggletest.NewStream(resp)
	defer st.Close()
	var turn toolargsTurn
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			return turn
		}
		if err != nil {
			t.Fatalf("read stream: %v", err)
		}
		turn.Events = append(turn.Events, ev)
		if ev.Name != "approval_required" {
			continue
		}
		var a toolargsApproval
		ev.Decode(t, &a)
		turn.Approvals = append(turn.Approvals, a)
		dr := p.Do(t, http.MethodPost, "/api/approval/"+a.RequestID, decide)
		dr.Body.Close()
		if dr.StatusCode != http.StatusOK {
			t.Fatalf("decide %s: %d", a.RequestID, dr.StatusCode)
		}
	}
}

var (
	toolargsDeny          = map[string]any{"approved": false}
	toolargsApproveAlways = map[string]any{"approved": true, "always": true, "sourceWorkspaceId": toolargsWorkspace}
)

// toolargsFile is rel's path in the workspace's files directory.
func toolargsFile(p *waggletest.Proc, rel string) string {
	return filepath.Join(p.DataDir, "workspaces", toolargsWorkspace, "files", filepath.FromSlash(rel))
}

// toolargsNoFile fails t when the hidden command's file exists.
func toolargsNoFile(t *testing.T, p *waggletest.Proc, rel string) {
	t.Helper()
	if _, err := os.Stat(toolargsFile(p, rel)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists (stat: %v): the call ran something the user was not shown", rel, err)
	}
}

// toolargsRefused fails t unless the call was refused before the gate: the
// model read an invalid-arguments error, no approval was asked and the tool
// produced no result.
func toolargsRefused(t *testing.T, turn toolargsTurn, tool string) {
	t.Helper()
	if len(turn.Approvals) != 0 {
		t.Errorf("an approval was asked for arguments that must be refused: %s", turn.Approvals[0].Input)
	}
	if reply := turn.Reply(); !strings.HasPrefix(reply, toolargsSaw+"Error: Invalid arguments") {
		t.Errorf("the model was not told its arguments are invalid; it saw %q", reply)
	}
	if n := turn.ToolResults(tool); n != 0 {
		t.Errorf("%d tool results for a refused call", n)
	}
}

// TestToolargsBashCaseVariantKeyIsRefused: {"command":"ls","Command":"touch
// …"} — the gate read "ls" (harmless, no approval) while the tool ran the
// case-insensitive last key. Now the unknown key "Command" refuses the call.
func TestToolargsBashCaseVariantKeyIsRefused(t *testing.T) {
	p := toolargsStart(t)
	turn := toolargsChat(t, p, "s1", "bash", `{"command":"ls","Command":"touch pwned_case"}`, toolargsDeny)
	toolargsRefused(t, turn, "bash")
	toolargsNoFile(t, p, "pwned_case")
}

// TestToolargsWriteFileCaseVariantPathIsRefused: a grant for notes.txt must
// not let {"path":"notes.txt","Path":"autorun.sh"} write autorun.sh.
func TestToolargsWriteFileCaseVariantPathIsRefused(t *testing.T) {
	p := toolargsStart(t)
	turn := toolargsChat(t, p, "s1", "write_file", `{"path":"notes.txt","content":"hello"}`, toolargsApproveAlways)
	if len(turn.Approvals) != 1 {
		t.Fatalf("the first write asked %d approvals, want 1", len(turn.Approvals))
	}
	turn = toolargsChat(t, p, "s2", "write_file", `{"path":"notes.txt","Path":"autorun.sh","content":"#!/bin/sh\nid\n"}`, toolargsDeny)
	toolargsRefused(t, turn, "write_file")
	toolargsNoFile(t, p, "autorun.sh")
}

// TestToolargsDuplicateKeyIsRefused: {"command":"ls","command":"touch …"}
// shows a harmless first key on the approval card while the last one runs.
func TestToolargsDuplicateKeyIsRefused(t *testing.T) {
	p := toolargsStart(t)
	turn := toolargsChat(t, p, "s1", "bash", `{"command":"ls","command":"touch pwned_dup"}`, toolargsApproveAlways)
	toolargsRefused(t, turn, "bash")
	toolargsNoFile(t, p, "pwned_dup")
}

// TestToolargsUnknownKeyIsRefused: a key the tool does not have (here a
// working directory the tool would silently ignore) is an error, not
// dropped.
func TestToolargsUnknownKeyIsRefused(t *testing.T) {
	p := toolargsStart(t)
	turn := toolargsChat(t, p, "s1", "write_file", `{"path":"a.txt","content":"x","mode":"0777"}`, toolargsApproveAlways)
	toolargsRefused(t, turn, "write_file")
	toolargsNoFile(t, p, "a.txt")
}

// toolargsAsksThenDenied runs command at normal autonomy, denies the
// approval it must ask for and checks the card showed that exact command
// and that nothing ran.
func toolargsAsksThenDenied(t *testing.T, command, file string) {
	t.Helper()
	p := toolargsStart(t)
	args, _ := json.Marshal(map[string]string{"command": command})
	turn := toolargsChat(t, p, "s1", "bash", string(args), toolargsDeny)
	if len(turn.Approvals) != 1 {
		t.Fatalf("%q ran without asking (%d approvals); the model saw %q", command, len(turn.Approvals), turn.Reply())
	}
	var shown struct {
		Command string `json:"command"`
	}
	if err := json.Unmarshal(turn.Approvals[0].Input, &shown); err != nil || shown.Command != command {
		t.Errorf("the approval showed %s, want the command %q", turn.Approvals[0].Input, command)
	}
	toolargsNoFile(t, p, file)
}

// TestToolargsEnvShDashCAsks: env runs another command; it is not the
// harmless "env" that prints the environment.
func TestToolargsEnvShDashCAsks(t *testing.T) {
	toolargsAsksThenDenied(t, "env sh -c 'touch pwned'", "pwned")
}

// TestToolargsFindExecAsks: find -exec runs a command on the matches.
func TestToolargsFindExecAsks(t *testing.T) {
	toolargsAsksThenDenied(t, "find . -exec touch pwned2 {} +", "pwned2")
}

// TestToolargsEchoRedirectAsks: a redirection writes a file, whatever the
// command before it.
func TestToolargsEchoRedirectAsks(t *testing.T) {
	toolargsAsksThenDenied(t, "echo hi > pwned3", "pwned3")
}

// TestToolargsBashGrantCoversOnlyItsCommand: "always allow" on one bash
// command is about that command (program and arguments), not every bash
// command.
func TestToolargsBashGrantCoversOnlyItsCommand(t *testing.T) {
	p := toolargsStart(t)
	turn := toolargsChat(t, p, "s1", "bash", `{"command":"mkdir -p build"}`, toolargsApproveAlways)
	if len(turn.Approvals) != 1 {
		t.Fatalf("mkdir asked %d approvals, want 1", len(turn.Approvals))
	}
	// The same command (spelt with other spacing) runs on the grant.
	turn = toolargsChat(t, p, "s2", "bash", `{"command":"mkdir  -p   build"}`, toolargsDeny)
	if len(turn.Approvals) != 0 || turn.ToolResults("bash") != 1 {
		t.Errorf("the granted command asked again (%d approvals, %d results)", len(turn.Approvals), turn.ToolResults("bash"))
	}
	turn = toolargsChat(t, p, "s3", "bash", `{"command":"touch y"}`, toolargsDeny)
	if len(turn.Approvals) != 1 {
		t.Errorf("a grant for mkdir let touch run without asking (%d approvals)", len(turn.Approvals))
	}
	toolargsNoFile(t, p, "y")
}
