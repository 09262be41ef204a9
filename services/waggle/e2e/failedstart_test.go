package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/waitfor"
	"github.com/waggle-os/core/services/turnrunner/ownership"
	"github.com/waggle-os/core/services/turnrunner/ownership/sessionqueue"
	"github.com/waggle-os/core/services/waggle/waggletest"
)

// TestFailedStartDoesNotBlockItsSession: a turn's start wrote its lease
// and joined its session's queue, but the answers to those writes were
// lost (a cluster electing a leader), so the start failed and its client
// was told to try again: the turn never runs, and its lease names a live
// runner, which no other runner claims. That runner ends it: the next
// message of the session runs at once instead of waiting behind the lease
// for its hour-long MaxAge, and the failed turn's stream ends with the
// orphan error, so anyone following it stops.
func TestFailedStartDoesNotBlockItsSession(t *testing.T) {
	srv := waggletest.Start(t, waggletest.WithConfig(func(c *appConfig) { c.NATSListen = waggletest.FreeAddr(t) }))
	js, err := jetstream.New(srv.DialNATS())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// What the failed start left: a lease naming the runner as it is now,
	// and the turn's place (the session's holder) in its queue.
	runners, err := js.KeyValue(ctx, ownership.BucketRunners)
	if err != nil {
		t.Fatal(err)
	}
	var runner string
	var beat ownership.RunnerBeat
	waitfor.NoError(t, "the runner's heartbeat", func() error {
		keys, err := runners.Keys(ctx)
		if err != nil || len(keys) != 1 {
			return errors.Join(err, errors.New("want one runner"))
		}
		e, err := runners.Get(ctx, keys[0])
		if err != nil {
			return err
		}
		runner = keys[0]
		return json.Unmarshal(e.Value(), &beat)
	})
	leases, err := js.KeyValue(ctx, ownership.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	const lost = "00000000-0000-4000-8000-00000000f00d"
	now := time.Now().UnixMilli()
	body, _ := json.Marshal(ownership.Lease{Request: protocol.TurnRequest{TurnID: lost, Workspace: "default", Session: "stuck", Message: "lost"},
		Runner: runner, Incarnation: beat.Incarnation, Accepted: now, Heartbeat: now})
	if _, err := leases.Create(ctx, lost, body); err != nil {
		t.Fatal(err)
	}
	queue, err := sessionqueue.Open(ctx, js, sessionqueue.Config{Alive: func(context.Context, string) (bool, error) { return true, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer queue.Close()
	if _, err := queue.Join(ctx, sessionqueue.Session{Workspace: "default", Session: "stuck"}, lost, lost+":0", false); err != nil {
		t.Fatal(err)
	}

	// The session's next message runs to its end.
	st := srv.Chat(map[string]any{"message": "next", "session": "stuck"})
	timer := time.AfterFunc(30*time.Second, st.Close)
	defer timer.Stop()
	evs := st.All(t)
	if n := len(evs); n == 0 || evs[n-1].Name != "done" || strings.TrimSpace(waggletest.Text(evs)) != strings.TrimSpace(protocol.EchoText("next")) {
		t.Fatalf("the session's next message: %v %q", waggletest.Names(evs), waggletest.Text(evs))
	}
	if _, err := leases.Get(ctx, lost); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the failed start's lease: %v, want gone", err)
	}
	stream, err := js.Stream(ctx, protocol.StreamTurns)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(ctx, protocol.TurnEvents(lost))
	if err != nil {
		t.Fatalf("the failed turn's stream: %v", err)
	}
	var data protocol.ErrorData
	_ = json.Unmarshal(m.Data, &data)
	if m.Header.Get(protocol.HeaderEvent) != protocol.EventError || data.Message != protocol.TurnOrphanedText {
		t.Errorf("the failed turn ended with %s %q", m.Header.Get(protocol.HeaderEvent), m.Data)
	}
}
