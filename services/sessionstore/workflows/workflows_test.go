package workflows

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/libs/protocol"
)

func TestSimilarity(t *testing.T) {
	cases := []struct {
		a, b []string
		want float64
	}{
		{[]string{"a", "b", "c"}, []string{"a", "b", "c"}, 1},
		{[]string{"a", "b", "c"}, []string{"x", "y", "z"}, 0},
		{nil, []string{"a"}, 0},
		// sets {a,b,c} vs {a,b,d}: 2/4 × 0.4; LCS ab = 2/3 × 0.6
		{[]string{"a", "b", "c"}, []string{"a", "b", "d"}, 0.2 + 0.4},
		// same set, reversed order: 1 × 0.4 + LCS 1/3 × 0.6
		{[]string{"a", "b", "c"}, []string{"c", "b", "a"}, 0.4 + 0.2},
		// longer sequence: sets equal, LCS 3 of 4
		{[]string{"a", "b", "c"}, []string{"a", "b", "b", "c"}, 0.4 + 0.45},
	}
	for _, tc := range cases {
		if got := Similarity(tc.a, tc.b); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Similarity(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestDetect(t *testing.T) {
	seq := []string{"read_file", "edit_file", "bash"}
	cases := []struct {
		name    string
		seq     []string
		earlier [][]string
		found   bool
		n       int
	}{
		{"two earlier matches", seq, [][]string{seq, {"read_file", "edit_file", "bash", "bash"}}, true, 3},
		{"one match is not enough", seq, [][]string{seq, {"x", "y", "z"}}, false, 0},
		{"short sequences never count", seq, [][]string{{"read_file", "edit_file"}, {"read_file", "edit_file"}, seq}, false, 0},
		{"a short turn is no pattern", []string{"read_file", "edit_file"}, [][]string{{"read_file", "edit_file"}, {"read_file", "edit_file"}}, false, 0},
		{"reversed order is exactly 0.6", seq, [][]string{{"bash", "edit_file", "read_file"}, {"bash", "edit_file", "read_file"}}, true, 3},
		{"below 0.6", seq, [][]string{{"bash", "x", "read_file"}, {"bash", "x", "read_file"}}, false, 0},
	}
	for _, tc := range cases {
		_, n, found := Detect(tc.seq, tc.earlier)
		if found != tc.found || n != tc.n {
			t.Errorf("%s: found %v n %d, want %v %d", tc.name, found, n, tc.found, tc.n)
		}
	}
}

func TestNewPattern(t *testing.T) {
	p := NewPattern([]string{"web_search", "web_fetch", "web_search", "save_memory", "write_file"})
	want := protocol.WorkflowPattern{
		Name:            "web_search-then-web_fetch-then-save_memory",
		Description:     "Repeated workflow using: web_search, web_fetch, save_memory, write_file",
		TriggerPatterns: []string{},
		Steps:           []string{"Step 1: Use web_search", "Step 2: Use web_fetch", "Step 3: Use web_search", "Step 4: Use save_memory", "Step 5: Use write_file"},
		Tools:           []string{"web_search", "web_fetch", "save_memory", "write_file"},
		Category:        "research",
	}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("pattern %+v\nwant    %+v", p, want)
	}
	for tools, cat := range map[string]string{"git_diff": "coding", "search_memory": "knowledge", "generate_docx": "writing", "create_plan": "planning", "bash": "general"} {
		if got := NewPattern([]string{tools}).Category; got != cat {
			t.Errorf("category of %s = %s, want %s", tools, got, cat)
		}
	}
}

// implementations runs fn against the file store and the PostgreSQL one.
func implementations(t *testing.T, fn func(t *testing.T, open func() *Patterns)) {
	t.Run("files", func(t *testing.T) {
		dir := t.TempDir()
		fn(t, func() *Patterns { return mustOpen(t, Config{DataDir: dir}) })
	})
	t.Run("postgres", func(t *testing.T) {
		pool, err := pgxpool.New(context.Background(), pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		fn(t, func() *Patterns { return mustOpen(t, Config{Pool: pool}) })
	})
}

func mustOpen(t *testing.T, cfg Config) *Patterns {
	t.Helper()
	cfg.Now = func() time.Time { return time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC) }
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStoreReportsEachPatternOnce(t *testing.T) {
	implementations(t, func(t *testing.T, open func() *Patterns) {
		ctx := context.Background()
		s := open()
		seq := []string{"list_files", "read_file", "edit_file"}
		var reported []int
		for i := range 5 {
			st := s
			if i == 3 {
				st = open() // a restarted store remembers what it reported
			}
			rep, err := st.Observe(ctx, protocol.WorkflowObserveRequest{Workspace: "ws", Session: "s", Tools: seq})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Pattern != nil {
				reported = append(reported, i+1)
			}
		}
		if !reflect.DeepEqual(reported, []int{3}) {
			t.Errorf("reported on turns %v, want [3]", reported)
		}
		// Another workspace has its own history.
		if rep, err := s.Observe(ctx, protocol.WorkflowObserveRequest{Workspace: "other", Tools: seq}); err != nil || rep.Pattern != nil {
			t.Errorf("other workspace: %+v %v", rep, err)
		}
		list, err := open().List(ctx, "ws")
		if err != nil || len(list.Workflows) != 1 || list.Workflows[0].Name != "list_files-then-read_file-then-edit_file" ||
			list.Workflows[0].Occurrences != 3 || list.Workflows[0].DetectedAt != "2026-05-01T12:00:00.000Z" {
			t.Errorf("list %+v %v", list, err)
		}
		if empty, err := s.List(ctx, "none"); err != nil || empty.Workflows == nil || len(empty.Workflows) != 0 {
			t.Errorf("empty list %+v %v", empty, err)
		}
	})
}

func TestStoreConcurrentObservesAllRecorded(t *testing.T) {
	implementations(t, func(t *testing.T, open func() *Patterns) {
		ctx := context.Background()
		s := open()
		seq := []string{"a_tool", "b_tool", "c_tool"}
		var wg sync.WaitGroup
		var mu sync.Mutex
		patterns := 0
		for range 8 {
			wg.Go(func() {
				rep, err := s.Observe(ctx, protocol.WorkflowObserveRequest{Workspace: "ws", Tools: seq})
				if err != nil {
					t.Error(err)
				}
				if rep.Pattern != nil {
					mu.Lock()
					patterns++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if patterns != 1 {
			t.Errorf("%d reports of one pattern, want 1", patterns)
		}
	})
}

func TestObserveRejects(t *testing.T) {
	s := mustOpen(t, Config{DataDir: t.TempDir()})
	long := make([]string, maxTools+1)
	for i := range long {
		long[i] = "t"
	}
	for _, r := range []protocol.WorkflowObserveRequest{
		{Workspace: "../x", Tools: []string{"a", "b", "c"}},
		{Workspace: "ws", Session: "a/b", Tools: []string{"a", "b", "c"}},
		{Workspace: "ws", Tools: long},
		{Workspace: "ws", Tools: []string{"a", "", "c"}},
	} {
		if _, err := s.Observe(context.Background(), r); protocol.KindOf(err) != protocol.Invalid {
			t.Errorf("Observe(%+v) = %v, want 400", r, err)
		}
	}
}

// TestPersonalStateMovesOutOfPostgres: split by workspace, a personal
// workspace's state an older version kept in PostgreSQL moves into its
// file at open (its row goes), a team workspace's stays, and one of a
// workspace that is neither (deleted) is left alone.
func TestPersonalStateMovesOutOfPostgres(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ctx := context.Background()
	seq := []string{"read_file", "search_files", "write_file"}
	old := mustOpen(t, Config{Pool: pool})
	for _, ws := range []string{"mine", "ours", "gone"} {
		for i := range 3 {
			if _, err := old.Observe(ctx, protocol.WorkflowObserveRequest{Workspace: ws, Session: fmt.Sprint("s", i), Tools: seq}); err != nil {
				t.Fatal(err)
			}
		}
	}
	dir := t.TempDir()
	isTeam := func(_ context.Context, ws string) (bool, error) { return ws == "ours", nil }
	personal := func(_ context.Context, ws string) (bool, error) { return ws == "mine", nil }
	split := mustOpen(t, Config{DataDir: dir, Pool: pool, IsTeam: isTeam, Personal: personal})
	for _, ws := range []string{"mine", "ours"} {
		if l, err := split.List(ctx, ws); err != nil || len(l.Workflows) != 1 {
			t.Errorf("%s after the move: %+v %v", ws, l, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "workspaces", "mine", FileName)); err != nil {
		t.Errorf("the personal workspace's file: %v", err)
	}
	r, _ := pool.Query(ctx, `SELECT workspace FROM workflow_state ORDER BY workspace`)
	rows, err := pgx.CollectRows(r, pgx.RowTo[string])
	if err != nil || fmt.Sprint(rows) != "[gone ours]" {
		t.Errorf("rows after the move = %v %v, want [gone ours]", rows, err)
	}
	// Again: nothing moves, the file is read.
	again := mustOpen(t, Config{DataDir: dir, Pool: pool, IsTeam: isTeam, Personal: personal})
	if l, err := again.List(ctx, "mine"); err != nil || len(l.Workflows) != 1 {
		t.Errorf("mine after a second open: %+v %v", l, err)
	}
}
