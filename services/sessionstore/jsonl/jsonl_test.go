package jsonl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

func lines(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("bad line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func TestAppendCreatesMetaFirst(t *testing.T) {
	s := New(t.TempDir())
	for _, c := range []string{"hi <b>&", "there"} {
		if err := s.Append("ws-1", "sess-1", protocol.Message{Role: "user", Content: c, Timestamp: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	data, _, err := s.Read("ws-1", "sess-1")
	if err != nil {
		t.Fatal(err)
	}
	ls := lines(t, data)
	if len(ls) != 3 || ls[0]["type"] != "meta" || ls[0]["title"] != nil || ls[0]["created"] == "" {
		t.Fatalf("lines = %v", ls)
	}
	if !bytes.Contains(data, []byte(`"hi <b>&"`)) {
		t.Fatalf("HTML escaped: %s", data)
	}
	if ls[2]["content"] != "there" {
		t.Fatalf("order: %v", ls)
	}
}

func TestTornTailRepairedOnNextAppend(t *testing.T) {
	s := New(t.TempDir())
	if err := s.Append("w", "s", protocol.Message{Role: "user", Content: "one"}); err != nil {
		t.Fatal(err)
	}
	path, _ := s.Path("w", "s")
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"role":"assistant","content":"tor`)
	f.Close()
	if err := s.Append("w", "s", protocol.Message{Role: "user", Content: "two"}); err != nil {
		t.Fatal(err)
	}
	data, _, _ := s.Read("w", "s")
	ls := lines(t, data)
	if len(ls) != 3 || ls[1]["content"] != "one" || ls[2]["content"] != "two" {
		t.Fatalf("after repair: %s", data)
	}
}

func TestTornMetaOnly(t *testing.T) {
	s := New(t.TempDir())
	path, _ := s.Path("w", "s")
	os.MkdirAll(s.SessionsDir("w"), 0o755)
	os.WriteFile(path, []byte(`{"type":"me`), 0o644)
	if err := s.Append("w", "s", protocol.Message{Role: "user", Content: "x"}); err != nil {
		t.Fatal(err)
	}
	data, _, _ := s.Read("w", "s")
	ls := lines(t, data)
	if len(ls) != 2 || ls[0]["type"] != "meta" {
		t.Fatalf("got %s", data)
	}
}

func TestPathRejectsUnsafeIDs(t *testing.T) {
	s := New(t.TempDir())
	for _, id := range []string{"../x", "a/b", "", "a.b", strings.Repeat("a", 129)} {
		if err := s.Append("w", id, protocol.Message{}); err == nil {
			t.Errorf("Append(%q) accepted", id)
		}
	}
}

func TestConcurrentAppendsAndRewritesLoseNothing(t *testing.T) {
	s := New(t.TempDir())
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := s.Append("w", "s", protocol.Message{Role: "user", Content: fmt.Sprintf("%d-%d", w, i)}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				err := s.Rewrite("w", "s", false, func(data []byte) ([]byte, error) {
					// A rename-like rewrite: change the meta line, keep the rest.
					first, rest, _ := bytes.Cut(data, []byte("\n"))
					var m map[string]any
					if json.Unmarshal(first, &m) != nil {
						return nil, nil
					}
					m["title"] = fmt.Sprintf("t%d-%d", r, i)
					b, _ := json.Marshal(m)
					return append(append(b, '\n'), rest...), nil
				})
				if err != nil && !errors.Is(err, ErrNotFound) {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	data, _, _ := s.Read("w", "s")
	ls := lines(t, data)
	if got := len(ls) - 1; got != writers*each {
		t.Fatalf("message lines = %d, want %d", got, writers*each)
	}
	seen := map[string]bool{}
	for _, l := range ls[1:] {
		seen[l["content"].(string)] = true
	}
	if len(seen) != writers*each {
		t.Fatalf("distinct = %d", len(seen))
	}
}

func TestDelete(t *testing.T) {
	s := New(t.TempDir())
	if err := s.Delete("w", "s"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete missing: %v", err)
	}
	s.Append("w", "s", protocol.Message{Role: "user", Content: "x"})
	if err := s.Delete("w", "s"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Read("w", "s"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read after delete: %v", err)
	}
}

func TestRewriteQuietKeepsMtime(t *testing.T) {
	s := New(t.TempDir())
	if err := s.Append("ws", "s", protocol.Message{Role: "user", Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	path, _ := s.Path("ws", "s")
	old := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	st, wrote, err := s.RewriteQuiet("ws", "s", func(data []byte) ([]byte, error) {
		return append(data, "{\"role\":\"user\",\"content\":\"x\"}\n"...), nil
	})
	if err != nil || !wrote {
		t.Fatalf("rewrite: %v %v", wrote, err)
	}
	fi, _ := os.Stat(path)
	if !fi.ModTime().Equal(old) || !st.ModTime.Equal(old) || st.Size != fi.Size() {
		t.Fatalf("mtime %v (state %+v), want %v size %d", fi.ModTime(), st, old, fi.Size())
	}
	// A nil result writes nothing.
	if _, wrote, err := s.RewriteQuiet("ws", "s", func([]byte) ([]byte, error) { return nil, nil }); wrote || err != nil {
		t.Fatalf("nil rewrite wrote=%v err=%v", wrote, err)
	}
	if _, _, err := s.RewriteQuiet("ws", "missing", func(d []byte) ([]byte, error) { return d, nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

// TestAppendKeyedAfterReload: the keys are read back from the file, so a
// resend reaching a restarted store (or one whose file another write
// changed) still finds the first send's line.
func TestAppendKeyedAfterReload(t *testing.T) {
	dir := t.TempDir()
	first := New(dir)
	msg := func(ts string) any {
		return LineOf(protocol.AppendRequest{Message: &protocol.Message{Role: "user", Content: "hi", Timestamp: ts}, Key: "t1/user"})
	}
	if _, dup, err := first.AppendKeyed("w", "s", "t1/user", "ts1", msg("ts1")); err != nil || dup {
		t.Fatalf("first append: dup %v, %v", dup, err)
	}
	// A line without a key from another writer in between.
	if err := first.Append("w", "s", protocol.Message{Role: "assistant", Content: "x"}); err != nil {
		t.Fatal(err)
	}
	if ts, dup, err := first.AppendKeyed("w", "s", "t1/user", "ts2", msg("ts2")); err != nil || !dup || ts != "ts1" {
		t.Fatalf("resend after another write: %q dup %v, %v", ts, dup, err)
	}
	restarted := New(dir)
	if ts, dup, err := restarted.AppendKeyed("w", "s", "t1/user", "ts3", msg("ts3")); err != nil || !dup || ts != "ts1" {
		t.Fatalf("resend to a restarted store: %q dup %v, %v", ts, dup, err)
	}
	data, _, err := restarted.Read("w", "s")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte(`"appendKey":"t1/user"`)); n != 1 {
		t.Fatalf("%d lines carry the key, want 1:\n%s", n, data)
	}
}
