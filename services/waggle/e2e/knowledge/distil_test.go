package knowledge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestDistilFinishedSession: a session idle for an hour is distilled into
// one important frame of its own workspace's mind when the store starts
// (its first lifecycle sweep), and the session file is left as it was.
func TestDistilFinishedSession(t *testing.T) {
	srv := waggletest.Start(t)
	for _, name := range []string{"Falcon", "Other"} {
		var out obj
		if st := srv.JSON("POST", "/api/workspaces", obj{"name": name}, &out); st/100 != 2 {
			t.Fatalf("create workspace %s: %d %v", name, st, out)
		}
	}
	srv.Stop()

	file := filepath.Join(srv.DataDir, "workspaces", "falcon", "sessions", "s1.jsonl")
	lines := []string{
		`{"type":"meta","title":"Falcon launch","created":"2026-03-01T09:00:00.000Z"}`,
		`{"role":"user","content":"Help me plan the Falcon launch for March","timestamp":"2026-03-01T09:00:00.000Z"}`,
		`{"role":"assistant","content":"Let's pick a **launch date** first.","timestamp":"2026-03-01T09:00:01.000Z"}`,
		`{"role":"user","content":"We decided on 12 March","timestamp":"2026-03-01T09:00:02.000Z"}`,
		`{"role":"assistant","content":"Decided: 12 March.","timestamp":"2026-03-01T09:00:03.000Z"}`,
	}
	data := []byte(strings.Join(lines, "\n") + "\n")
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	idle := time.Now().Add(-time.Hour)
	if err := os.Chtimes(file, idle, idle); err != nil {
		t.Fatal(err)
	}
	srv.Restart()

	var frames []protocol.MemoryFrame
	waitfor.True(t, "the session distilled", func() bool {
		var r struct{ Results []protocol.MemoryFrame }
		if st := srv.JSON("GET", "/api/memory/frames?workspace=falcon", nil, &r); st != 200 {
			return false
		}
		frames = r.Results
		return len(frames) > 0
	})
	if len(frames) != 1 || frames[0].Importance != protocol.ImportanceImportant || frames[0].Source != protocol.SourceSystem ||
		!strings.Contains(frames[0].Content, `Session "Falcon launch"`) || !strings.Contains(frames[0].Content, "Help me plan the Falcon launch") {
		t.Fatalf("falcon's mind = %+v, want one distilled frame", frames)
	}
	var other struct{ Results []protocol.MemoryFrame }
	if st := srv.JSON("GET", "/api/memory/frames?workspace=other", nil, &other); st != 200 || len(other.Results) != 0 {
		t.Fatalf("another workspace's mind = %d %+v, want empty", st, other.Results)
	}
	if got, err := os.ReadFile(file); err != nil || string(got) != string(data) {
		t.Fatalf("the session file changed: %v\n%s", err, got)
	}
}
