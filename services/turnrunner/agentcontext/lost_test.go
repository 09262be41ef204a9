package agentcontext

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
)

// TestHistoryReadLostIsResent: the first read of a turn's context (its
// history and the rest, one request) is lost (sent as a cluster node
// died: nobody answers it). The read is sent again and the turn gets its
// history in seconds, not after the whole store timeout, and never fails
// for it.
func TestHistoryReadLostIsResent(t *testing.T) {
	srv := natstest.Start(t)
	store := srv.Conn("store")
	var reads atomic.Int32
	sub, err := store.Subscribe(protocol.LoadTurnContext.Subject, func(m *nats.Msg) {
		if reads.Add(1) == 1 {
			return // lost
		}
		body, _ := json.Marshal(protocol.TurnContext{History: protocol.HistoryReply{Messages: []protocol.Message{{Role: "user", Content: "earlier", TurnID: "t0"}}}})
		_ = m.Respond(body)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := store.Flush(); err != nil {
		t.Fatal(err)
	}
	const timeout = 10 * time.Second
	l := Loader{
		Store: Store{Conn: srv.Conn("runner"), Timeout: timeout},
		Req:   protocol.TurnRequest{TurnID: "t1", Workspace: "ws", Session: "s1", Message: "hi"},
		Log:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	start := time.Now()
	in, err := l.Inputs(context.Background(), agent.ModelConfig{})
	if err != nil {
		t.Fatalf("inputs: %v (after %v)", err, time.Since(start))
	}
	if took := time.Since(start); took >= timeout/2 {
		t.Errorf("the history came after %v: the lost read waited out the timeout", took)
	}
	if len(in.History) != 1 || in.History[0].Content != "earlier" {
		t.Errorf("history = %+v", in.History)
	}
	if n := reads.Load(); n < 2 {
		t.Errorf("%d context reads, want the lost one sent again", n)
	}
}
