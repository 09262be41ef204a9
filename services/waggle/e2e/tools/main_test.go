// Package tools is the black-box suite of the agent's built-in tools
// (issue "The tools a Waggle user expects"): a real `waggle serve`
// process, the scripted model (libs/llmtest) calling a tool, and the tool
// working against something real — a git repository in the workspace, a
// local fake of a web search provider, documents the test builds. Each
// test asserts what the user sees: the approval asked, the result the
// model was given, the change on disk.
//
// Files by tool: git_test.go (git_status, git_diff, git_commit,
// git_branch), websearch_test.go (web_search against local fakes of
// SearXNG, Brave and Tavily; keys from the vault, per team; /research;
// no settings route redirects it), documents_test.go (read_document, a
// zip and a PDF bomb, generate_xlsx), plan_test.go (plans across a kill -9),
// governance_test.go (a team policy blocking the new tools; PostgreSQL),
// subagent_test.go (spawn_agent: a sub-agent's approval through its
// turn's stream, cancellation with the turn, no tools beyond the turn's,
// GET /api/agents/active team-scoped; PostgreSQL for the last).
package tools

import (
	"os"
	"testing"

	"github.com/waggle-os/core/services/waggle/waggletest"
)

var waggleBin string

func TestMain(m *testing.M) {
	os.Exit(waggletest.RunWithBinary(m, &waggleBin))
}
