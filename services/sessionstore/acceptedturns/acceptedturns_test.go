package acceptedturns_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/acceptedturns"
)

func rec(id string, place uint64) protocol.AcceptedTurn {
	return protocol.AcceptedTurn{
		Request:  protocol.TurnRequest{TurnID: id, Workspace: "ws", Session: "s", Message: "hello " + id},
		Place:    place,
		Accepted: 1700000000000 + int64(place),
	}
}

func open(t *testing.T, dir string) *acceptedturns.Journal {
	t.Helper()
	j := acceptedturns.New(dir)
	if err := j.OpenFile(); err != nil {
		t.Fatalf("open journal: %v", err)
	}
	t.Cleanup(func() { _ = j.CloseFile() })
	return j
}

// ids is the journal's open turn ids, sorted.
func ids(j *acceptedturns.Journal) []string {
	var out []string
	for _, r := range j.Open() {
		out = append(out, r.Request.TurnID)
	}
	slices.Sort(out)
	return out
}

func fileLines(t *testing.T, dir string) int {
	t.Helper()
	data, err := os.ReadFile(acceptedturns.Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "\n")
}

// step is one operation of a scripted journal history.
type step struct {
	record string // turn id to record (place from its index)
	close  string // turn id to close
	reopen bool   // close the file and load it again
}

func TestRecordCloseReopen(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
		want  []string
	}{
		{name: "recorded turns stay open across a reopen",
			steps: []step{{record: "a"}, {record: "b"}, {reopen: true}},
			want:  []string{"a", "b"}},
		{name: "a closed turn is gone after a reopen",
			steps: []step{{record: "a"}, {record: "b"}, {close: "a"}, {reopen: true}},
			want:  []string{"b"}},
		{name: "close after a reopen",
			steps: []step{{record: "a"}, {reopen: true}, {close: "a"}, {record: "c"}, {reopen: true}},
			want:  []string{"c"}},
		{name: "a turn recorded again after its close is open again",
			steps: []step{{record: "a"}, {close: "a"}, {record: "a"}, {reopen: true}},
			want:  []string{"a"}},
		{name: "everything closed",
			steps: []step{{record: "a"}, {close: "a"}, {reopen: true}},
			want:  nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			j := open(t, dir)
			for i, s := range tc.steps {
				switch {
				case s.record != "":
					if err := j.Record(rec(s.record, uint64(i+1)), i%2 == 0); err != nil {
						t.Fatal(err)
					}
				case s.close != "":
					if err := j.Close(s.close); err != nil {
						t.Fatal(err)
					}
				case s.reopen:
					if err := j.CloseFile(); err != nil {
						t.Fatal(err)
					}
					j = open(t, dir)
				}
			}
			if got := ids(j); !slices.Equal(got, tc.want) {
				t.Fatalf("open turns = %v, want %v", got, tc.want)
			}
		})
	}
}

// A queued turn is recorded (RecordTurn), then recorded again with its
// user message: it keeps its first place and time, and the second record
// writes nothing.
func TestRecordIsIdempotent(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir)
	first := rec("a", 7)
	if err := j.Record(first, true); err != nil {
		t.Fatal(err)
	}
	again := rec("a", 99)
	again.Accepted = 5
	if err := j.Record(again, false); err != nil {
		t.Fatal(err)
	}
	if n := fileLines(t, dir); n != 1 {
		t.Fatalf("file holds %d lines after a repeated record, want 1", n)
	}
	got, ok := j.Lookup("a")
	if !ok || got.Place != 7 || got.Accepted != first.Accepted || got.Request.Message != first.Request.Message {
		t.Fatalf("record after a repeat = %+v, %v; want the first %+v", got, ok, first)
	}
	if err := j.CloseFile(); err != nil {
		t.Fatal(err)
	}
	j = open(t, dir)
	if got, _ := j.Lookup("a"); got.Place != 7 {
		t.Fatalf("place after reopen = %d, want 7", got.Place)
	}
}

func TestCloseOfUnknownTurnWritesNothing(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir)
	if err := j.Record(rec("a", 1), true); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"nope", "a", "a"} { // the second close of a is unknown too
		if err := j.Close(id); err != nil {
			t.Fatal(err)
		}
	}
	if n := fileLines(t, dir); n != 2 {
		t.Fatalf("file holds %d lines, want 2 (one open, one close)", n)
	}
}

// A crash in the middle of a write leaves a torn last line: loading cuts
// it and keeps every complete record; the next record lands on a clean
// line.
func TestTornTailIsCut(t *testing.T) {
	for _, torn := range []string{`{"op":"open","request":{"turnId":"c","works`, `{"op":"clo`, `x`} {
		t.Run(torn, func(t *testing.T) {
			dir := t.TempDir()
			j := open(t, dir)
			for i, id := range []string{"a", "b"} {
				if err := j.Record(rec(id, uint64(i+1)), true); err != nil {
					t.Fatal(err)
				}
			}
			if err := j.CloseFile(); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(acceptedturns.Path(dir), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString(torn); err != nil {
				t.Fatal(err)
			}
			f.Close()
			j = open(t, dir)
			if got := ids(j); !slices.Equal(got, []string{"a", "b"}) {
				t.Fatalf("open after torn tail = %v", got)
			}
			if err := j.Record(rec("d", 4), true); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(acceptedturns.Path(dir))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(data), torn) || fileLines(t, dir) != 3 {
				t.Fatalf("torn line kept or lines lost:\n%s", data)
			}
			if err := j.CloseFile(); err != nil {
				t.Fatal(err)
			}
			if got := ids(open(t, dir)); !slices.Equal(got, []string{"a", "b", "d"}) {
				t.Fatalf("open after reload = %v", got)
			}
		})
	}
}

// Damaged lines in the middle (not a crash's doing) are skipped; the
// records around them count.
func TestDamagedLinesAreSkipped(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Dir(acceptedturns.Path(dir)), 0o700); err != nil {
		t.Fatal(err)
	}
	content := `{"op":"open","request":{"turnId":"a","workspace":"ws","session":"s","message":"m","autonomy":{}},"place":1,"accepted":1}` + "\n" +
		"not json\n" +
		`{"op":"open"}` + "\n" +
		`{"op":"close","turn":"zzz"}` + "\n" +
		`{"op":"open","request":{"turnId":"b","workspace":"ws","session":"s","message":"m","autonomy":{}},"place":2,"accepted":2}` + "\n"
	if err := os.WriteFile(acceptedturns.Path(dir), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := ids(open(t, dir)); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("open = %v, want [a b]", got)
	}
}

// Compaction rewrites the file with exactly the open turns, whether it
// happens on a close or when the file is loaded, and records keep their
// fields through it.
func TestCompactionKeepsExactlyTheOpenSet(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir)
	var want []string
	// 600 turns recorded and closed (1,200 lines) with 10 left open: the
	// ratio is crossed on a close.
	for i := range 610 {
		id := fmt.Sprintf("t%04d", i)
		if err := j.Record(rec(id, uint64(i+1)), false); err != nil {
			t.Fatal(err)
		}
		if i%61 == 0 {
			want = append(want, id)
			continue
		}
		if err := j.Close(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := fileLines(t, dir); n > 1000 {
		t.Fatalf("file holds %d lines after 1,210 writes with %d open: no compaction", n, len(want))
	}
	if got := ids(j); !slices.Equal(got, want) {
		t.Fatalf("open after compaction = %v, want %v", got, want)
	}
	if err := j.CloseFile(); err != nil {
		t.Fatal(err)
	}
	j = open(t, dir)
	if got := ids(j); !slices.Equal(got, want) {
		t.Fatalf("open after reload = %v, want %v", got, want)
	}
	if got, _ := j.Lookup("t0061"); got.Place != 62 || got.Request.Message != "hello t0061" {
		t.Fatalf("record after compaction = %+v", got)
	}
	// Appends after a compaction land in the new file.
	if err := j.Record(rec("late", 9999), true); err != nil {
		t.Fatal(err)
	}
	if err := j.CloseFile(); err != nil {
		t.Fatal(err)
	}
	if got := ids(open(t, dir)); !slices.Contains(got, "late") || len(got) != len(want)+1 {
		t.Fatalf("open after a record past compaction = %v", got)
	}
}

func TestCompactionAtLoad(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Dir(acceptedturns.Path(dir)), 0o700); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := range 1500 {
		fmt.Fprintf(&b, `{"op":"open","request":{"turnId":"t%d","workspace":"ws","session":"s","message":"m","autonomy":{}},"place":%d,"accepted":1}`+"\n", i, i+1)
		if i != 700 {
			fmt.Fprintf(&b, `{"op":"close","turn":"t%d"}`+"\n", i)
		}
	}
	if err := os.WriteFile(acceptedturns.Path(dir), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	j := open(t, dir)
	if got := ids(j); !slices.Equal(got, []string{"t700"}) {
		t.Fatalf("open = %v", got)
	}
	if n := fileLines(t, dir); n != 1 {
		t.Fatalf("file holds %d lines after load, want 1", n)
	}
}

// The journal's file and directory are the user's alone.
func TestFileIsPrivate(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir)
	if err := j.Record(rec("a", 1), true); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{acceptedturns.Path(dir): 0o600, filepath.Dir(acceptedturns.Path(dir)): 0o700} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Fatalf("%s mode %v, want %v", path, st.Mode().Perm(), want)
		}
	}
}

// Records and closes from many goroutines, with syncs and compactions
// among them, leave exactly the turns that were never closed.
func TestConcurrentUse(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 150 {
				id := fmt.Sprintf("w%d-%d", w, i)
				if err := j.Record(rec(id, uint64(i)), false); err != nil {
					t.Error(err)
					return
				}
				if err := j.Sync(); err != nil {
					t.Error(err)
					return
				}
				if i%50 != 0 {
					if err := j.Close(id); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if err := j.CloseFile(); err != nil {
		t.Fatal(err)
	}
	if n := len(ids(open(t, dir))); n != 8*3 {
		t.Fatalf("%d open after reload, want 24", n)
	}
}

func TestUseBeforeOpenFails(t *testing.T) {
	dir := t.TempDir()
	j := acceptedturns.New(dir)
	if err := j.Record(rec("a", 1), true); err == nil {
		t.Fatal("record before OpenFile succeeded")
	}
	if _, err := os.Stat(acceptedturns.Path(dir)); err == nil {
		t.Fatal("constructor created the file")
	}
}

// sessionFile is a session JSONL file in dir, open for appends, closed
// when b ends.
func sessionFile(b *testing.B, dir string) *os.File {
	f, err := os.OpenFile(filepath.Join(dir, "session.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return f
}

// userLine is a user message's line as the store writes it.
var userLine = []byte(`{"role":"user","content":"hello","timestamp":"2026-01-01T00:00:00.000Z","turnId":"x","appendKey":"x/user"}` + "\n")

// writeLine appends userLine to the session file and fsyncs it.
func writeLine(b *testing.B, session *os.File) {
	if _, err := session.Write(userLine); err != nil {
		b.Fatal(err)
	}
	if err := session.Sync(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSyncAfterLineFsync measures what the store's append of a turn's
// user message adds: the journal's record (no fsync), the session line's
// own write and fsync, then the journal's Sync. sync-ns/op is the Sync
// alone; line-fsync-ns/op the session line's fsync, for scale.
func BenchmarkSyncAfterLineFsync(b *testing.B) {
	dir := b.TempDir()
	j := acceptedturns.New(dir)
	if err := j.OpenFile(); err != nil {
		b.Fatal(err)
	}
	defer j.CloseFile()
	session := sessionFile(b, dir)
	var syncNs, lineNs time.Duration
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("turn-%d", i)
		if err := j.Record(rec(id, uint64(i)), false); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		writeLine(b, session)
		t1 := time.Now()
		if err := j.Sync(); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		lineNs += t1.Sub(t0)
		syncNs += t2.Sub(t1)
		if err := j.Close(id); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(syncNs.Nanoseconds())/float64(b.N), "sync-ns/op")
	b.ReportMetric(float64(lineNs.Nanoseconds())/float64(b.N), "line-fsync-ns/op")
}

// BenchmarkSyncBesideLineFsync is BenchmarkSyncAfterLineFsync with the
// journal's Sync run beside the session line's write and fsync instead of
// after it.
func BenchmarkSyncBesideLineFsync(b *testing.B) {
	dir := b.TempDir()
	j := acceptedturns.New(dir)
	if err := j.OpenFile(); err != nil {
		b.Fatal(err)
	}
	defer j.CloseFile()
	session := sessionFile(b, dir)
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("turn-%d", i)
		if err := j.Record(rec(id, uint64(i)), false); err != nil {
			b.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- j.Sync() }()
		writeLine(b, session)
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		if err := j.Close(id); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLineFsyncAlone is the session line's write and fsync alone:
// the baseline of the two above.
func BenchmarkLineFsyncAlone(b *testing.B) {
	session := sessionFile(b, b.TempDir())
	for b.Loop() {
		writeLine(b, session)
	}
}
