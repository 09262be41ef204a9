package sessionstore_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore"
	"github.com/waggle-os/core/services/sessionstore/storetest"
	"github.com/waggle-os/core/services/sessionstore/workspaces"
)

func files(t *testing.T) *sessionstore.Files {
	return sessionstore.NewFiles(t.TempDir(), nil, slog.New(slog.DiscardHandler))
}

func doc(t *testing.T, v map[string]any) workspaces.Doc {
	t.Helper()
	d := workspaces.Doc{}
	for k, x := range v {
		d[k], _ = json.Marshal(x)
	}
	return d
}

// TestRouterConformance: a router over two stores is itself a store.
func TestRouterConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) sessionstore.Store {
		return sessionstore.NewRouter(files(t), files(t), false)
	})
}

// TestRouterPlacement: workspaces with a teamId go to the team store and
// stay there; everything else is personal; listings merge; ids never
// clash across stores; a session is located across both.
func TestRouterPlacement(t *testing.T) {
	ctx := context.Background()
	personal, team := files(t), files(t)
	r := sessionstore.NewRouter(personal, team, false)
	if err := r.EnsureDefault(ctx); err != nil {
		t.Fatal(err)
	}
	tw, err := r.CreateWorkspace(ctx, doc(t, map[string]any{"name": "Acme", "teamId": "t1"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	pw, err := r.CreateWorkspace(ctx, doc(t, map[string]any{"name": "Acme"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if tw.ID() != "acme" || pw.ID() != "acme-2" {
		t.Fatalf("ids %s %s", tw.ID(), pw.ID())
	}
	in := func(s sessionstore.Store, id string) bool {
		ok, err := s.WorkspaceExists(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !in(team, "acme") || in(personal, "acme") || !in(personal, "acme-2") || !in(personal, "default") || in(team, "default") {
		t.Fatal("placement wrong")
	}
	// A patch that sets or clears teamId does not move a workspace.
	if _, err := r.UpdateWorkspace(ctx, "acme-2", doc(t, map[string]any{"teamId": "t2"})); err != nil || !in(personal, "acme-2") {
		t.Fatalf("update moved the workspace: %v", err)
	}
	docs, err := r.ListWorkspaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range docs {
		ids = append(ids, d.ID())
	}
	// Both stores' workspaces are listed (ordered by creation time; two
	// created in the same millisecond may come either way).
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"acme", "acme-2", "default"}) {
		t.Fatalf("merged list = %v", ids)
	}
	m := protocol.Message{Role: "user", Content: "hello team"}
	if _, err := r.Append(ctx, protocol.AppendRequest{SessionRef: protocol.SessionRef{Workspace: "acme", Session: "s"}, Message: &m}); err != nil {
		t.Fatal(err)
	}
	if h, _ := team.History(ctx, protocol.HistoryRequest{SessionRef: protocol.SessionRef{Workspace: "acme", Session: "s"}}); len(h.Messages) != 1 {
		t.Fatalf("team store history = %+v", h)
	}
	if _, err := r.Append(ctx, protocol.AppendRequest{SessionRef: protocol.SessionRef{Workspace: "acme-2", Session: "s"}, Message: &m}); err != nil {
		t.Fatal(err)
	}
	// "acme" < "acme-2": the team store's copy is found first.
	ref, err := r.LocateSession(ctx, protocol.SessionLocator{Session: "s"})
	if err != nil || ref.Workspace != "acme" {
		t.Fatalf("locate = %+v %v", ref, err)
	}
	// Ad-hoc workspaces (no config anywhere) are personal.
	if _, err := r.Append(ctx, protocol.AppendRequest{SessionRef: protocol.SessionRef{Workspace: "adhoc", Session: "x"}, Message: &m}); err != nil {
		t.Fatal(err)
	}
	if h, _ := personal.History(ctx, protocol.HistoryRequest{SessionRef: protocol.SessionRef{Workspace: "adhoc", Session: "x"}}); len(h.Messages) != 1 {
		t.Fatal("ad-hoc chat not personal")
	}

	// All-team mode: the personal store is not used at all.
	all := sessionstore.NewRouter(personal, team, true)
	if err := all.EnsureDefault(ctx); err != nil || !in(team, "default") {
		t.Fatalf("all-team default: %v", err)
	}
	if w, err := all.CreateWorkspace(ctx, doc(t, map[string]any{"name": "Solo"}), nil); err != nil || !in(team, w.ID()) || in(personal, w.ID()) {
		t.Fatalf("all-team create: %v", err)
	}
}
