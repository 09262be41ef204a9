package turnevents

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/protocol"
)

// What a re-publish leaves in the stream (a later event stored ahead of
// the lost ones, copies of events stored twice) reads back as the turn
// emitted it: a resumed turn neither repeats nor skips text.
func TestReadLogSkipsRepublishCopies(t *testing.T) {
	js := setup(t)
	const turn = "turn-log-copies"
	ctx := context.Background()
	for _, n := range []uint64{1, 2, 5, 3, 4, 5, 6, 6} {
		m := &nats.Msg{Subject: protocol.TurnEvents(turn), Header: nats.Header{}}
		m.Header.Set(protocol.HeaderEvent, protocol.EventToken)
		m.Header.Set(protocol.HeaderEventNum, strconv.FormatUint(n, 10))
		m.Data = fmt.Appendf(nil, `{"content":"t%d "}`, n)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	lg, err := ReadLog(ctx, js, turn)
	if err != nil {
		t.Fatal(err)
	}
	if lg.Text != "t1 t2 t3 t4 t5 t6 " || lg.Tokens != 6 || lg.Last != 6 {
		t.Fatalf("log = %q, %d tokens, last %d", lg.Text, lg.Tokens, lg.Last)
	}
}

// LastEvent tells a turn that never began (no event) from one that did,
// and names its last event: what decides whether a lease nobody runs is
// ended or its turn claimed back, and whether an end is still needed.
func TestLastEventSaysWhetherATurnBeganAndEnded(t *testing.T) {
	js := setup(t)
	ctx := context.Background()
	if ev, ok, err := LastEvent(ctx, js, "turn-none"); err != nil || ok || ev != "" {
		t.Fatalf("a turn with no event: %q %v %v", ev, ok, err)
	}
	p := New(js, "turn-last", nil)
	defer p.Close()
	if err := p.Emit(protocol.EventToken, protocol.TokenData{Content: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := p.Finish(protocol.EventDone, map[string]string{"content": "a"}); err != nil {
		t.Fatal(err)
	}
	if ev, ok, err := LastEvent(ctx, js, "turn-last"); err != nil || !ok || ev != protocol.EventDone {
		t.Fatalf("an ended turn: %q %v %v, want done", ev, ok, err)
	}
}
