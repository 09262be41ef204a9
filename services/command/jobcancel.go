package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

// cancelledError is the job's error after a cancel, in the original's
// words ("Cancelled by user").
const cancelledError = "Cancelled by user"

// markCancelled turns j into a cancelled job: steps not started are
// skipped, a running step is cancelled; finished steps keep their output.
func markCancelled(j *protocol.GroupJob, now time.Time) {
	j.Status, j.Error, j.Result = protocol.JobCancelled, cancelledError, ""
	if j.FinishedAt == "" {
		j.FinishedAt = stamp(now)
	}
	for k := range j.Steps {
		switch j.Steps[k].Status {
		case protocol.StepPending:
			j.Steps[k].Status = protocol.StepSkipped
		case protocol.JobRunning:
			j.Steps[k].Status = protocol.JobCancelled
		}
	}
}

// cancelJob cancels a queued or running job. Any instance may answer:
// the job is marked cancelled in the bucket with a compare-and-set (the
// owner's step updates are compare-and-sets too, so neither overwrites
// the other), then GroupJobCancels tells the instance running it to stop.
// A job whose instance died is cancelled all the same. A job that has
// already ended is a Conflict, as the original's 409.
func (s *Service) cancelJob(ctx context.Context, req protocol.GroupJobRequest) (protocol.GroupJobCancelReply, error) {
	if !protocol.ValidID(req.JobID) {
		return protocol.GroupJobCancelReply{}, errJobNotFound
	}
	for {
		e, err := s.jobs.Get(ctx, req.JobID)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			return protocol.GroupJobCancelReply{}, errJobNotFound
		}
		if err != nil {
			return protocol.GroupJobCancelReply{}, fmt.Errorf("command: read job %s: %w", req.JobID, err)
		}
		var job protocol.GroupJob
		if err := json.Unmarshal(e.Value(), &job); err != nil {
			return protocol.GroupJobCancelReply{}, fmt.Errorf("command: decode job %s: %w", req.JobID, err)
		}
		if req.GroupID != "" && job.GroupID != req.GroupID {
			return protocol.GroupJobCancelReply{}, errJobNotFound
		}
		if job.Status != protocol.JobQueued && job.Status != protocol.JobRunning {
			return protocol.GroupJobCancelReply{}, protocol.Errorf(protocol.Conflict, "Cannot cancel job with status %q", job.Status)
		}
		now := time.Now()
		markCancelled(&job, now)
		job.UpdatedAt = stamp(now)
		data, err := json.Marshal(job)
		if err != nil {
			return protocol.GroupJobCancelReply{}, fmt.Errorf("command: encode job: %w", err)
		}
		_, err = s.jobs.Update(ctx, req.JobID, data, e.Revision())
		if errors.Is(err, jetstream.ErrKeyExists) {
			// The run wrote a step in between: read it again. Each pass
			// sees a newer revision of a run with finitely many steps,
			// and the request's deadline bounds the loop.
			continue
		}
		if err != nil {
			return protocol.GroupJobCancelReply{}, fmt.Errorf("command: store job %s: %w", req.JobID, err)
		}
		if err := bus.Publish(s.nc, protocol.GroupJobCancels, protocol.GroupJobRequest{JobID: req.JobID}); err != nil {
			// The job is cancelled; its owner sees it at its next
			// step write and stops then.
			s.log.Warn("publish job cancel", "job", req.JobID, "err", err)
		}
		return protocol.GroupJobCancelReply{Cancelled: true, JobID: req.JobID}, nil
	}
}

// onJobCancel stops the run of a cancelled job when it runs here.
func (s *Service) onJobCancel(m protocol.GroupJobRequest) {
	s.activeMu.Lock()
	r := s.active[m.JobID]
	s.activeMu.Unlock()
	if r != nil {
		r.cancel()
	}
}

func (s *Service) track(r *run) {
	s.activeMu.Lock()
	defer s.activeMu.Unlock()
	if s.active == nil {
		s.active = map[string]*run{}
	}
	s.active[r.id] = r
}

func (s *Service) untrack(r *run) {
	s.activeMu.Lock()
	defer s.activeMu.Unlock()
	delete(s.active, r.id)
}
