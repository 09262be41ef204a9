package sessionstore_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore"
)

// A session file with damaged lines: readers skip them (and the damage is
// logged once), appends and rewrites keep them byte for byte (a torn last
// line, the one thing a crash leaves, is cut by the next append), and the
// good lines around them are all served.
func TestDamagedSessionLines(t *testing.T) {
	const meta = `{"type":"meta","title":null,"created":"2026-01-01T00:00:00.000Z"}`
	a := `{"role":"user","content":"a","timestamp":"2026-01-01T00:00:01.000Z"}`
	b := `{"role":"assistant","content":"b","timestamp":"2026-01-01T00:00:02.000Z"}`
	for _, tc := range []struct {
		name, bad string
		last      bool // the bad line is a torn last line
	}{
		{name: "garbage text", bad: "this is not json"},
		{name: "binary junk", bad: "\x00\x01\xfe\xff"},
		{name: "object cut short", bad: `{"role":"user","content":"cu`},
		{name: "torn last line", bad: `{"role":"assistant","content":"half`, last: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			dir := t.TempDir()
			f := sessionstore.NewFiles(dir, nil, slog.New(slog.NewTextHandler(&logs, nil)))
			content := meta + "\n" + a + "\n" + tc.bad + "\n" + b + "\n"
			if tc.last {
				content = meta + "\n" + a + "\n" + b + "\n" + tc.bad
			}
			if err := f.WriteRawSession("ws", "s", []byte(content)); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			ref := protocol.SessionRef{Workspace: "ws", Session: "s"}
			history := func() []string {
				t.Helper()
				rep, err := f.History(ctx, protocol.HistoryRequest{SessionRef: ref})
				if err != nil {
					t.Fatalf("history: %v", err)
				}
				var out []string
				for _, m := range rep.Messages {
					out = append(out, m.Content)
				}
				return out
			}
			for range 2 {
				if got := strings.Join(history(), ","); got != "a,b" {
					t.Fatalf("history = %s, want a,b", got)
				}
			}
			if n := strings.Count(logs.String(), "lines that are not JSON"); n != 1 {
				t.Fatalf("damage logged %d times, want once:\n%s", n, logs.String())
			}
			if _, err := f.Append(ctx, protocol.AppendRequest{SessionRef: ref, Message: &protocol.Message{Role: "user", Content: "c", Timestamp: "2026-01-01T00:00:03.000Z"}}); err != nil {
				t.Fatalf("append: %v", err)
			}
			if err := f.RenameSession(ctx, ref, "Renamed"); err != nil {
				t.Fatalf("rename: %v", err)
			}
			if got := strings.Join(history(), ","); got != "a,b,c" {
				t.Fatalf("history after append = %s", got)
			}
			data, err := os.ReadFile(filepath.Join(dir, "workspaces", "ws", "sessions", "s.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			for _, good := range []string{a, b} {
				if !bytes.Contains(data, []byte(good+"\n")) {
					t.Fatalf("good line %s lost:\n%q", good, data)
				}
			}
			if kept := bytes.Contains(data, []byte("\n"+tc.bad+"\n")); kept == tc.last {
				t.Fatalf("bad line kept = %v (torn last line %v):\n%q", kept, tc.last, data)
			}
			if !bytes.HasSuffix(data, []byte("\n")) {
				t.Fatalf("file ends in a torn line:\n%q", data)
			}
		})
	}
}
