package pipeline

import (
	"context"
	"slices"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
)

func TestHasUserMessage(t *testing.T) {
	if hasUserMessage(nil) || hasUserMessage([]protocol.Message{{Role: protocol.RoleAssistant}}) ||
		!hasUserMessage([]protocol.Message{{Role: protocol.RoleAssistant}, {Role: protocol.RoleUser}}) {
		t.Error("hasUserMessage")
	}
}

// vault is config.json's settings with one key in the vault.
type vault struct{ asked int }

func (v *vault) ModelKey(_ context.Context, workspace, model string) string {
	v.asked++
	if workspace == "ws" && model == "m" {
		return "vault-key"
	}
	return ""
}

func (*vault) AutoSaveOn(string) bool { return false }

// TestLoopOptions: what a user's model call is sent with. The vault's key
// is used only when neither the settings nor the runner's flag name one
// (a key the operator set is never replaced by a user's); GEPA expands
// only the session's first message as the user typed it, never a slash
// command or a later message; compression runs whenever a budget model
// is set, on this session.
func TestLoopOptions(t *testing.T) {
	first := protocol.TurnRequest{Workspace: "ws", Session: "s1", Message: "help"}
	later := []protocol.Message{{Role: protocol.RoleUser, Content: "earlier"}}
	budget := agent.ModelConfig{BudgetModel: "cheap"}
	cases := []struct {
		name      string
		req       protocol.TurnRequest
		apiKey    string
		mc        agent.ModelConfig
		history   []protocol.Message
		message   string
		keys      []string
		expand    bool
		compress  bool
		vaultAsks int
	}{
		{name: "vault key", req: first, message: "help", keys: []string{"vault-key"}, vaultAsks: 1},
		{name: "runner key wins", req: first, apiKey: "flag", message: "help"},
		{name: "settings keys win", req: first, mc: agent.ModelConfig{APIKeys: []string{"k1"}}, message: "help", keys: []string{"k1"}},
		{name: "first message expanded", req: first, mc: budget, message: "help", keys: []string{"vault-key"}, expand: true, compress: true, vaultAsks: 1},
		{name: "later message not expanded", req: first, mc: budget, history: later, message: "help", keys: []string{"vault-key"}, compress: true, vaultAsks: 1},
		{name: "rerouted prompt not expanded", req: first, mc: budget, message: "a command's prompt", keys: []string{"vault-key"}, compress: true, vaultAsks: 1},
		{name: "slash command not expanded", req: protocol.TurnRequest{Workspace: "ws", Session: "s1", Message: "/help"}, mc: budget, message: "/help", keys: []string{"vault-key"}, compress: true, vaultAsks: 1},
	}
	for _, c := range cases {
		v := &vault{}
		tn := Turn{Ctx: context.Background(), Req: c.req, APIKey: c.apiKey, Settings: v}
		areq := agent.Request{Model: agent.ModelChoice{Model: "m"}}
		tn.LoopOptions(&areq, c.mc, c.history, c.message)
		if !slices.Equal(areq.APIKeys, c.keys) || v.asked != c.vaultAsks {
			t.Errorf("%s: keys %v (vault asked %d times), want %v (%d)", c.name, areq.APIKeys, v.asked, c.keys, c.vaultAsks)
		}
		if (areq.Expand != nil) != c.expand {
			t.Errorf("%s: expand %+v, want %v", c.name, areq.Expand, c.expand)
		}
		if (areq.Compress != nil) != c.compress || (c.compress && (areq.Compress.Session != "ws/s1" || areq.Compress.Model != "cheap")) {
			t.Errorf("%s: compress %+v, want %v", c.name, areq.Compress, c.compress)
		}
		if c.expand && areq.Expand.Model != "cheap" {
			t.Errorf("%s: expanded by %q, want the budget model", c.name, areq.Expand.Model)
		}
	}
}

// TestVague: the ambiguity guard asks back only on a vague first message
// as the user typed it.
func TestVague(t *testing.T) {
	tn := Turn{Req: protocol.TurnRequest{Message: "the usual"}}
	if !agent.IsVague("the usual") {
		t.Fatal("agent.IsVague no longer calls \"the usual\" vague: pick another word for this test")
	}
	if !tn.Vague("the usual", nil) {
		t.Error("a vague first message is not vague")
	}
	if tn.Vague("the usual", []protocol.Message{{Role: protocol.RoleUser}}) {
		t.Error("a vague later message is vague")
	}
	if tn.Vague("a command's prompt", nil) {
		t.Error("a rerouted prompt is vague")
	}
}
