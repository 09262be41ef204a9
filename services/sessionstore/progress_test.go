package sessionstore

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
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

// TestTranscriptsAreReadWhenTheyChange: Workspace Now reads and scans a
// conversation's start again only when it changed — a briefing with
// nothing new reads no history, a message added to a short session is
// seen at the next one, a session of wsnow.MaxTranscriptMessages
// messages or more is not read again as it grows (its start is fixed),
// and a session created again under the same id is read anew.
func TestTranscriptsAreReadWhenTheyChange(t *testing.T) {
	ctx := context.Background()
	store := &countingStore{Store: NewFiles(t.TempDir(), nil, slog.New(slog.DiscardHandler))}
	s := &Service{store: store, log: slog.New(slog.DiscardHandler)}
	doc, err := store.CreateWorkspace(ctx, workspaces.Doc{"name": []byte(`"Acme"`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws := doc.Workspace().ID
	base := time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)
	add := func(session, text string) {
		base = base.Add(time.Second)
		msg := protocol.Message{Role: "user", Content: text, Timestamp: protocol.Timestamp(base)}
		if _, err := store.Append(ctx, protocol.AppendRequest{SessionRef: protocol.SessionRef{Workspace: ws, Session: session}, Message: &msg}); err != nil {
			t.Fatal(err)
		}
	}
	say := func(session string, n int) {
		for i := range n {
			add(session, fmt.Sprint("message ", i))
		}
	}
	say("long", wsnow.MaxTranscriptMessages+5)
	say("short", 3)
	briefing := func() string {
		sessions, err := store.ListSessions(ctx, protocol.SessionListRequest{Workspace: ws, HideEmpty: true})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(wsnow.MergeProgress(s.transcriptItems(ctx, ws, sessions)))
	}
	reads := func(want int32, when string) {
		t.Helper()
		if got := store.reads.Swap(0); got != want {
			t.Errorf("%s: %d history reads, want %d", when, got, want)
		}
	}
	briefing()
	reads(2, "first briefing")
	briefing()
	reads(0, "nothing changed")

	add("short", "We need to send the pricing memo to finance")
	if got := briefing(); !strings.Contains(got, "send the pricing memo to finance") {
		t.Errorf("a task added to a short session is missing: %s", got)
	}
	reads(1, "a short session grew")

	add("long", "We need to rewrite the whole onboarding flow")
	if got := briefing(); strings.Contains(got, "onboarding") {
		t.Errorf("message %d of a session counted: %s", wsnow.MaxTranscriptMessages+6, got)
	}
	reads(0, "a long session grew")

	// Deleted and created again: read anew.
	if err := store.DeleteSession(ctx, protocol.SessionRef{Workspace: ws, Session: "long"}); err != nil {
		t.Fatal(err)
	}
	add("long", "We need to plan the launch event for April")
	say("long", 2)
	if got := briefing(); !strings.Contains(got, "plan the launch event") {
		t.Errorf("the new session's task is missing: %s", got)
	}
	reads(1, "after the session was created again")
}
