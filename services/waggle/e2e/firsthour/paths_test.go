package firsthour

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/waggle-os/core/libs/llmtest"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestRelativeDataDir: `waggle serve --data-dir .cluster/data`, as make
// cluster runs it. The file tools insist on an absolute workspace root, so
// a relative data dir used to make every one fail with "no workspace
// directory is configured"; it is made absolute once, at start, and the
// agent's write_file lands under it.
func TestRelativeDataDir(t *testing.T) {
	llm := llmtest.New(llmtest.WithResponses(
		llmtest.Response{Steps: llmtest.ToolCall(0, "c1", "write_file", `{"path":"notes.txt","content":"written"}`, 2)},
		llmtest.Reply("done"),
	))
	llm.Start()
	defer llm.Close()
	wd := t.TempDir()
	p := waggletest.StartProc(t, waggleBin, waggletest.ProcWorkDir(wd), waggletest.ProcDataDir(filepath.Join(".cluster", "data")),
		waggletest.ProcEnv("WAGGLE_LLM_URL="+llm.URL()))

	// The desktop's own autonomy (a non-browser client may ask for it)
	// lets write_file run without an approval round trip.
	resp := p.Do(t, http.MethodPost, "/api/chat", map[string]any{"message": "write the notes", "workspace": "default", "session": "s1",
		"autonomy": map[string]any{"level": "yolo"}})
	evs := waggletest.NewStream(resp).All(t)
	if last := evs[len(evs)-1]; last.Name != "done" {
		t.Fatalf("turn ended with %s %s", last.Name, last.Data)
	}
	reqs := llm.ChatRequests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	data, err := os.ReadFile(filepath.Join(wd, ".cluster", "data", "workspaces", "default", "files", "notes.txt"))
	if err != nil || string(data) != "written" {
		t.Fatalf("the file under the relative data dir: %q, %v\nturn: %v", data, err, waggletest.Names(evs))
	}
}
