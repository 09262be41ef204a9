package turnevents

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/waggle-os/core/libs/natstest"
	"github.com/waggle-os/core/libs/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// setup starts a server with the turn stream and returns its JetStream.
func setup(t *testing.T) jetstream.JetStream {
	t.Helper()
	srv := natstest.Start(t)
	js := newJS(t, srv.Conn("test"))
	createStream(t, js, jetstream.MemoryStorage, 1)
	return js
}

// A turn's events, whatever their kind, are stored in the order emitted
// and numbered 1, 2, 3, … with no hole; the terminal event is last.
func TestNumberingDenseAndOrdered(t *testing.T) {
	js := setup(t)
	p := New(js, "turn-dense", nil)
	defer p.Close()
	var want []string
	emit := func(event string, data any) {
		t.Helper()
		if err := p.Emit(event, data); err != nil {
			t.Fatalf("emit %s: %v", event, err)
		}
	}
	if err := p.Note(protocol.EventStart, map[string]string{"runner": "r1"}); err != nil {
		t.Fatal(err)
	}
	want = append(want, protocol.EventStart)
	for i := range 50 {
		emit(protocol.EventToken, protocol.TokenData{Content: fmt.Sprintf("t%d ", i)})
		want = append(want, protocol.EventToken)
		if i%10 == 9 {
			emit(protocol.EventStep, protocol.TokenData{Content: "step"})
			want = append(want, protocol.EventStep)
		}
	}
	if err := p.Mark(protocol.EventCheckpointStep, protocol.StepCheckpoint{}); err != nil {
		t.Fatalf("mark: %v", err)
	}
	want = append(want, protocol.EventCheckpointStep)
	if err := p.Finish(protocol.EventDone, map[string]string{"content": "x"}); err != nil {
		t.Fatalf("finish: %v", err)
	}
	want = append(want, protocol.EventDone)

	stored := readStored(t, js, "turn-dense")
	evs := checkDense(t, stored)
	if len(evs) != len(stored) {
		t.Fatalf("a bus without faults stored %d events for %d: copies", len(stored), len(evs))
	}
	if p.Last() != uint64(len(evs)) {
		t.Errorf("Last() = %d, stream holds %d events", p.Last(), len(evs))
	}
	// Tokens emitted faster than the stream acknowledges may be joined;
	// nothing else is, and nothing moves.
	var got []string
	for _, e := range evs {
		if e.event != protocol.EventToken || len(got) == 0 || got[len(got)-1] != protocol.EventToken {
			got = append(got, e.event)
		}
	}
	var wantRuns []string
	for _, e := range want {
		if e != protocol.EventToken || len(wantRuns) == 0 || wantRuns[len(wantRuns)-1] != protocol.EventToken {
			wantRuns = append(wantRuns, e)
		}
	}
	if strings.Join(got, ",") != strings.Join(wantRuns, ",") {
		t.Fatalf("stored %v, emitted %v", got, wantRuns)
	}
	text, _ := tokenText(t, evs)
	var wantText strings.Builder
	for i := range 50 {
		fmt.Fprintf(&wantText, "t%d ", i)
	}
	if text != wantText.String() {
		t.Errorf("token text %q, want %q", text, wantText.String())
	}
}

// A turn taken over continues the numbering after the last stored event,
// and what the log reader reports matches.
func TestContinueAtAndReadLog(t *testing.T) {
	js := setup(t)
	first := New(js, "turn-resume", nil)
	_ = first.Note(protocol.EventPath, protocol.PathCheckpoint{Path: protocol.TurnPathEcho, Text: "a b"})
	_ = first.Emit(protocol.EventToken, protocol.TokenData{Content: "a "})
	first.Drain(testWait)
	first.Close()

	lg, err := ReadLog(context.Background(), js, "turn-resume")
	if err != nil {
		t.Fatal(err)
	}
	if lg.Last != 2 || lg.Text != "a " || lg.Tokens != 1 || lg.Path == nil || lg.Path.Text != "a b" || lg.Ended {
		t.Fatalf("log = %+v", lg)
	}
	second := New(js, "turn-resume", nil)
	defer second.Close()
	second.ContinueAt(lg.Last)
	_ = second.Emit(protocol.EventToken, protocol.TokenData{Content: "b"})
	if err := second.Finish(protocol.EventDone, map[string]string{}); err != nil {
		t.Fatal(err)
	}
	evs := readStored(t, js, "turn-resume")
	evs = checkDense(t, evs)
	lg, err = ReadLog(context.Background(), js, "turn-resume")
	if err != nil || !lg.Ended || lg.Text != "a b" || lg.Last != 4 {
		t.Fatalf("log after the end = %+v, %v", lg, err)
	}
}

// Held events reach the stream only on Release, in order and numbered
// after the events before the hold; discarded ones never do and leave no
// hole in the numbering.
func TestHoldReleaseDiscard(t *testing.T) {
	js := setup(t)
	p := New(js, "turn-hold", nil)
	defer p.Close()
	_ = p.Note(protocol.EventStart, map[string]string{})
	p.Hold()
	_ = p.Emit(protocol.EventToken, protocol.TokenData{Content: "secret"})
	p.Discard()
	p.Hold()
	for i := range 40 { // beyond the window: the rest are joined
		_ = p.Emit(protocol.EventToken, protocol.TokenData{Content: fmt.Sprintf("%d,", i)})
	}
	_ = p.Emit(protocol.EventStep, protocol.TokenData{Content: "s"})
	p.Release()
	if err := p.Finish(protocol.EventDone, map[string]string{}); err != nil {
		t.Fatal(err)
	}
	evs := readStored(t, js, "turn-hold")
	evs = checkDense(t, evs)
	text, n := tokenText(t, evs)
	if strings.Contains(text, "secret") {
		t.Fatal("a discarded token reached the stream")
	}
	var want strings.Builder
	for i := range 40 {
		fmt.Fprintf(&want, "%d,", i)
	}
	if text != want.String() {
		t.Fatalf("held tokens = %q, want %q", text, want.String())
	}
	if n >= 40 {
		t.Errorf("%d token events for 40 held tokens: not joined", n)
	}
}

// While the stream does not acknowledge, tokens beyond the window are
// joined (fewer, larger events), the emitter is held back once the joined
// text reaches its bound (memory stays bounded however fast the model
// is), and once acknowledgements flow every token arrives, once, in order.
func TestCoalescingAndBackpressure(t *testing.T) {
	js := setup(t)
	f := newFaulty(js)
	f.gate = make(chan struct{})
	p := New(f, "turn-slow", nil)
	p.suspect = testWait // slow, not lost: nothing is re-published
	defer p.Close()

	const tok = "0123456789abcdef" // 16 bytes
	total := 2*maxPendingText/len(tok) + 100
	blocked := make(chan int, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range total {
			if i == tokenWindow+maxPendingText/len(tok)-1 { // the window is full, the rest join

				blocked <- i // it got this far while no ack came
			}
			if err := p.Emit(protocol.EventToken, protocol.TokenData{Content: tok}); err != nil {
				t.Errorf("token %d: %v", i, err)
				return
			}
		}
	}()
	var reached int
	select {
	case reached = <-blocked:
	case <-time.After(testWait):
		t.Fatal("the emitter did not get as far as the pending bound")
	}
	select {
	case <-done:
		t.Fatalf("all %d tokens (%d KiB) were taken with no acknowledgement: no backpressure", total, total*len(tok)>>10)
	case <-time.After(200 * time.Millisecond):
	}
	p.mu.Lock()
	held := len(p.pending) + p.unackedBytes
	inflight := len(p.unacked)
	p.mu.Unlock()
	if held > maxPendingText+tokenWindowBytes || inflight > tokenWindow {
		t.Fatalf("while stalled the publisher holds %d bytes in %d events: unbounded", held, inflight)
	}
	if reached == 0 {
		t.Fatal("unreachable")
	}
	f.mu.Lock()
	close(f.gate)
	f.gate = nil
	f.mu.Unlock()
	within(t, done, "emitting after the acknowledgements came")
	if err := p.Finish(protocol.EventDone, map[string]string{}); err != nil {
		t.Fatal(err)
	}
	evs := readStored(t, js, "turn-slow")
	evs = checkDense(t, evs)
	text, n := tokenText(t, evs)
	if text != strings.Repeat(tok, total) {
		t.Fatalf("token text: %d bytes, want %d", len(text), total*len(tok))
	}
	if n >= total/2 {
		t.Errorf("%d token events for %d tokens: not coalesced", n, total)
	}
	if f.resent.Load() != 0 {
		t.Errorf("%d re-publishes: a slow stream is not a lost one", f.resent.Load())
	}
}

// An acknowledgement that never comes (the event was stored): the event
// and those after it are re-published with the same Nats-Msg-Id, and the
// stream keeps each once, in order.
func TestLostAcknowledgementRepublishedOnce(t *testing.T) {
	js := setup(t)
	f := newFaulty(js)
	f.lose = func(num uint64) bool { return num == 2 || num == 3 }
	p := New(f, "turn-lost-ack", nil)
	p.suspect = 100 * time.Millisecond
	defer p.Close()
	for i := range 20 {
		if err := p.Emit(protocol.EventToken, protocol.TokenData{Content: fmt.Sprintf("%d ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Finish(protocol.EventDone, map[string]string{}); err != nil {
		t.Fatalf("finish: %v", err)
	}
	evs := readStored(t, js, "turn-lost-ack")
	evs = checkDense(t, evs)
	text, _ := tokenText(t, evs)
	if want := "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 "; text != want {
		t.Fatalf("text %q, want %q", text, want)
	}
	if f.resent.Load() == 0 {
		t.Fatal("nothing was re-published: the lost acknowledgement went unnoticed")
	}
}

// A publish the stream answers with an error (no responders: no leader)
// is re-published, in order, once it answers.
func TestRefusedPublishRepublished(t *testing.T) {
	js := setup(t)
	f := newFaulty(js)
	f.refuse = func(num uint64) bool { return num == 2 || num == 3 }
	p := New(f, "turn-refused", nil)
	defer p.Close()
	for i := range 20 {
		_ = p.Emit(protocol.EventToken, protocol.TokenData{Content: fmt.Sprintf("%d ", i)})
	}
	if err := p.Finish(protocol.EventDone, map[string]string{}); err != nil {
		t.Fatalf("finish: %v", err)
	}
	evs := readStored(t, js, "turn-refused")
	evs = checkDense(t, evs)
	if f.resent.Load() == 0 {
		t.Fatal("nothing was re-published after a refusal")
	}
	text, _ := tokenText(t, evs)
	if want := "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 "; text != want {
		t.Fatalf("text %q, want %q", text, want)
	}
}

// A Mark waits for the stream; a Mark whose acknowledgement is lost is
// re-published and still returns once stored.
func TestMarkWaitsThroughALostAck(t *testing.T) {
	js := setup(t)
	f := newFaulty(js)
	f.lose = func(num uint64) bool { return num == 2 }
	p := New(f, "turn-mark", nil)
	p.suspect = 100 * time.Millisecond
	defer p.Close()
	_ = p.Note(protocol.EventStart, map[string]string{})
	if err := p.Mark(protocol.EventCheckpointExec, protocol.ExecCheckpoint{}); err != nil {
		t.Fatalf("mark: %v", err)
	}
	p.mu.Lock()
	acked := p.acked
	p.mu.Unlock()
	if acked != 2 {
		t.Fatalf("Mark returned with events acknowledged up to %d, want 2", acked)
	}
	if f.asyncCount(2) != 1 || f.resent.Load() == 0 {
		t.Fatalf("async publishes of the mark %d, re-publishes %d", f.asyncCount(2), f.resent.Load())
	}
	if err := p.Finish(protocol.EventDone, map[string]string{}); err != nil {
		t.Fatal(err)
	}
	checkDense(t, readStored(t, js, "turn-mark"))
}

// Begin stores a turn's first event and says whether it was the first to:
// a second publisher of the same turn (the same start delivered again, on
// this runner or another) finds the event stored and stores nothing; the
// first publisher's later events follow it, numbered from 2.
func TestBeginRefusesASecondStart(t *testing.T) {
	js := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	p := New(js, "turn-begin", nil)
	defer p.Close()
	first, err := p.Begin(ctx, protocol.EventStart, map[string]string{"runner": "r1"})
	if err != nil || !first {
		t.Fatalf("first Begin: first=%v err=%v", first, err)
	}
	again := New(js, "turn-begin", nil)
	defer again.Close()
	if first, err := again.Begin(ctx, protocol.EventStart, map[string]string{"runner": "r2"}); err != nil || first {
		t.Fatalf("second Begin of the same turn: first=%v err=%v, want false", first, err)
	}
	if err := p.Finish(protocol.EventDone, map[string]string{"content": "x"}); err != nil {
		t.Fatal(err)
	}
	got := readStored(t, js, "turn-begin")
	if len(got) != 2 || got[0].event != protocol.EventStart || got[0].num != 1 || string(got[0].data) != `{"runner":"r1"}` ||
		got[1].event != protocol.EventDone || got[1].num != 2 {
		t.Fatalf("stored %+v, want the first start then done", got)
	}
	if _, err := p.Begin(ctx, protocol.EventStart, nil); err == nil {
		t.Fatal("Begin after other events accepted")
	}
}
