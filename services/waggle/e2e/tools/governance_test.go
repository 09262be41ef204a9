package tools

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestTeamPolicyBlocksNewTools (team server, PostgreSQL): a team that
// blocks git_commit, web_search and read_document for members has none
// of them offered to a member's model, and a member's model that calls
// git_commit anyway gets the governance text while the repository keeps
// its history; the team's owner is offered all three and her git_status
// runs.
func TestTeamPolicyBlocksNewTools(t *testing.T) {
	fake := newFakeSearch(t, "searxng")
	llm := callerModel(t)
	srv := startTeamServer(t, llm.URL(), map[string]any{"webSearch": map[string]any{"provider": "searxng", "url": fake.srv.URL}})
	p := srv.p
	olga := srv.team(t, "acme", "olga", "greg")
	waggletest.Operate(t, srv.nc, protocol.SetPolicy, protocol.PolicySetRequest{TeamRef: protocol.TeamRef{Team: "acme"}, Role: protocol.TeamRoleMember,
		BlockedTools: []string{"git_commit", "web_search", "read_document"}})
	greg := srv.token(t, "greg")
	wsID := srv.workspace(t, "acme", "Acme Code", olga)
	repo := gitWorkspace(t, p, wsID)
	writeFile(t, filepath.Join(repo, "plan.md"), "changed by greg's model\n")
	head := testGit(t, repo, "rev-parse", "HEAD")

	evs := waggletest.NewStream(p.Do(t, "POST", "/api/chat", callChat(wsID, "git_commit", map[string]any{"message": "sneaky"}), "Authorization", greg)).All(t)
	for _, ev := range evs {
		if ev.Name == protocol.EventApprovalRequired {
			t.Fatalf("a blocked tool asked for an approval: %s", ev.Data)
		}
	}
	offered := offeredTools(llm)
	for _, name := range []string{"git_commit", "web_search", "read_document"} {
		if slices.Contains(offered, name) {
			t.Errorf("%s offered to a member although acme blocks it", name)
		}
	}
	if !slices.Contains(offered, "git_status") {
		t.Errorf("git_status (not blocked) not offered to the member: %v", offered)
	}
	res := toolResults(llm)
	if len(res) != 1 || res[0] != protocol.GovernanceBlockedText("git_commit") {
		t.Fatalf("result of the blocked call: %q", res)
	}
	if now := testGit(t, repo, "rev-parse", "HEAD"); now != head {
		t.Fatal("the blocked git_commit committed")
	}

	// The owner's git_status runs (under the team server's bubblewrap
	// sandbox where it is installed) and sees the member's change.
	waggletest.NewStream(p.Do(t, "POST", "/api/chat", callChat(wsID, "git_status", map[string]any{}), "Authorization", olga)).All(t)
	if res := toolResults(llm); len(res) != 2 || !strings.Contains(res[1], " M plan.md") {
		t.Errorf("owner's git_status: %q", res)
	}
	offered = offeredTools(llm)
	for _, name := range []string{"git_commit", "web_search", "read_document"} {
		if !slices.Contains(offered, name) {
			t.Errorf("%s not offered to the owner: %v", name, offered)
		}
	}
}
