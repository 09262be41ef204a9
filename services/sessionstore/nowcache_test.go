package sessionstore

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/frames"
	"github.com/waggle-os/core/services/sessionstore/workspaces"
)

// countingFrames counts the frame listings Workspace Now makes.
type countingFrames struct {
	*frames.JSONL
	recent atomic.Int32
}

func (c *countingFrames) Recent(ctx context.Context, m frames.Mind, opt frames.ListOptions) ([]frames.Frame, error) {
	c.recent.Add(1)
	return c.JSONL.Recent(ctx, m, opt)
}

// nowFixture is a store with one workspace of 10 sessions of 20 messages
// and 60 workspace frames: a workspace in daily use.
func nowFixture(tb testing.TB) (contextHandlers, workspaces.Doc, string) {
	tb.Helper()
	ctx := context.Background()
	dir := tb.TempDir()
	store := NewFiles(dir, nil, slog.New(slog.DiscardHandler))
	backend := &countingFrames{JSONL: frames.NewJSONL(dir)}
	minds := frames.New(frames.Config{Backend: backend, Logger: slog.New(slog.DiscardHandler)})
	s := &Service{store: store, minds: minds, frames: backend, log: slog.New(slog.DiscardHandler)}
	doc, err := store.CreateWorkspace(ctx, workspaces.Doc{"name": []byte(`"Acme"`)}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	ws := doc.Workspace().ID
	base := time.Now().Add(-time.Hour)
	for i := range 10 {
		for j := range 20 {
			base = base.Add(time.Second)
			msg := protocol.Message{Role: "user", Content: fmt.Sprintf("We need to ship feature %d step %d by Friday", i, j), Timestamp: protocol.Timestamp(base)}
			if j%2 == 1 {
				msg.Role = "assistant"
			}
			if _, err := store.Append(ctx, protocol.AppendRequest{SessionRef: protocol.SessionRef{Workspace: ws, Session: fmt.Sprint("s", i)}, Message: &msg}); err != nil {
				tb.Fatal(err)
			}
		}
	}
	for i := range 60 {
		imp := protocol.ImportanceNormal
		if i%5 == 0 {
			imp = protocol.ImportanceImportant
		}
		if _, err := minds.Add(ctx, protocol.MemoryAddRequest{MemoryOwner: protocol.MemoryOwner{Workspace: ws}, Content: fmt.Sprintf("Decision %d: we use plan %d for the launch", i, i), Importance: imp}); err != nil {
			tb.Fatal(err)
		}
	}
	return contextHandlers{s: s, now: time.Now}, doc, ws
}

// BenchmarkWorkspaceNow is one briefing of a workspace in daily use, as a
// turn asks for it (its own session left out).
func BenchmarkWorkspaceNow(b *testing.B) {
	h, doc, ws := nowFixture(b)
	ctx := context.Background()
	for b.Loop() {
		if _, err := h.nowOf(ctx, doc, protocol.WorkspaceNowRequest{Workspace: ws, ExceptSession: "s0"}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestWorkspaceNowCacheSeesEveryChange: a turn's Workspace Now is reused
// while nothing it is built from changed (no frames are listed again, nor
// when only a session changed),
// and after every kind of change — a frame added, edited, re-ranked by
// the lifecycle worker, a personal frame, a message, a renamed session, a
// deleted one, the workspace's record, a day later — it equals a
// briefing built from scratch.
func TestWorkspaceNowCacheSeesEveryChange(t *testing.T) {
	ctx := context.Background()
	h, doc, ws := nowFixture(t)
	backend := h.s.frames.(*countingFrames)
	clock := time.Now()
	h.now = func() time.Time { return clock }
	req := protocol.WorkspaceNowRequest{Workspace: ws, ExceptSession: "s0"}
	check := func(what string) {
		t.Helper()
		d, err := h.s.getWorkspace(ctx, ws)
		if err != nil {
			t.Fatal(err)
		}
		got, err := h.nowOf(ctx, d, req)
		if err != nil {
			t.Fatal(err)
		}
		fresh := contextHandlers{s: &Service{store: h.s.store, minds: h.s.minds, log: h.s.log}, now: h.now}
		want, err := fresh.nowOf(ctx, d, req)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the briefing is stale:\n got %+v\nwant %+v", what, got, want)
		}
	}
	check("first")
	backend.recent.Store(0)
	if _, err := h.nowOf(ctx, doc, req); err != nil {
		t.Fatal(err)
	}
	if n := backend.recent.Load(); n != 0 {
		t.Errorf("nothing changed, yet the frames were listed %d times", n)
	}

	owner := protocol.MemoryOwner{Workspace: ws}
	added, err := h.s.minds.Add(ctx, protocol.MemoryAddRequest{MemoryOwner: owner, Content: "Decision: the launch moves to May", Importance: protocol.ImportanceCritical})
	if err != nil {
		t.Fatal(err)
	}
	check("a frame added")
	if _, err := h.s.minds.Update(ctx, protocol.MemoryUpdateRequest{MemoryFrameRequest: protocol.MemoryFrameRequest{MemoryOwner: owner, ID: added.Frame.ID},
		Content: "Decision: the launch moves to June"}); err != nil {
		t.Fatal(err)
	}
	check("a frame edited")
	if _, err := backend.SetImportance(ctx, frames.Mind{Kind: frames.KindWorkspace, ID: ws}, added.Frame.ID, protocol.ImportanceTemporary); err != nil {
		t.Fatal(err)
	}
	check("a frame re-ranked by the lifecycle")
	if _, err := h.s.minds.Add(ctx, protocol.MemoryAddRequest{Content: "I prefer short answers", Personal: true}); err != nil {
		t.Fatal(err)
	}
	check("a personal frame added")
	msg := protocol.Message{Role: "user", Content: "We need to call the printer about the posters", Timestamp: protocol.Timestamp(clock)}
	if _, err := h.s.store.Append(ctx, protocol.AppendRequest{SessionRef: protocol.SessionRef{Workspace: ws, Session: "s7"}, Message: &msg}); err != nil {
		t.Fatal(err)
	}
	backend.recent.Store(0)
	if _, err := h.nowOf(ctx, doc, req); err != nil {
		t.Fatal(err)
	}
	if n := backend.recent.Load(); n != 0 {
		t.Errorf("only a session changed, yet the frames were listed %d times", n)
	}
	check("a message added")
	if err := h.s.store.RenameSession(ctx, protocol.SessionRef{Workspace: ws, Session: "s3"}, "Poster planning"); err != nil {
		t.Fatal(err)
	}
	check("a session renamed")
	if err := h.s.store.DeleteSession(ctx, protocol.SessionRef{Workspace: ws, Session: "s5"}); err != nil {
		t.Fatal(err)
	}
	check("a session deleted")
	if _, err := h.s.store.UpdateWorkspace(ctx, ws, workspaces.Doc{"name": []byte(`"Acme Launch"`)}); err != nil {
		t.Fatal(err)
	}
	check("the workspace renamed")
	clock = clock.Add(49 * time.Hour)
	check("two days later")
}
