package approval

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/approval/grants"
)

// With PostgresURL the grants live in the database: an "always" decision is
// honoured by a service restarted on another data directory, and no grant
// file is written.
func TestGrantsInPostgresSurviveRestartWithoutAFile(t *testing.T) {
	url := pgtest.URL(t)
	dir := t.TempDir()
	e := newEnv(t, Config{PostgresURL: url, DataDir: dir})
	id := e.ask("turn-1", "ws", "write_file", `{"path":"a.txt"}`)
	if _, err := e.decide(id, true, true, nil); err != nil {
		t.Fatal(err)
	}
	e.stop()
	if _, err := os.Stat(filepath.Join(dir, grants.FileName)); !os.IsNotExist(err) {
		t.Fatalf("grant file written with PostgreSQL: %v", err)
	}

	e.cfg.DataDir = t.TempDir()
	e.start()
	for _, ws := range []string{"ws", "other"} {
		if rep := e.check("turn-2", ws, "write_file", `{"path":"a.txt"}`, protocol.Autonomy{}); rep.Action != protocol.ApprovalRun {
			t.Fatalf("workspace %s after restart: %+v", ws, rep)
		}
	}
	gs, err := request(e, protocol.ListGrants, protocol.Empty{})
	if err != nil || len(gs.Grants) != 1 || gs.Grants[0].SourceWorkspaceID != nil {
		t.Fatalf("grants after restart %+v %v", gs, err)
	}
	if _, err := request(e, protocol.ClearGrants, protocol.Empty{}); err != nil {
		t.Fatal(err)
	}
	e.ask("turn-3", "ws", "write_file", `{"path":"a.txt"}`)
}
