package jsonl

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/tmpfstest"
)

// An append that hits a full disk fails with ENOSPC and leaves the file
// exactly as it was: no torn line, nothing lost; once space is freed the
// next append lands after the last good line.
func TestAppendOnFullDiskLeavesFileIntact(t *testing.T) {
	dir := tmpfstest.Mount(t, "1m")
	s := New(dir)
	if err := s.Append("ws", "s1", protocol.Message{Role: "user", Content: "kept", Timestamp: "t"}); err != nil {
		t.Fatal(err)
	}
	before, _, err := s.Read("ws", "s1")
	if err != nil {
		t.Fatal(err)
	}
	fill := tmpfstest.Fill(t, dir)
	big := strings.Repeat("x", 40<<10)
	err = s.Append("ws", "s1", protocol.Message{Role: "assistant", Content: big, Timestamp: "t"})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v, want ENOSPC", err)
	}
	after, _, err := s.Read("ws", "s1")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatalf("file changed by a failed append:\nbefore %q\nafter  %q", before, after)
	}
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	if err := s.Append("ws", "s1", protocol.Message{Role: "assistant", Content: big, Timestamp: "t"}); err != nil {
		t.Fatalf("append after space was freed: %v", err)
	}
	data, _, _ := s.Read("ws", "s1")
	if ls := lines(t, data); len(ls) != 3 || ls[1]["content"] != "kept" || ls[2]["content"] != big {
		t.Fatalf("after recovery: %d lines", len(ls))
	}
}
