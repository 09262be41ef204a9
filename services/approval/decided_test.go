package approval

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/protocol"
)

// decisions subscribes to the decision notices of id.
func (e *env) decisions(id string) <-chan protocol.ApprovalDecidedEvent {
	e.t.Helper()
	ch := make(chan protocol.ApprovalDecidedEvent, 8)
	sub, err := e.nc.Subscribe(protocol.ApprovalDecided(id).Subject, func(m *nats.Msg) {
		var ev protocol.ApprovalDecidedEvent
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			e.t.Errorf("notice %s: %v", m.Data, err)
		}
		ch <- ev
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.nc.Flush(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return ch
}

func (e *env) state(id string) (string, error) {
	rep, err := request(e, protocol.GetApprovalState, protocol.ApprovalStateRequest{RequestID: id})
	return rep.State, err
}

func nextNotice(t *testing.T, ch <-chan protocol.ApprovalDecidedEvent) protocol.ApprovalDecidedEvent {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no decision notice within 5s")
	}
	return protocol.ApprovalDecidedEvent{}
}

// TestDecisionsAreAnnounced: every way an approval becomes final publishes
// one notice with that state, and the state request answers it.
func TestDecisionsAreAnnounced(t *testing.T) {
	e := newEnv(t, Config{Timeout: time.Hour})
	tests := []struct {
		name  string
		turn  string
		end   func(id string) error
		state string
	}{
		{"approve", "turn-x", func(id string) error { _, err := e.decide(id, true, false, nil); return err }, protocol.ApprovalStateApproved},
		{"deny", "turn-x", func(id string) error { _, err := e.decide(id, false, false, nil); return err }, protocol.ApprovalStateDenied},
		// The claim while the grant is written is not final: the one
		// notice is the approval after it.
		{"approve always", "turn-x", func(id string) error { _, err := e.decide(id, true, true, ptr("ws")); return err }, protocol.ApprovalStateApproved},
		{"resolve timeout", "turn-x", func(id string) error {
			_, err := request(e, protocol.ResolveApproval,
				protocol.ApprovalResolveRequest{RequestID: id, Outcome: protocol.ApprovalStateTimedOut})
			return err
		}, protocol.ApprovalStateTimedOut},
		{"cancel turn", "turn-c", func(string) error {
			_, err := request(e, protocol.CancelTurnApprovals,
				protocol.ApprovalCancelTurnRequest{TurnID: "turn-c"})
			return err
		}, protocol.ApprovalStateCancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := e.ask(tc.turn, "ws", "write_file", `{"path":"`+tc.name+`.txt"}`)
			if st, err := e.state(id); err != nil || st != protocol.ApprovalStatePending {
				t.Fatalf("state before: %q %v", st, err)
			}
			ch := e.decisions(id)
			if err := tc.end(id); err != nil {
				t.Fatal(err)
			}
			ev := nextNotice(t, ch)
			if ev.RequestID != id || ev.TurnID != tc.turn || ev.State != tc.state {
				t.Fatalf("notice %+v, want %s %s %s", ev, id, tc.turn, tc.state)
			}
			if st, err := e.state(id); err != nil || st != tc.state {
				t.Fatalf("state after: %q %v", st, err)
			}
			// A later attempt changes nothing and announces nothing.
			_ = tc.end(id)
			if err := e.nc.Flush(); err != nil {
				t.Fatal(err)
			}
			select {
			case ev := <-ch:
				t.Fatalf("second notice %+v", ev)
			default:
			}
		})
	}
}

// TestSweeperTimeoutIsAnnounced: a timeout with no runner left is
// announced too (a runner that comes back and waits learns it).
func TestSweeperTimeoutIsAnnounced(t *testing.T) {
	e := newEnv(t, Config{Timeout: 200 * time.Millisecond, SweepInterval: 20 * time.Millisecond})
	id := e.ask("turn-1", "ws", "write_file", `{"path":"a.txt"}`)
	ch := e.decisions(id)
	if ev := nextNotice(t, ch); ev.State != protocol.ApprovalStateTimedOut {
		t.Fatalf("notice %+v", ev)
	}
}

func TestStateOfUnknownApproval(t *testing.T) {
	e := newEnv(t, Config{})
	for _, id := range []string{protocol.NewUUID(), "bad id"} {
		if _, err := e.state(id); protocol.KindOf(err) != protocol.NotFound {
			t.Fatalf("state of %q: %v, want not found", id, err)
		}
	}
}
