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
