package turnrunner

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/retrieval"
	"github.com/waggle-os/core/services/turnrunner/turnevents"
)

// startAgentRun takes a one-shot retrieval run (POST /api/agent/run). It
// shares the turn slots and the turn stream, but not a turn's session,
// lease or history: a run has no session and is not resumed after a crash
// (its client gets the gateway's orphan error instead).
func (s *Service) startAgentRun(rctx context.Context, req protocol.AgentRunRequest) (protocol.TurnStarted, error) {
	if req.TurnID == "" {
		req.TurnID = protocol.NewUUID()
	}
	if !protocol.ValidID(req.TurnID) {
		return protocol.TurnStarted{}, protocol.Errorf(protocol.Invalid, "invalid turn id")
	}
	if req.Question == "" {
		return protocol.TurnStarted{}, protocol.Errorf(protocol.Invalid, "question is required")
	}
	if req.User != "" && !protocol.ValidID(req.User) {
		return protocol.TurnStarted{}, protocol.Errorf(protocol.Invalid, "invalid user")
	}
	if s.stopping.Load() {
		return protocol.TurnStarted{}, protocol.ErrUnavailable
	}
	select {
	case s.slots <- struct{}{}:
	default:
		return protocol.TurnStarted{}, protocol.ErrRunnerBusy
	}
	// The start marker, stored before the answer, is the run's record: the
	// gateway sends a start again when its answer does not come (lost with
	// a dying cluster node), and whichever runner gets the copy finds the
	// marker there and refuses it instead of running the question twice.
	pub := turnevents.New(s.js, req.TurnID, nil)
	mctx, mcancel := context.WithTimeout(rctx, startMarkWait)
	first, err := pub.Begin(mctx, protocol.EventStart, protocol.StartMarker{Runner: s.id, Workspace: req.Workspace})
	mcancel()
	if err != nil || !first {
		pub.Close()
		<-s.slots
		if err != nil {
			return protocol.TurnStarted{}, storageError(err)
		}
		return protocol.TurnStarted{}, protocol.ErrTurnExists
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	s.mu.Lock()
	s.runs[req.TurnID] = cancel
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer func() {
			s.mu.Lock()
			delete(s.runs, req.TurnID)
			s.mu.Unlock()
			cancel(nil)
			<-s.slots
			s.wg.Done()
		}()
		defer pub.Close()
		emit := runEmitter{pub}
		if req.Model == "" {
			req.Model = cmp.Or(s.models.Get().DefaultModel, s.fallbackModel())
		}
		err := s.retrieval.Run(ctx, req, retrieval.NewBusSearcher(s.nc, s.cfg.StoreTimeout).ForUser(req.User), emit)
		if err != nil && !errors.Is(err, context.Canceled) {
			s.log.Warn("agent run failed", "turn", req.TurnID, "err", err)
		}
	}()
	return protocol.TurnStarted{TurnID: req.TurnID}, nil
}

// startMarkWait bounds the write of a run's start marker: a start that
// cannot be recorded in it answers 503, and the gateway sends it again.
const startMarkWait = 5 * time.Second

// runEmitter publishes a run's events; done, always the run's last event,
// is the stream's terminal event.
type runEmitter struct{ pub *turnevents.Publisher }

func (e runEmitter) Emit(event string, data any) error {
	if event == protocol.AgentRunEventDone {
		return e.pub.Finish(event, data)
	}
	return e.pub.Emit(event, data)
}

// cancelRun stops a retrieval run (its client left or asked).
func (s *Service) cancelRun(id string, cause error) bool {
	s.mu.Lock()
	cancel := s.runs[id]
	s.mu.Unlock()
	if cancel == nil {
		return false
	}
	cancel(cause)
	return true
}
