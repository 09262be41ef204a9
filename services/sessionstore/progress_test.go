package sessionstore

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/wsnow"
	"github.com/waggle-os/core/services/sessionstore/workspaces"
)

// countingStore counts history reads.
type countingStore struct {
	Store
	reads atomic.Int32
}

func (c *countingStore) History(ctx context.Context, req protocol.HistoryRequest) (protocol.HistoryReply, error) {
	c.reads.Add(1)
	return c.Store.History(ctx, req)
}

// TestTranscriptStartsOfLongSessionsAreReadOnce: Workspace Now reads the
// start of a conversation of wsnow.MaxTranscriptMessages messages or more
// once (it cannot change), a shorter one each time (it still grows), and
// a session created again under the same id anew.
func TestTranscriptStartsOfLongSessionsAreReadOnce(t *testing.T) {
	ctx := context.Background()
	store := &countingStore{Store: NewFiles(t.TempDir(), nil, slog.New(slog.DiscardHandler))}
	s := &Service{store: store, log: slog.New(slog.DiscardHandler)}
	doc, err := store.CreateWorkspace(ctx, workspaces.Doc{"name": []byte(`"Acme"`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws := doc.Workspace().ID
	base := time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)
	say := func(session string, n int) {
		for i := range n {
			base = base.Add(time.Second)
			msg := protocol.Message{Role: "user", Content: fmt.Sprint("message ", i), Timestamp: protocol.Timestamp(base)}
			if err := store.Append(ctx, protocol.AppendRequest{SessionRef: protocol.SessionRef{Workspace: ws, Session: session}, Message: &msg}); err != nil {
				t.Fatal(err)
			}
		}
	}
	say("long", wsnow.MaxTranscriptMessages+5)
	say("short", 3)
	list := func() []protocol.SessionInfo {
		sessions, err := store.ListSessions(ctx, protocol.SessionListRequest{Workspace: ws, HideEmpty: true})
		if err != nil {
			t.Fatal(err)
		}
		return sessions
	}
	first := s.transcripts(ctx, ws, list())
	if len(first) != 2 || store.reads.Load() != 2 {
		t.Fatalf("first briefing: %d transcripts, %d reads", len(first), store.reads.Load())
	}
	for _, tr := range first {
		if tr.Session == "long" && len(tr.Messages) != wsnow.MaxTranscriptMessages {
			t.Errorf("long session: %d messages read", len(tr.Messages))
		}
	}
	s.transcripts(ctx, ws, list())
	if got := store.reads.Load(); got != 3 {
		t.Errorf("second briefing read %d histories, want the short one only", got-2)
	}
	// Deleted and created again: read anew.
	if err := store.DeleteSession(ctx, protocol.SessionRef{Workspace: ws, Session: "long"}); err != nil {
		t.Fatal(err)
	}
	say("long", wsnow.MaxTranscriptMessages)
	s.transcripts(ctx, ws, list())
	if got := store.reads.Load(); got != 5 {
		t.Errorf("after the session was created again: %d reads in all, want 5", got)
	}
}
