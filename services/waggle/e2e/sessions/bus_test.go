// Package sessions holds black-box tests of the workspaces and sessions
// API (contract §6) and of the session store's bus endpoints other
// services use (memories, workspace config).
package sessions

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/waggle/app"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// startWithBus starts the app with its embedded NATS server listening on a
// free TCP port and returns a client connection to it.
func startWithBus(t *testing.T) (*waggletest.Server, *nats.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := waggletest.Start(t, waggletest.WithConfig(func(c *app.Config) { c.NATSListen = addr }))
	return srv, srv.DialNATS()
}

func request[Req, Rep any](t *testing.T, nc *nats.Conn, ep protocol.Endpoint[Req, Rep], req Req) (Rep, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return bus.Call(ctx, nc, ep, req)
}

func TestMemoryOverBus(t *testing.T) {
	srv, nc := startWithBus(t)
	for _, c := range []string{"The deploy window is Friday 4pm", "Alice owns the billing service", "Billing deploys need Alice's approval"} {
		rep, err := request(t, nc, protocol.SaveMemory, protocol.MemorySaveRequest{Workspace: "default", Content: c})
		if err != nil || rep.ID == "" {
			t.Fatalf("save %q: %+v %v", c, rep, err)
		}
	}
	search := func(q string, limit int) []string {
		rep, err := request(t, nc, protocol.SearchMemory, protocol.MemorySearchRequest{Workspace: "default", Query: q, Limit: limit})
		if err != nil {
			t.Fatalf("search %q: %v", q, err)
		}
		var out []string
		for _, m := range rep.Memories {
			out = append(out, m.Content)
		}
		return out
	}
	got := search("billing ALICE deploy", 0)
	if len(got) != 3 || got[0] != "Billing deploys need Alice's approval" {
		t.Fatalf("ranked search = %q", got)
	}
	// BM25: of two frames with the term once, the shorter ranks first.
	if got := search("billing", 1); len(got) != 1 || got[0] != "Alice owns the billing service" {
		t.Fatalf("limited search = %q", got)
	}
	if got := search("kubernetes", 0); len(got) != 0 {
		t.Fatalf("no-match search = %q", got)
	}
	// Memories are durable: a restart still finds them.
	srv.Restart()
	nc2 := srv.DialNATS()
	rep, err := request(t, nc2, protocol.SearchMemory, protocol.MemorySearchRequest{Workspace: "default", Query: "friday"})
	if err != nil || len(rep.Memories) != 1 {
		t.Fatalf("after restart: %+v %v", rep, err)
	}
	_, err = request(t, nc2, protocol.SaveMemory, protocol.MemorySaveRequest{Workspace: "../etc", Content: "x"})
	if protocol.KindOf(err) != protocol.Invalid {
		t.Fatalf("unsafe workspace: %v", err)
	}
}

func TestWorkspaceGetOverBus(t *testing.T) {
	srv, nc := startWithBus(t)
	ws, err := request(t, nc, protocol.GetWorkspace, protocol.WorkspaceRequest{Workspace: "default"})
	if err != nil || ws.ID != "default" || ws.Name != "Default Workspace" {
		t.Fatalf("default workspace: %+v %v", ws, err)
	}
	var created map[string]any
	if st := srv.JSON("POST", "/api/workspaces", map[string]any{"name": "Team Space", "model": "gpt-4o", "persona": "analyst", "teamId": "t1", "budget": 12.5}, &created); st != 201 {
		t.Fatalf("create: %d %v", st, created)
	}
	ws, err = request(t, nc, protocol.GetWorkspace, protocol.WorkspaceRequest{Workspace: "team-space"})
	if err != nil || ws.Model != "gpt-4o" || ws.Persona != "analyst" || ws.TeamID != "t1" || ws.Budget != 12.5 {
		t.Fatalf("team-space: %+v %v", ws, err)
	}
	_, err = request(t, nc, protocol.GetWorkspace, protocol.WorkspaceRequest{Workspace: "nope"})
	if e := protocol.AsError(err); e == nil || e.Kind != protocol.NotFound || e.Message != "Workspace not found" {
		t.Fatalf("missing workspace: %v", err)
	}
}
