package tools

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// listedPersona is an entry of GET /api/personas.
type listedPersona struct {
	ID                string   `json:"id"`
	Name              string   `json:"name"`
	Icon              string   `json:"icon"`
	IsReadOnly        bool     `json:"isReadOnly"`
	WorkspaceAffinity []string `json:"workspaceAffinity"`
	SystemPrompt      string   `json:"systemPrompt"`
}

// TestCoordinatorDelegates: the coordinator persona is listed, and a turn
// run as it is offered spawn_agent with memory, knowledge, awareness and
// plan tools only — nothing that reads or writes files, runs commands or
// reaches the web. Its worker still reads a workspace file: a
// coordinator's sub-agents draw from the turn's tools before the persona's
// filter, and the turn's model gets the worker's answer.
func TestCoordinatorDelegates(t *testing.T) {
	llm := spawnModel(t,
		map[string]any{"name": "Reader", "role": "researcher", "task": "read brief.md and report its content"},
		"read_file", map[string]any{"path": "brief.md"})
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL()))

	resp := p.Do(t, "GET", "/api/personas", nil)
	var list struct {
		Personas []listedPersona `json:"personas"`
	}
	err := json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /api/personas: %d %v", resp.StatusCode, err)
	}
	i := slices.IndexFunc(list.Personas, func(p listedPersona) bool { return p.ID == "coordinator" })
	if i < 0 {
		t.Fatalf("coordinator not listed: %+v", list.Personas)
	}
	if c := list.Personas[i]; c.Name != "Coordinator" || c.Icon != "🎛️" || c.IsReadOnly || c.SystemPrompt != "" ||
		!slices.Equal(c.WorkspaceAffinity, []string{"orchestration", "complex-projects", "multi-phase", "coordination"}) {
		t.Errorf("coordinator listed as %+v", c)
	}

	ws := createWorkspace(t, p, "Launch")
	files := filepath.Join(p.DataDir, "workspaces", ws, "files")
	if err := os.MkdirAll(files, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(files, "brief.md"), "launch on the 4th of May")
	evs := waggletest.NewStream(p.Do(t, "POST", "/api/chat", map[string]any{
		"message": "DELEGATE the launch review", "workspace": ws, "session": "s1", "persona": "coordinator",
	})).All(t)
	if end := evs[len(evs)-1]; end.Name != protocol.EventDone {
		t.Fatalf("turn ended with %s %s", end.Name, end.Data)
	}

	reqs := llm.ChatRequests()
	if len(reqs) == 0 || isSubAgent(reqs[0]) {
		t.Fatalf("first model request is not the turn's: %d requests", len(reqs))
	}
	offered := requestTools(reqs[0])
	slices.Sort(offered)
	want := []string{"add_plan_step", "create_plan", "execute_step", "get_awareness", "query_knowledge",
		"save_memory", "search_memory", "show_plan", "spawn_agent"}
	if !slices.Equal(offered, want) {
		t.Errorf("coordinator turn offered %v, want %v", offered, want)
	}
	if sys := reqs[0].Chat.Messages[0]; sys.Role != "system" || !strings.Contains(sys.Content, "## Persona: Coordinator\n") {
		t.Errorf("turn's system prompt lacks the coordinator's section")
	}

	subs := subAgentRequests(llm)
	if len(subs) == 0 {
		t.Fatal("no sub-agent ran")
	}
	subOffered := requestTools(subs[0])
	if !slices.Contains(subOffered, "read_file") || slices.Contains(subOffered, "spawn_agent") {
		t.Errorf("the coordinator's researcher was offered %v: want read_file, never spawn_agent", subOffered)
	}
	if !slices.Contains(waggletest.Steps(evs), `Spawning sub-agent "Reader" (researcher)...`) {
		t.Errorf("steps %q lack the spawn step", waggletest.Steps(evs))
	}
	if reply := waggletest.Text(evs); !strings.HasPrefix(reply, "parent got: sub-agent done: ") || !strings.Contains(reply, "launch on the 4th of May") {
		t.Errorf("reply %q, want the coordinator quoting its worker's reading of brief.md", reply)
	}
}
