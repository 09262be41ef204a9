// Package security is the attacker's suite: real `waggle serve` processes,
// real HTTP, and the requests of the trust-boundary review (issue "Trust
// boundaries") — a web page on another origin, another tenant, a hostile
// model output. Each test plays one attack and asserts what the attacker
// would notice: the refusal, and that nothing happened.
//
// Files by area: edge_test.go (origins, media types, Host, /health, body
// deadlines), toolargs_test.go (tool-argument decoding, bash parsing),
// mcpconfig_test.go (workspace fields, MCP configuration, GETs),
// teams_test.go (team scope on PostgreSQL), natsauth_test.go (the embedded
// NATS listener), limits_test.go (sanitiser, deadlines, file modes),
// autonomy_test.go (who may raise autonomy).
package security

import (
	"os"
	"testing"

	"github.com/waggle-os/core/services/turnrunner/mcp/mcptest"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

var waggleBin string

func TestMain(m *testing.M) {
	// The binary doubles as a stdio MCP server when a test's runner starts
	// it with mcptest.EnvServe set (mcpconfig_test.go).
	mcptest.MaybeServeStdio()
	os.Exit(waggletest.RunWithBinary(m, &waggleBin))
}
