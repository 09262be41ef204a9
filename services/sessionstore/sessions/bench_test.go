package sessions

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

// The 10,000-session workspace is built once per test binary: 10,000 files
// of a meta line (with summary) and 12 messages of 100–400 bytes (about
// 3.5 KB each, 35 MB in all). One session in 100 mentions "kubernetes";
// every session mentions "the".
const benchSessions = 10_000

var (
	benchOnce sync.Once
	benchDir  string
	benchErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

func benchWorkspace(b *testing.B) string {
	b.Helper()
	benchOnce.Do(func() {
		benchDir, benchErr = os.MkdirTemp("", "sessions-bench-*")
		if benchErr != nil {
			return
		}
		dir := filepath.Join(benchDir, "workspaces", "bench", "sessions")
		if benchErr = os.MkdirAll(dir, 0o755); benchErr != nil {
			return
		}
		benchErr = os.WriteFile(filepath.Join(benchDir, "workspaces", "bench", "workspace.json"), []byte(`{"name":"bench"}`), 0o644)
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		filler := "Here is the plan we agreed on, with owners and dates for each milestone of the migration. "
		for i := range benchSessions {
			var sb strings.Builder
			fmt.Fprintf(&sb, `{"type":"meta","title":"Session %d","summary":"Planning session %d — 12 messages","created":"2026-01-01T00:00:00.000Z"}`+"\n", i, i)
			for j := range 12 {
				role, content := "user", fmt.Sprintf("Question %d about the rollout of service %d?", j, i)
				if j%2 == 1 {
					role, content = "assistant", strings.Repeat(filler, 1+j%4)
				}
				if j == 4 && i%100 == 0 {
					content += " We run it on Kubernetes."
				}
				fmt.Fprintf(&sb, `{"role":%q,"content":%q,"timestamp":"2026-01-01T00:%02d:00.000Z"}`+"\n", role, content, j)
			}
			p := filepath.Join(dir, fmt.Sprintf("session-%05d.jsonl", i))
			if benchErr = os.WriteFile(p, []byte(sb.String()), 0o644); benchErr != nil {
				return
			}
			at := base.Add(time.Duration(i) * time.Minute)
			if benchErr = os.Chtimes(p, at, at); benchErr != nil {
				return
			}
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchDir
}

// BenchmarkList10k is a listing served from a warm index (every later
// listing of a workspace): one stat per file, no parsing.
func BenchmarkList10k(b *testing.B) {
	s, _ := newStore(b, benchWorkspace(b))
	ctx := context.Background()
	if got, err := s.List(ctx, "bench", false); err != nil || len(got) != benchSessions {
		b.Fatalf("warm-up: %d %v", len(got), err)
	}
	for b.Loop() {
		if _, err := s.List(ctx, "bench", false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListIndexed10k is Workspace Now's listing (on every model
// turn) after one session was written: the index, one stat of the
// directory and that session's file.
func BenchmarkListIndexed10k(b *testing.B) {
	s, _ := newStore(b, benchWorkspace(b))
	ctx := context.Background()
	if got, err := s.List(ctx, "bench", false); err != nil || len(got) != benchSessions {
		b.Fatalf("warm-up: %d %v", len(got), err)
	}
	for b.Loop() {
		s.Invalidate("bench", "session-05000")
		if got, err := s.ListIndexed(ctx, "bench", false); err != nil || len(got) != benchSessions {
			b.Fatalf("%d %v", len(got), err)
		}
	}
}

// BenchmarkList10kCold is the first listing after a start: every file is
// read and parsed.
func BenchmarkList10kCold(b *testing.B) {
	dir := benchWorkspace(b)
	ctx := context.Background()
	for b.Loop() {
		s, _ := newStore(b, dir)
		if got, err := s.List(ctx, "bench", false); err != nil || len(got) != benchSessions {
			b.Fatalf("%d %v", len(got), err)
		}
	}
}

// BenchmarkSearch10k searches for a term 1 session in 100 contains.
func BenchmarkSearch10k(b *testing.B) {
	s, _ := newStore(b, benchWorkspace(b))
	for b.Loop() {
		got, err := s.Search(context.Background(), "bench", "kubernetes", 50)
		if err != nil || len(got) != 50 {
			b.Fatalf("%d %v", len(got), err)
		}
	}
}

// BenchmarkSearch10kEverywhere searches for a term every session contains
// (the worst case: every file is parsed).
func BenchmarkSearch10kEverywhere(b *testing.B) {
	s, _ := newStore(b, benchWorkspace(b))
	for b.Loop() {
		got, err := s.Search(context.Background(), "bench", "rollout", 20)
		if err != nil || len(got) != 20 {
			b.Fatalf("%d %v", len(got), err)
		}
	}
}

// BenchmarkExport10k exports one session of the 10,000-session workspace.
func BenchmarkExport10k(b *testing.B) {
	s, _ := newStore(b, benchWorkspace(b))
	ref := protocol.SessionRef{Workspace: "bench", Session: "session-05000"}
	for b.Loop() {
		md, err := s.Export(ref)
		if err != nil || !strings.HasPrefix(md, "# Session 5000") {
			b.Fatalf("%q %v", md[:min(len(md), 40)], err)
		}
	}
}
