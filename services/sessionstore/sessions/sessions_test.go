package sessions

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/jsonl"
	"github.com/waggle-os/core/services/sessionstore/transcript"
)

// dirWorkspaces treats every directory with a workspace.json as a workspace.
type dirWorkspaces string

func (d dirWorkspaces) Root() string { return filepath.Join(string(d), "workspaces") }
func (d dirWorkspaces) Exists(id string) bool {
	_, err := os.Stat(filepath.Join(d.Root(), id, "workspace.json"))
	return err == nil
}

func newStore(t testing.TB, dataDir string, workspaces ...string) (*Catalog, *jsonl.Store) {
	t.Helper()
	for _, ws := range workspaces {
		dir := filepath.Join(dataDir, "workspaces", ws)
		if err := os.MkdirAll(filepath.Join(dir, "sessions"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "workspace.json"), []byte(`{"name":"`+ws+`"}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files := jsonl.New(dataDir)
	return New(files, dirWorkspaces(dataDir), Config{Location: time.UTC}), files
}

func line(role, content string) string {
	b, _ := json.Marshal(map[string]string{"role": role, "content": content})
	return string(b)
}

func write(t testing.TB, files *jsonl.Store, ws, id string, mtime time.Time, lines ...string) string {
	t.Helper()
	p, err := files.Path(ws, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !mtime.IsZero() {
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

var fourMessages = []string{
	line("user", "Help me plan the Q2 marketing campaign"),
	line("assistant", "Sure, we decided on social."),
	line("user", "Great, draft it"),
	line("assistant", "Here it is."),
}

func TestLazySummaryKeepsLastActive(t *testing.T) {
	s, files := newStore(t, t.TempDir(), "ws")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p := write(t, files, "ws", "s", at, fourMessages...) // no meta line at all
	got, err := s.List(context.Background(), "ws", false)
	if err != nil || len(got) != 1 {
		t.Fatalf("list: %v %v", got, err)
	}
	if got[0].Summary == nil || !strings.HasPrefix(*got[0].Summary, "Help me plan the Q2 marketing campaign — 4 messages") {
		t.Fatalf("summary %v", got[0].Summary)
	}
	if got[0].LastActive != "2026-01-02T03:04:05.000Z" {
		t.Fatalf("lastActive %s", got[0].LastActive)
	}
	fi, _ := os.Stat(p)
	if !fi.ModTime().Equal(at) {
		t.Fatalf("write-back moved mtime to %v", fi.ModTime())
	}
	data, _ := os.ReadFile(p)
	f := transcript.Parse(data)
	if f.Meta == nil || f.Meta.Summary == nil || *f.Meta.Summary != *got[0].Summary || f.Count != 4 {
		t.Fatalf("file after write-back: %s", data)
	}
	// The next listing is served from the index and agrees.
	again, _ := s.List(context.Background(), "ws", false)
	if again[0].Summary == nil || *again[0].Summary != *got[0].Summary || again[0].LastActive != got[0].LastActive {
		t.Fatalf("second listing %+v", again[0])
	}
}

func TestIndexFollowsChanges(t *testing.T) {
	s, files := newStore(t, t.TempDir(), "ws")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	write(t, files, "ws", "a", at, line("user", "one"))
	write(t, files, "ws", "b", at, line("user", "two"))
	ctx := context.Background()
	if got, _ := s.List(ctx, "ws", false); len(got) != 2 {
		t.Fatalf("got %d", len(got))
	}
	// Store append (explicit invalidation) and a foreign rewrite with the
	// same size and mtime (only the explicit path can see that).
	if err := files.Append("ws", "a", protocol.Message{Role: "user", Content: "three"}); err != nil {
		t.Fatal(err)
	}
	s.Invalidate("ws", "a")
	write(t, files, "ws", "b", at, line("user", "TWO"))
	s.Invalidate("ws", "b")
	if err := files.Delete("ws", "a"); err == nil {
		s.Invalidate("ws", "a")
	}
	write(t, files, "ws", "c", time.Time{}, line("user", "new"))
	got, _ := s.List(ctx, "ws", false)
	titles := map[string]any{}
	for _, g := range got {
		titles[g.ID] = g.Title
	}
	if len(got) != 2 || titles["b"] != "TWO" || titles["c"] != "new" {
		t.Fatalf("after changes: %+v", got)
	}
}

func TestLocateOrder(t *testing.T) {
	s, files := newStore(t, t.TempDir(), "a-ws", "b-ws")
	write(t, files, "b-ws", "shared", time.Time{}, line("user", "b"))
	write(t, files, "a-ws", "shared", time.Time{}, line("user", "a"))
	ref, err := s.Locate(protocol.SessionLocator{Session: "shared"})
	if err != nil || ref.Workspace != "a-ws" {
		t.Fatalf("first match: %+v %v", ref, err)
	}
	if _, err := s.Locate(protocol.SessionLocator{Session: "nope"}); err != ErrSessionNotFound {
		t.Fatalf("missing: %v", err)
	}
}

func TestSearchLimitAfterSort(t *testing.T) {
	s, files := newStore(t, t.TempDir(), "ws")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 30 {
		write(t, files, "ws", fmt.Sprintf("a%02d", i), at.Add(time.Duration(i)*time.Second), line("user", "needle once"))
	}
	write(t, files, "ws", "zz", at, line("user", "needle"), line("assistant", "needle"))
	got, err := s.Search(context.Background(), "ws", "NEEDLE", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].SessionID != "zz" || got[1].SessionID != "a29" || got[2].SessionID != "a28" {
		t.Fatalf("got %+v", got)
	}
	if _, err := s.Search(context.Background(), "nope", "needle", 3); err != ErrWorkspaceNotFound {
		t.Fatalf("unknown ws: %v", err)
	}
	if _, err := s.Search(context.Background(), "ws", "n", 3); err != ErrQueryTooShort {
		t.Fatalf("short: %v", err)
	}
}

// TestListIndexedReadsOnlyWhatChanged checks the index Workspace Now uses
// on every model turn: after the store's own writes it reloads those
// sessions alone (a session it created included), trusts the rest, and
// sees what another process did by the next rescan at the latest.
func TestListIndexedReadsOnlyWhatChanged(t *testing.T) {
	s, files := newStore(t, t.TempDir(), "ws")
	clock := time.Now()
	s.now = func() time.Time { return clock }
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 20 {
		write(t, files, "ws", fmt.Sprintf("s%02d", i), at, line("user", fmt.Sprintf("hello %d", i)))
	}
	ctx := context.Background()
	list := func() map[string]protocol.SessionInfo {
		t.Helper()
		got, err := s.ListIndexed(ctx, "ws", false)
		if err != nil {
			t.Fatal(err)
		}
		by := map[string]protocol.SessionInfo{}
		for _, g := range got {
			by[g.ID] = g
		}
		return by
	}
	if got := list(); len(got) != 20 {
		t.Fatalf("first listing: %d sessions", len(got))
	}
	// Changed behind the store's back, in place: not read again before the
	// rescan (that is what makes the listing cheap).
	write(t, files, "ws", "s03", at, line("user", "changed behind the store's back"))
	// The store's own writes: an append, a rewrite of the same size and
	// mtime (no stat could see it), a new session and a delete.
	if err := files.Append("ws", "s07", protocol.Message{Role: "assistant", Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	s.Invalidate("ws", "s07")
	write(t, files, "ws", "s08", at, line("user", "HELLO 8"))
	s.Invalidate("ws", "s08")
	info, err := s.Create("ws", json.RawMessage(`"fresh"`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(protocol.SessionLocator{Workspace: "ws", Session: "s09"}); err != nil {
		t.Fatal(err)
	}
	got := list()
	if len(got) != 20 || got["s07"].MessageCount != 2 || got["s08"].Title != "HELLO 8" || got[info.ID].Title != "fresh" ||
		got["s09"].ID != "" || got["s03"].Title != "hello 3" {
		t.Fatalf("listing after the store's writes: %+v", got)
	}
	// Another process's new file moves the directory's mtime: it shows at
	// once, from the names alone (the in-place edit still does not).
	write(t, files, "ws", "foreign", time.Time{}, line("user", "dropped in"))
	// File-system timestamps are coarse (a clock tick): make the move
	// visible whatever the tick.
	dir := files.SessionsDir("ws")
	if err := os.Chtimes(dir, time.Time{}, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got = list()
	if len(got) != 21 || got["foreign"].Title != "dropped in" || got["s03"].Title != "hello 3" {
		t.Fatalf("listing after a foreign create: %+v", got)
	}
	// The in-place edit shows after a rescan.
	clock = clock.Add(s.cfg.Rescan)
	got = list()
	if len(got) != 21 || got["s03"].Title != "changed behind the store's back" || got["foreign"].Title != "dropped in" {
		t.Fatalf("listing after a rescan: %+v", got)
	}
	// The checked listing sees a foreign removal at once.
	if err := os.Remove(filepath.Join(files.SessionsDir("ws"), "foreign.jsonl")); err != nil {
		t.Fatal(err)
	}
	if all, _ := s.List(ctx, "ws", false); len(all) != 20 {
		t.Fatalf("checked listing after a foreign delete: %d sessions", len(all))
	}
	if got := list(); got["foreign"].ID != "" {
		t.Fatalf("indexed listing after the checked one still has the removed file")
	}
}
