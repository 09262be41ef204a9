package agentcontext

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestTurnContextStaysInItsTeam: the one request that answers a turn's
// whole context (protocol.LoadTurnContext) reads another team's workspace
// for no one: a user of another team asking for it by id gets 404 and not
// a byte of it; asked for their own workspace with the other team's
// session id and shared persona, they get their own (empty) history and
// no persona; the team's members get the workspace's history, identity,
// awareness, shared persona and recall.
func TestTurnContextStaysInItsTeam(t *testing.T) {
	ts := startTeams(t)
	srv := ts.srv
	nc := srv.DialNATS()
	const secret = "the Zanzibar margin is forty percent"
	if st := srv.JSON(http.MethodPost, "/api/identity", obj{"workspace": ts.ws, "name": "Acme Secret Bot"}, nil, ts.olga...); st != 200 {
		t.Fatalf("set identity: %d", st)
	}
	waggletest.Operate(t, nc, protocol.AddAwareness, protocol.AwarenessAddRequest{
		MindRef: protocol.MindRef{Workspace: ts.ws}, Category: "task", Content: "Renegotiate the Zanzibar deal", Priority: 5})
	if st := srv.JSON(http.MethodPost, "/api/team-personas?team=acme", obj{"id": "acme-closer", "name": "Acme Closer", "systemPrompt": "Acme only."}, nil, ts.olga...); st != http.StatusCreated {
		t.Fatalf("share persona: %d", st)
	}
	waggletest.Operate(t, nc, protocol.AddFrame, protocol.MemoryAddRequest{MemoryOwner: protocol.MemoryOwner{Workspace: ts.ws}, Content: secret, Importance: protocol.ImportanceCritical})
	srv.Chat(obj{"message": secret, "workspace": ts.ws, "session": "deal"}, ts.olga...).All(t)
	rivalWS := ts.createWorkspace(t, "Rival Deals", "rival", ts.rita)

	load := func(req protocol.TurnContextRequest) (protocol.TurnContext, error) {
		req.Preload, req.Knowledge = true, 12
		req.Recall = &protocol.TurnRecallRequest{Query: "Zanzibar margin"}
		return bus.Call(context.Background(), nc, protocol.LoadTurnContext, req, bus.Within(10*time.Second))
	}
	// A member reads it all.
	got, err := load(protocol.TurnContextRequest{SessionRef: protocol.SessionRef{Workspace: ts.ws, Session: "deal"}, User: "mark", Persona: "acme-closer"})
	if err != nil {
		t.Fatalf("member: %v", err)
	}
	if len(got.History.Messages) != 2 || got.Persona == nil || got.Persona.ID != "acme-closer" ||
		got.Identity == nil || !strings.Contains(got.Identity.IdentityContext(), "Acme Secret Bot") ||
		len(got.Awareness) != 1 || len(got.RecallWorkspace) == 0 || got.Workspace == nil || got.Workspace.TeamID != "acme" ||
		got.Preload == nil || len(got.Preload.Recent) != 1 || got.Preload.Recent[0].Content != secret {
		t.Errorf("member's context: %+v", got)
	}
	// Another team's user asking for the workspace by id: not found.
	got, err = load(protocol.TurnContextRequest{SessionRef: protocol.SessionRef{Workspace: ts.ws, Session: "deal"}, User: "rita", Persona: "acme-closer"})
	if protocol.KindOf(err) != protocol.NotFound {
		t.Errorf("rival reads acme's turn context: err %v, reply %+v", err, got)
	}
	// Their own workspace, naming acme's session and persona: nothing of acme's.
	got, err = load(protocol.TurnContextRequest{SessionRef: protocol.SessionRef{Workspace: rivalWS, Session: "deal"}, User: "rita", Persona: "acme-closer"})
	if err != nil {
		t.Fatalf("rival in their own workspace: %v", err)
	}
	if len(got.History.Messages) != 0 || got.Persona != nil || got.Identity != nil || len(got.Awareness) != 0 {
		t.Errorf("rival's own workspace shows acme's context: %+v", got)
	}
	var preloaded []protocol.MemoryFrame
	if p := got.Preload; p != nil {
		preloaded = slices.Concat(p.Recent, p.Preferences, p.Corrections)
	}
	for _, f := range slices.Concat(preloaded, got.RecallWorkspace, got.RecallPersonal) {
		if strings.Contains(f.Content, "Zanzibar") {
			t.Errorf("rival's context carries acme's frame %q", f.Content)
		}
	}
	if got.Now != nil && len(got.Now.RecentThreads) > 0 {
		t.Errorf("rival's Workspace Now lists threads: %+v", got.Now.RecentThreads)
	}
}

// TestAgentTurnLoadsItsContextOnce: before the model is called an agent
// turn asks the session store for its context once
// (protocol.LoadTurnContext), not with a request per part: none of the
// separate endpoints it used (history, workspace, profile, frames,
// Workspace Now, identity, awareness, knowledge, recall) is asked during
// a turn.
func TestAgentTurnLoadsItsContextOnce(t *testing.T) {
	srv, _ := start(t, waggletest.WithConfig(func(c *app.Config) { c.NATSListen = waggletest.FreeAddr(t) }))
	nc := srv.DialNATS()
	srv.Chat(obj{"message": "warm up", "workspace": ws, "session": "s1"}).All(t)

	var (
		mu       sync.Mutex
		subjects []string
	)
	sub, err := nc.Subscribe("waggle.store.cmd.>", func(m *nats.Msg) {
		mu.Lock()
		subjects = append(subjects, m.Subject)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	evs := srv.Chat(obj{"message": "what did we decide about pricing", "workspace": ws, "session": "s1"}).All(t)
	if names := waggletest.Names(evs); names[len(names)-1] != "done" {
		t.Fatalf("turn events %v", names)
	}
	// Everything the turn sent is in once its done arrived; the flush
	// makes sure this connection has read what the server delivered.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	_ = sub.Unsubscribe()
	mu.Lock()
	defer mu.Unlock()
	count := map[string]int{}
	for _, s := range subjects {
		count[s]++
	}
	if count[protocol.LoadTurnContext.Subject] != 1 {
		t.Errorf("turn context asked %d times, want 1 (requests: %v)", count[protocol.LoadTurnContext.Subject], count)
	}
	for _, ep := range []string{protocol.ReadHistory.Subject, protocol.GetWorkspace.Subject, protocol.GetProfile.Subject,
		protocol.ListFrames.Subject, protocol.GetWorkspaceNow.Subject, protocol.GetIdentity.Subject, protocol.GetAwareness.Subject,
		protocol.GetKnowledgeGraph.Subject, protocol.QueryMemory.Subject} {
		if count[ep] > 0 {
			t.Errorf("the turn asked %s %d times besides its context (requests: %v)", ep, count[ep], count)
		}
	}
}
