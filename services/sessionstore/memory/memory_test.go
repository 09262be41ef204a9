package memory

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

// clockStore returns a store whose clock advances a second per save, so
// recency is observable.
func clockStore(t *testing.T) *Store {
	s := New(t.TempDir())
	now := time.Date(2026, 3, 19, 10, 0, 0, 0, time.UTC)
	s.now = func() time.Time { now = now.Add(time.Second); return now }
	return s
}

func contents(ms []protocol.Memory) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Content
	}
	return out
}

func TestSearchRanking(t *testing.T) {
	s := clockStore(t)
	for _, c := range []string{
		"We use PostgreSQL for the billing database",
		"The user prefers dark mode",
		"Billing runs on the first of the month",
		"Deploys happen on Fridays",
		"database backups are nightly",
	} {
		if _, err := s.Save("ws", c, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Save("ws", "Team lunch", []string{"Billing"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		query string
		limit int
		want  []string
	}{
		{"billing DATABASE", 0, []string{
			"We use PostgreSQL for the billing database", // both terms
			"Team lunch", // one term (tag), newest first
			"database backups are nightly",
			"Billing runs on the first of the month",
		}},
		{"billing", 2, []string{"Team lunch", "Billing runs on the first of the month"}},
		{"nothing-matches here", 0, []string{}},
		{"  ", 2, []string{"Team lunch", "database backups are nightly"}}, // no terms: most recent
		{"mode", 0, []string{"The user prefers dark mode"}},
	}
	for _, tt := range tests {
		got, err := s.Search("ws", tt.query, tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(contents(got), tt.want) {
			t.Errorf("Search(%q, %d) = %q, want %q", tt.query, tt.limit, contents(got), tt.want)
		}
	}
}

func TestDefaultLimitAndIsolation(t *testing.T) {
	s := clockStore(t)
	for i := range 8 {
		if _, err := s.Save("a", "note about cats "+strings.Repeat("!", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := s.Search("a", "cats", 0)
	if len(got) != DefaultLimit {
		t.Fatalf("default limit: got %d results", len(got))
	}
	if other, _ := s.Search("b", "cats", 0); len(other) != 0 {
		t.Fatalf("workspace b sees %d memories of a", len(other))
	}
}

func TestDurableAcrossStoresAndTornTail(t *testing.T) {
	dir := t.TempDir()
	s := New(dir)
	m, err := s.Save("ws", "remember the milk", []string{"shopping"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.ID, "mem-") || m.Timestamp == "" {
		t.Fatalf("saved memory %+v", m)
	}
	// A crash mid-append leaves a torn line; the next save must survive it.
	path := filepath.Join(dir, "workspaces", "ws", "memories.jsonl")
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"id":"mem-torn","content":"hal`)
	f.Close()
	s2 := New(dir)
	if _, err := s2.Save("ws", "remember the eggs", nil); err != nil {
		t.Fatal(err)
	}
	got, _ := New(dir).Search("ws", "remember", 10)
	if want := []string{"remember the eggs", "remember the milk"}; !slices.Equal(contents(got), want) {
		t.Fatalf("after reopen got %q, want %q", contents(got), want)
	}
	if got[1].ID != m.ID || !slices.Equal(got[1].Tags, []string{"shopping"}) {
		t.Fatalf("reloaded memory %+v, want id %s with tags", got[1], m.ID)
	}
}

func TestExternalChangeIsSeen(t *testing.T) {
	dir := t.TempDir()
	s := New(dir)
	if _, err := s.Save("ws", "first fact", nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Search("ws", "fact", 0); len(got) != 1 {
		t.Fatalf("got %d", len(got))
	}
	// Another store instance (e.g. before a restart) appends.
	if _, err := New(dir).Save("ws", "second fact", nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Search("ws", "fact", 0); len(got) != 2 {
		t.Fatalf("cache missed an external append: got %d", len(got))
	}
}

func TestValidation(t *testing.T) {
	s := New(t.TempDir())
	for _, tc := range []struct{ ws, content string }{{"../x", "c"}, {"", "c"}, {"ws", "  "}} {
		_, err := s.Save(tc.ws, tc.content, nil)
		if e := protocol.AsError(err); e == nil || e.Status != 400 {
			t.Errorf("Save(%q,%q) err = %v, want 400", tc.ws, tc.content, err)
		}
	}
	if _, err := s.Search("a/b", "x", 0); protocol.StatusOf(err) != 400 {
		t.Errorf("Search bad ws: %v", err)
	}
}

func TestConcurrentSaves(t *testing.T) {
	dir := t.TempDir()
	s := New(dir)
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			if _, err := s.Save("ws", "concurrent item "+string(rune('a'+i%26)), nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, _ := New(dir).Search("ws", "item", MaxLimit)
	if len(got) != 40 {
		t.Fatalf("persisted %d of 40", len(got))
	}
}
