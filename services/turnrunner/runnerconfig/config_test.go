package runnerconfig

import (
	"flag"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/chatstream"
	"github.com/waggle-os/core/services/turnrunner/mcp"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		err  string
	}{
		{"zero value", Config{}, ""},
		{"no echo delay, no grace", Config{EchoDelay: 0, DisconnectGrace: 0}, ""},
		{"negative echo delay", Config{EchoDelay: -time.Millisecond}, "--echo-delay"},
		{"negative max turns", Config{MaxTurns: -1}, "--max-turns"},
		{"negative agent steps", Config{AgentMaxSteps: -1}, "--agent-max-steps"},
		{"negative grace", Config{DisconnectGrace: -time.Second}, "--disconnect-grace"},
		{"bash choices", Config{EnableBash: BashOff, BashSandbox: SandboxOn}, ""},
		{"bad bash", Config{EnableBash: "yes"}, `enable bash "yes": want true, false or auto`},
		{"bad sandbox", Config{BashSandbox: "yes"}, `bash sandbox "yes": want on, off or auto`},
		{"mcp auto", Config{MCP: mcp.Config{Stdio: mcp.StdioAuto}}, ""},
		{"bad mcp", Config{MCP: mcp.Config{Stdio: "docker"}}, `MCP stdio mode "docker": want auto, direct, sandbox or off`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.err == "" && err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			if tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("Validate() = %v, want %q", err, tt.err)
			}
		})
	}
}

// TestFlagDefaults: the flags start from the same defaults a Config built
// by hand gets, except the settings whose zero value means something
// (EchoDelay and DisconnectGrace: none).
func TestFlagDefaults(t *testing.T) {
	var c Config
	c.RegisterFlags(flag.NewFlagSet("t", flag.ContinueOnError))
	if c.LLMURL != chatstream.DefaultBaseURL || c.EchoDelay != DefaultEchoDelay || c.DisconnectGrace != DefaultDisconnectGrace ||
		c.MaxTurns != 0 || c.AgentMaxSteps != agent.DefaultMaxSteps || c.EnableBash != Auto || c.BashSandbox != Auto ||
		c.MCP.Stdio != mcp.StdioAuto || c.MCP.CallTimeout != mcp.DefaultCallTimeout {
		t.Errorf("flag defaults %+v", c)
	}
	hand := Config{DataDir: t.TempDir()}
	if err := hand.Prepare(); err != nil {
		t.Fatal(err)
	}
	if hand.EchoDelay != 0 || hand.DisconnectGrace != 0 || hand.MaxTurns <= 0 || hand.MCP.Stdio != mcp.StdioDirect {
		t.Errorf("hand-built defaults %+v", hand)
	}
}

// TestAutoSettings: the auto settings follow TeamServer (the gateway's
// --auth=required) exactly as the composition root derived them before:
// bash on a desktop runs directly, on a team server it is off unless
// enabled, and then sandboxed; stdio MCP servers are sandboxed there.
func TestAutoSettings(t *testing.T) {
	tests := []struct {
		team                bool
		bash, sandbox       string
		wantBash, wantSbox  bool
		wantStdio, mcpStdio string
	}{
		{false, "auto", "auto", true, false, mcp.StdioDirect, "auto"},  // desktop: bash runs directly
		{false, "auto", "on", true, true, mcp.StdioDirect, ""},         // asked for
		{false, "", "", true, false, mcp.StdioSandbox, "sandbox"},      // a Config built by hand, stdio asked sandboxed
		{true, "auto", "auto", false, false, mcp.StdioSandbox, "auto"}, // team server: bash off, nothing to sandbox
		{true, "true", "auto", true, true, mcp.StdioSandbox, ""},       // team server with bash: sandboxed
		{true, "true", "off", true, false, mcp.StdioDirect, "direct"},  // operator's explicit choices
		{true, "false", "on", false, false, mcp.StdioOff, "off"},       // no bash at all
	}
	_, err := exec.LookPath("bwrap")
	haveBwrap := err == nil
	for _, tt := range tests {
		c := Config{DataDir: t.TempDir(), TeamServer: tt.team, EnableBash: tt.bash, BashSandbox: tt.sandbox, MCP: mcp.Config{Stdio: tt.mcpStdio}}
		if c.bashOn() != tt.wantBash {
			t.Errorf("%+v: bash offered %v", tt, c.bashOn())
		}
		if tt.wantSbox && !haveBwrap {
			if _, err := c.bashSandbox(); err == nil || !strings.Contains(err.Error(), "bubblewrap is not installed") {
				t.Errorf("%+v without bwrap: %v", tt, err)
			}
			continue
		}
		if err := c.Prepare(); err != nil {
			t.Errorf("%+v: %v", tt, err)
			continue
		}
		// Without bash the sandbox is still found for the git tools, when
		// bwrap is there.
		gitSbox := !tt.wantBash && haveBwrap && (tt.sandbox == SandboxOn || (tt.sandbox != SandboxOff && tt.team))
		if (c.bashSandboxPath != "") != (tt.wantSbox || gitSbox) || c.ToolsConfig().EnableBash != tt.wantBash {
			t.Errorf("%+v: sandbox %q, tools %+v", tt, c.bashSandboxPath, c.ToolsConfig())
		}
		if c.MCP.Stdio != tt.wantStdio {
			t.Errorf("%+v: stdio %q, want %q", tt, c.MCP.Stdio, tt.wantStdio)
		}
	}
	t.Setenv("PATH", t.TempDir())
	c := Config{DataDir: t.TempDir(), TeamServer: true, EnableBash: BashOn}
	if err := c.Prepare(); err == nil || !strings.Contains(err.Error(), "bubblewrap") {
		t.Fatalf("missing bwrap: %v", err)
	}
}

// TestWebFetchPrivateConfig: web_fetch may reach private addresses (after
// an approval) on a desktop, not on a team server unless the operator
// says so.
func TestWebFetchPrivateConfig(t *testing.T) {
	for _, tt := range []struct {
		team, flag, want bool
	}{{false, false, true}, {true, false, false}, {true, true, true}} {
		c := Config{TeamServer: tt.team, WebFetchAllowPrivate: tt.flag}
		if got := c.ToolsConfig().WebFetchAllowPrivate; got != tt.want {
			t.Errorf("team %v flag %v: allow private %v, want %v", tt.team, tt.flag, got, tt.want)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	c := Config{DataDir: t.TempDir()}
	if err := c.Prepare(); err != nil {
		t.Fatal(err)
	}
	tc := c.ToolsConfig()
	if !tc.EnableBash || tc.BashTimeout != 30*time.Second || tc.BashOutputLimit != 64<<10 || tc.ReadLimit != 256<<10 {
		t.Errorf("tools config %+v", tc)
	}
	ac := c.AgentConfig()
	if ac.MaxSteps != 200 || ac.MaxRetries != 3 || ac.RetryBackoff != time.Second || ac.BaseURL != "http://localhost:4000/v1" {
		t.Errorf("agent config %+v", ac)
	}
	off := Config{DataDir: t.TempDir(), EnableBash: BashOff, BashTimeout: time.Hour, BashMaxTimeout: time.Minute}
	if err := off.Prepare(); err == nil {
		t.Errorf("bash timeout above its cap accepted")
	}
	off.BashMaxTimeout = 2 * time.Hour
	if err := off.Prepare(); err != nil || off.ToolsConfig().EnableBash {
		t.Errorf("disable bash: err %v, config %+v", err, off.ToolsConfig())
	}
}
