package mcp

import (
	"flag"
	"time"

	"github.com/waggle-os/core/libs/flagext"
)

// DefaultCallTimeout is a call's limit when the server's entry sets none.
const DefaultCallTimeout = 60 * time.Second

// StdioAuto is the Stdio setting that leaves the choice to the runner:
// StdioDirect on a desktop, StdioSandbox on a team server. A Manager is
// always given the resolved mode.
const StdioAuto = "auto"

// RegisterFlags registers the MCP manager's flags on fs, with their
// defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	flagext.EnumVar(fs, &c.Stdio, "mcp-stdio", StdioAuto, "stdio MCP servers: direct, sandbox (bubblewrap), off, or auto (direct locally, sandbox with --auth=required)",
		StdioAuto, StdioDirect, StdioSandbox, StdioOff)
	fs.BoolVar(&c.AllowPrivateURLs, "mcp-allow-private-urls", false, "team servers: let workspaces' HTTP MCP servers be on loopback, link-local, private or metadata addresses (refused by default; config.json's servers always may)")
	flagext.DurationVar(fs, &c.CallTimeout, "mcp-call-timeout", DefaultCallTimeout, "time limit of one MCP tool call (a server's \"timeout\" overrides it)")
}
