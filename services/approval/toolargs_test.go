package approval

import (
	"testing"

	"github.com/waggle-os/core/libs/protocol"
)

// TestRepeatedKeyIsRefused: an input that names a key twice could show one
// value and be judged (or run) on the other; the check refuses it.
func TestRepeatedKeyIsRefused(t *testing.T) {
	e := newEnv(t, Config{})
	for _, input := range []string{
		`{"command":"ls","command":"touch x"}`,
		`{"path":"a","content":"x","path":"b"}`,
		`{"a":[{"b":1,"b":2}]}`,
	} {
		_, err := request(e, protocol.CheckApproval, protocol.ApprovalCheckRequest{
			TurnID: "turn-1", Workspace: "ws", ToolName: "bash", Input: []byte(input),
		})
		if protocol.KindOf(err) != protocol.Invalid {
			t.Errorf("%s: err = %v, want invalid", input, err)
		}
	}
	for _, input := range []string{`{"a":{"b":1},"b":{"a":2}}`, `{"a":[1,{"a":1}],"c":"a"}`, `{}`, `[]`, `"x"`} {
		if repeatsKey([]byte(input)) {
			t.Errorf("repeatsKey(%s) = true", input)
		}
	}
}

// TestBashGrantCoversOnlyItsCommand: "always allow" on a bash command is
// about that command's words, not every bash command.
func TestBashGrantCoversOnlyItsCommand(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.ask("turn-1", "ws", "bash", `{"command":"mkdir -p build"}`)
	if _, err := e.decide(id, true, true, ptr("ws")); err != nil {
		t.Fatal(err)
	}
	gs, err := request(e, protocol.ListGrants, protocol.Empty{})
	if err != nil || len(gs.Grants) != 1 || gs.Grants[0].TargetKey != "mkdir -p build" ||
		gs.Grants[0].Description != "Run the command: mkdir -p build" {
		t.Fatalf("grants %+v %v", gs.Grants, err)
	}
	if rep := e.check("turn-2", "ws", "bash", `{"command":"mkdir  -p 'build'"}`, protocol.Autonomy{}); rep.Action != protocol.ApprovalRun {
		t.Fatalf("the granted command: %+v", rep)
	}
	e.ask("turn-2", "ws", "bash", `{"command":"touch y"}`)
	e.ask("turn-2", "ws", "bash", `{"command":"mkdir -p build; touch y"}`)
	e.ask("turn-2", "ws", "bash", `{"command":"mkdir -p build2"}`)
}

// TestGrantNeverCoversCriticalCall: a critical command asks every time;
// approving it with "always" stores no grant.
func TestGrantNeverCoversCriticalCall(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.ask("turn-1", "ws", "bash", `{"command":"sudo ls"}`)
	if _, err := e.decide(id, true, true, ptr("ws")); err != nil {
		t.Fatal(err)
	}
	if p := e.entry(id); p.State != protocol.ApprovalStateApproved {
		t.Fatalf("entry %+v", p)
	}
	if gs, _ := request(e, protocol.ListGrants, protocol.Empty{}); len(gs.Grants) != 0 {
		t.Fatalf("grants %+v", gs.Grants)
	}
	e.ask("turn-2", "ws", "bash", `{"command":"sudo ls"}`)

	// A git_push grant (every push) does not cover a force push to main.
	id = e.ask("turn-3", "ws", "git_push", `{"branch":"feature"}`)
	if _, err := e.decide(id, true, true, ptr("ws")); err != nil {
		t.Fatal(err)
	}
	if rep := e.check("turn-4", "ws", "git_push", `{"branch":"feature"}`, protocol.Autonomy{}); rep.Action != protocol.ApprovalRun {
		t.Fatalf("granted push: %+v", rep)
	}
	e.ask("turn-4", "ws", "git_push", `{"branch":"main","force":true}`)
}
