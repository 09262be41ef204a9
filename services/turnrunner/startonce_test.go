package turnrunner

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

// The deliveries of one turn's start share its one outcome: a copy of a
// start under way is refused at once (the gateway awaits the first
// delivery's answer), a first delivery handled after its own copy waits
// for that copy's start and answers its success (never TURN_EXISTS for
// the client's own turn), a copy of a failed start answers that failure
// instead of running, and a new attempt (a first delivery) starts afresh.
func TestDeliveriesOfOneStartShareItsOutcome(t *testing.T) {
	var st starts
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// A copy handled first runs the start.
	copyFlight, mine := st.join("t1", true)
	if !mine {
		t.Fatal("the first delivery of a start to arrive does not run it")
	}
	// Another copy meanwhile: refused at once.
	f, mine := st.join("t1", true)
	if mine {
		t.Fatal("a second copy runs the start again")
	}
	if _, err := sameStart(ctx, f, true); !errors.Is(err, protocol.ErrTurnExists) {
		t.Fatalf("a copy of a start under way: %v, want TURN_EXISTS at once", err)
	}
	// The first delivery, handled after its copy: waits, then shares the
	// copy's success.
	f, mine = st.join("t1", false)
	if mine {
		t.Fatal("the first delivery runs the start its copy runs")
	}
	answered := make(chan error, 1)
	go func() {
		rep, err := sameStart(ctx, f, false)
		if err == nil && rep.TurnID != "t1" {
			err = errors.New("answered another turn: " + rep.TurnID)
		}
		answered <- err
	}()
	st.finish(copyFlight, protocol.TurnStarted{TurnID: "t1"}, nil)
	if err := <-answered; err != nil {
		t.Fatalf("the first delivery answered %v, want the copy's success", err)
	}
	// A success is not kept: the turn's stored events answer later
	// copies (startTurn: TURN_EXISTS).
	if _, mine := st.join("t1", true); !mine {
		t.Fatal("a successful start is still on record")
	}

	// A failed start answers its copies with its failure, not a new run.
	failed, _ := st.join("t2", false)
	st.finish(failed, protocol.TurnStarted{}, protocol.ErrBusUnavailable)
	f, mine = st.join("t2", true)
	if mine {
		t.Fatal("a copy of a failed start runs it again")
	}
	if _, err := sameStart(ctx, f, true); !errors.Is(err, protocol.ErrBusUnavailable) {
		t.Fatalf("a copy of a failed start: %v, want its failure", err)
	}
	// The gateway's next attempt (a first delivery, after RUNNER_BUSY)
	// runs.
	if _, mine := st.join("t2", false); !mine {
		t.Fatal("a new attempt of a failed start does not run")
	}
}

// A failed start is forgotten after startMemory: the record does not grow
// with the runner's age.
func TestFailedStartsAreForgotten(t *testing.T) {
	var st starts
	old, _ := st.join("old", false)
	st.finish(old, protocol.TurnStarted{}, protocol.ErrRunnerBusy)
	old.at = time.Now().Add(-startMemory - time.Second)
	recent, _ := st.join("recent", false)
	st.finish(recent, protocol.TurnStarted{}, protocol.ErrRunnerBusy)
	if _, ok := st.flights["old"]; ok || len(st.failed) != 1 {
		t.Fatalf("kept %d failed starts (old one kept: %v), want only the recent one", len(st.failed), ok)
	}
}
