package gateway

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/protocol"
)

// TestQuietTurnCostsNoBusRequest: a follower of a turn that waits two
// minutes for an approval asks the bus nothing — no question to the
// runners, no read of a stream or bucket — and never ends the turn
// itself, however long it is quiet: the runners end the turns no runner is
// left to finish, in the stream the relay follows.
func TestQuietTurnCostsNoBusRequest(t *testing.T) {
	s := newRelayService(t)
	const id = "paused"
	storeEvent(t, s, id, protocol.EventApprovalRequired)
	spy := s.nc // the gateway's own connection
	var asked atomic.Int64
	for _, subj := range []string{"waggle.turn.cmd.>", "$JS.API.>", "$KV.>", protocol.TurnEvents(id)} {
		sub, err := spy.Subscribe(subj, func(m *nats.Msg) {
			if m.Subject != protocol.TurnEvents(id) || m.Header.Get(protocol.HeaderEvent) != protocol.EventApprovalRequired {
				asked.Add(1)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	o := &orphanWatch{s: s, turnID: id}
	// The relay ticks every 2 s once the stream has been quiet for
	// orphanIdle: 60 ticks are two minutes of waiting.
	for range int((2 * time.Minute) / (2 * time.Second)) {
		if v := o.tick(context.Background()); v != orphanNo {
			t.Fatalf("verdict %v on a waiting turn", v)
		}
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("%d bus requests or events while the follower waited", n)
	}
}

// storeEvent stores one event of a turn, as its runner would.
func storeEvent(t *testing.T, s *Service, turnID, name string) {
	t.Helper()
	m := &nats.Msg{Subject: protocol.TurnEvents(turnID), Data: []byte(`{}`), Header: nats.Header{}}
	m.Header.Set(protocol.HeaderEvent, name)
	if _, err := s.js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}
