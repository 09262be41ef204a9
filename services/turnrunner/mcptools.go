package turnrunner

import (
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/mcp"
)

// mcpConfig is the MCP manager's configuration: c.MCP with the runner's
// data directory and name, and the data directory hidden from sandboxed
// servers as it is from bash.
func (c *Config) mcpConfig() mcp.Config {
	mc := c.MCP
	mc.DataDir, mc.RunnerID, mc.TeamServer = c.DataDir, c.RunnerID, c.TeamServer
	mc.SandboxHide = append(mc.SandboxHide, c.DataDir)
	return mc
}

// mcpTools binds the MCP tools of the turn's workspace and adds them to
// the agent's tools, leaving out those the team policy blocks (by tool or
// by server), which are added to blocked so a call to one reads as a
// governance block.
func (t *turn) mcpTools(tools []agent.Tool, blocked []string, policy protocol.ToolPolicy) (*mcp.ToolSet, []agent.Tool, []string) {
	set := t.svc.mcp.Bind(t.ctx, t.req.Workspace, t.mcpStep)
	for _, mt := range set.Tools() {
		if policy.BlocksMCP(mt.Name()) {
			blocked = append(blocked, mt.Name())
			continue
		}
		tools = append(tools, mt)
	}
	return set, tools, blocked
}

// mcpStep shows an MCP server's trouble (it stopped and is restarted) as a
// step of the turn.
func (t *turn) mcpStep(text string) {
	if err := t.pub.Emit(protocol.EventStep, protocol.TokenData{Content: text}); err != nil {
		t.svc.log.Warn("publish step", "turn", t.req.TurnID, "err", err)
	}
}
