package agentcontext

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
)

// TestInputsFromAnOlderStore: a store that does not answer
// LoadTurnContext (an older version during an upgrade) still gives a
// turn its history and its workspace's config, so the turn runs.
func TestInputsFromAnOlderStore(t *testing.T) {
	ns := natstest.Start(t)
	storeConn, runnerConn := ns.Conn("store"), ns.Conn("runner")
	svc, err := bus.NewService(storeConn, bus.ServiceConfig{Name: protocol.ServiceSessionStore})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	err = bus.Handle(svc, protocol.ReadHistory, func(_ context.Context, req protocol.HistoryRequest) (protocol.HistoryReply, error) {
		return protocol.HistoryReply{Messages: []protocol.Message{{Role: "user", Content: "earlier", TurnID: "t0"}, {Role: "user", Content: "now", TurnID: "t1"}}}, nil
	})
	if err == nil {
		err = bus.Handle(svc, protocol.GetWorkspace, func(_ context.Context, req protocol.WorkspaceRequest) (protocol.Workspace, error) {
			return protocol.Workspace{ID: req.Workspace, Model: "old-store-model"}, nil
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	l := Loader{Store: Store{Conn: runnerConn, Timeout: 5 * time.Second},
		Req: protocol.TurnRequest{TurnID: "t1", Workspace: "w", Session: "s", Message: "now"}, Log: slog.New(slog.DiscardHandler)}
	in, err := l.Inputs(context.Background(), agent.ModelConfig{})
	if err != nil {
		t.Fatalf("inputs from an older store: %v", err)
	}
	if len(in.History) != 1 || in.History[0].Content != "earlier" || in.Workspace.Model != "old-store-model" {
		t.Errorf("inputs %+v", in)
	}
}
