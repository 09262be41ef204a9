package retrieval_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/retrieval"
)

// fakeStore answers the three store subjects a BusSearcher uses.
type fakeStore struct {
	mu         sync.Mutex
	workspaces []string // known besides "default"
	memories   map[string][]protocol.Memory
	sessions   map[string][]protocol.SessionSearchResult
	memErr     error
	sessErr    error
	asked      []string // "<subject> <workspace>"
	memReqs    []protocol.MemorySearchRequest
}

func (f *fakeStore) note(subject, ws string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, subject+" "+ws)
}

func (f *fakeStore) workspace(_ context.Context, req protocol.WorkspaceRequest) (protocol.Workspace, error) {
	f.note(protocol.GetWorkspace.Subject, req.Workspace)
	if !slices.Contains(f.workspaces, req.Workspace) {
		return protocol.Workspace{}, protocol.Errorf(protocol.NotFound, "Workspace not found")
	}
	return protocol.Workspace{ID: req.Workspace, Name: req.Workspace}, nil
}

func (f *fakeStore) memory(_ context.Context, req protocol.MemorySearchRequest) (protocol.MemorySearchReply, error) {
	f.note(protocol.SearchMemory.Subject, req.Workspace)
	f.mu.Lock()
	f.memReqs = append(f.memReqs, req)
	f.mu.Unlock()
	if f.memErr != nil {
		return protocol.MemorySearchReply{}, f.memErr
	}
	return protocol.MemorySearchReply{Memories: f.memories[req.Workspace]}, nil
}

func (f *fakeStore) session(_ context.Context, req protocol.SessionSearchRequest) (protocol.SessionSearchReply, error) {
	f.note(protocol.SearchSessions.Subject, req.Workspace)
	if f.sessErr != nil {
		return protocol.SessionSearchReply{}, f.sessErr
	}
	return protocol.SessionSearchReply{Results: f.sessions[req.Workspace]}, nil
}

// startBus starts an embedded NATS server, serves f on it (unless nil) and
// returns the searcher's connection.
func startBus(t *testing.T, f *fakeStore) *nats.Conn {
	t.Helper()
	dial := bus.OptionDialer(natstest.Start(t).ConnectOption())
	nc, err := dial("runner")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if f == nil {
		return nc
	}
	sc, err := dial("fake-store")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.Close)
	svc, err := bus.NewService(sc, bus.ServiceConfig{Name: protocol.ServiceSessionStore, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	if err := errors.Join(
		bus.Handle(svc, protocol.GetWorkspace, f.workspace),
		bus.Handle(svc, protocol.SearchMemory, f.memory),
		bus.Handle(svc, protocol.SearchSessions, f.session),
	); err != nil {
		t.Fatal(err)
	}
	return nc
}

func TestBusSearcherMergesMemoriesAndSessions(t *testing.T) {
	title := "Launch planning"
	f := &fakeStore{
		workspaces: []string{"proj"},
		memories: map[string][]protocol.Memory{"proj": {
			{ID: "m1", Content: "Launch is planned for May."},
			{ID: "m2", Content: "Budget approved.", Tags: []string{"launch"}},
		}},
		sessions: map[string][]protocol.SessionSearchResult{"proj": {
			{SessionID: "s1", Title: title, MatchCount: 2, Snippets: []protocol.SearchSnippet{{Text: "...the launch date is May 5...", Role: "assistant"}}},
		}},
	}
	s := retrieval.NewBusSearcher(startBus(t, f), 0)
	got, err := s.Search(context.Background(), "proj", "launch May", 8)
	if err != nil {
		t.Fatal(err)
	}
	want := []retrieval.Passage{
		{Source: "memory:m1", Content: "Launch is planned for May.", Score: 1},
		{Source: "session:s1", Content: "Conversation \"Launch planning\"\nassistant: ...the launch date is May 5...", Score: 1},
		{Source: "memory:m2", Content: "Budget approved.", Score: 0.5}, // "launch" only via its tag
	}
	if !slices.Equal(got, want) {
		t.Errorf("Search =\n%+v\nwant\n%+v", got, want)
	}

	got, err = s.Search(context.Background(), "proj", "launch May", 2)
	if err != nil || len(got) != 2 || got[1].Source != "session:s1" {
		t.Errorf("limit 2: %+v, %v", got, err)
	}
}

func TestBusSearcherWorkspaceResolution(t *testing.T) {
	tests := []struct {
		name, workspace, searched string
		lookedUp                  bool
	}{
		{"none is personal", "", "default", false},
		{"personal", "personal", "default", false},
		{"known workspace", "proj", "proj", true},
		{"unknown workspace falls back to personal", "nope", "default", true},
		{"unsafe id is personal", "../etc", "default", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeStore{workspaces: []string{"proj"}, memories: map[string][]protocol.Memory{
				tt.searched: {{ID: "m", Content: "hit"}},
			}}
			got, err := retrieval.NewBusSearcher(startBus(t, f), 0).Search(context.Background(), tt.workspace, "hit", 5)
			if err != nil || len(got) != 1 {
				t.Fatalf("Search = %+v, %v", got, err)
			}
			want := []string{
				protocol.SearchMemory.Subject + " " + tt.searched,
				protocol.SearchSessions.Subject + " " + tt.searched,
			}
			if tt.lookedUp {
				want = append([]string{protocol.GetWorkspace.Subject + " " + tt.workspace}, want...)
			}
			if !slices.Equal(f.asked, want) {
				t.Errorf("asked %v, want %v", f.asked, want)
			}
		})
	}
}

func TestBusSearcherFailures(t *testing.T) {
	t.Run("no store is no results", func(t *testing.T) {
		got, err := retrieval.NewBusSearcher(startBus(t, nil), 0).Search(context.Background(), "proj", "x y", 5)
		if err != nil || len(got) != 0 {
			t.Errorf("Search = %+v, %v", got, err)
		}
	})
	t.Run("one source failing keeps the other", func(t *testing.T) {
		f := &fakeStore{memories: map[string][]protocol.Memory{"default": {{ID: "m", Content: "kept"}}}, sessErr: errors.New("disk on fire")}
		got, err := retrieval.NewBusSearcher(startBus(t, f), 0).Search(context.Background(), "", "kept", 5)
		if err != nil || len(got) != 1 || got[0].Content != "kept" {
			t.Errorf("Search = %+v, %v", got, err)
		}
	})
	t.Run("both failing is an error", func(t *testing.T) {
		f := &fakeStore{memErr: errors.New("a"), sessErr: errors.New("b")}
		if _, err := retrieval.NewBusSearcher(startBus(t, f), 0).Search(context.Background(), "", "q q", 5); err == nil {
			t.Error("Search succeeded with both sources failing")
		}
	})
	t.Run("one-character query skips the session search", func(t *testing.T) {
		f := &fakeStore{}
		if _, err := retrieval.NewBusSearcher(startBus(t, f), 0).Search(context.Background(), "", "x", 5); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(f.asked, []string{protocol.SearchMemory.Subject + " default"}) {
			t.Errorf("asked %v", f.asked)
		}
	})
}

// A team-server user's run without a workspace searches that user's
// personal mind only: never the shared default workspace's memories or
// sessions, which belong to no team.
func TestBusSearcherForUserSearchesOnlyTheirPersonalMind(t *testing.T) {
	f := &fakeStore{workspaces: []string{"proj"},
		memories: map[string][]protocol.Memory{"default": {{ID: "m", Content: "launch"}}},
		sessions: map[string][]protocol.SessionSearchResult{"default": {{SessionID: "shared", Title: "launch"}}}}
	s := retrieval.NewBusSearcher(startBus(t, f), 0).ForUser("mal")
	got, err := s.Search(context.Background(), "", "launch", 8)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range got {
		if p.Source == "session:shared" {
			t.Errorf("the shared default workspace's session was searched: %+v", got)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.memReqs) != 1 || f.memReqs[0].User != "mal" || f.memReqs[0].Scope != protocol.MindPersonal {
		t.Errorf("memory requests = %+v", f.memReqs)
	}
	if slices.Contains(f.asked, protocol.SearchSessions.Subject+" default") {
		t.Errorf("asked %v", f.asked)
	}
}
