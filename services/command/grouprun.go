package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

var (
	errGroupNotFound = &protocol.Error{Kind: protocol.NotFound, Message: "Group not found"}
	errJobNotFound   = &protocol.Error{Kind: protocol.NotFound, Message: "Job not found"}
	errTaskRequired  = &protocol.Error{Kind: protocol.Invalid, Message: "task is required"}
	// errStopped is a step's error when the service shut down under it.
	errStopped = errors.New("interrupted: the command service stopped")
)

// kvTimeout bounds one job write; a job write still happens after the run
// was cancelled, so it does not use the run's context.
const kvTimeout = 5 * time.Second

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// groupRun checks the group (404 first) and the task (then 400), stores
// the queued job and starts running it on a goroutine owned by the service.
func (s *Service) groupRun(ctx context.Context, req protocol.GroupRunRequest) (protocol.GroupJob, error) {
	if !protocol.ValidID(req.GroupID) {
		return protocol.GroupJob{}, errGroupNotFound
	}
	g, err := bus.Call(ctx, s.nc, protocol.GetGroup, protocol.AgentGroupRef{ID: req.GroupID}, bus.Within(s.cfg.RequestTimeout))
	if err != nil {
		return protocol.GroupJob{}, err
	}
	if strings.TrimSpace(req.Task) == "" {
		return protocol.GroupJob{}, errTaskRequired
	}
	ws := req.Workspace
	if ws == "" {
		ws = "default"
	}
	if !protocol.ValidID(ws) {
		return protocol.GroupJob{}, protocol.Errorf(protocol.Invalid, "Invalid workspaceId: contains illegal characters")
	}
	if req.User != "" && !protocol.ValidID(req.User) {
		return protocol.GroupJob{}, protocol.Errorf(protocol.Invalid, "invalid user")
	}
	now := stamp(time.Now())
	job := protocol.GroupJob{
		JobID: protocol.NewUUID(), GroupID: g.ID, GroupName: g.Name, Strategy: g.Strategy,
		MemberCount: len(g.Members), Task: req.Task, TeamID: req.TeamID, Workspace: ws,
		Status: protocol.JobQueued, CreatedAt: now, UpdatedAt: now,
	}
	job.Steps = planSteps(job.JobID, g)
	data, err := json.Marshal(job)
	if err != nil {
		return protocol.GroupJob{}, fmt.Errorf("command: encode job: %w", err)
	}
	kctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	rev, err := s.jobs.Create(kctx, job.JobID, data)
	if err != nil {
		return protocol.GroupJob{}, fmt.Errorf("command: store job %s: %w", job.JobID, err)
	}
	runCtx, stop := context.WithCancel(s.runCtx)
	r := &run{s: s, id: job.JobID, job: cloneJob(job), rev: rev, stop: stop, group: g, task: job.Task, ws: ws, user: req.User, steps: len(job.Steps)}
	s.track(r)
	s.runs.Add(1)
	go func() {
		defer s.runs.Done()
		defer s.untrack(r)
		defer stop()
		r.execute(runCtx)
	}()
	return job, nil
}

// groupJob reads a job; a job of another group is not found (no group:
// any job, for GET /api/jobs/{id}, which checks the job's team itself).
func (s *Service) groupJob(ctx context.Context, req protocol.GroupJobRequest) (protocol.GroupJob, error) {
	if !protocol.ValidID(req.JobID) {
		return protocol.GroupJob{}, errJobNotFound
	}
	job, err := s.readJob(ctx, req.JobID)
	if err != nil {
		return job, err
	}
	if req.GroupID != "" && job.GroupID != req.GroupID {
		return protocol.GroupJob{}, errJobNotFound
	}
	return job, nil
}

func (s *Service) readJob(ctx context.Context, id string) (protocol.GroupJob, error) {
	var job protocol.GroupJob
	e, err := s.jobs.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return job, errJobNotFound
	}
	if err != nil {
		return job, fmt.Errorf("command: read job %s: %w", id, err)
	}
	if err := json.Unmarshal(e.Value(), &job); err != nil {
		return job, fmt.Errorf("command: decode job %s: %w", id, err)
	}
	return job, nil
}

// agentsActive scans the job bucket: every step of a running job is a
// worker, the steps whose turn runs now are active. The bucket holds only
// recent jobs (JobTTL), so a scan stays small.
func (s *Service) agentsActive(ctx context.Context, _ protocol.Empty) (protocol.ActiveAgents, error) {
	out := protocol.ActiveAgents{Workers: []protocol.ActiveAgent{}, Active: []protocol.ActiveAgent{}}
	lister, err := s.jobs.ListKeys(ctx)
	if err != nil {
		return out, fmt.Errorf("command: list jobs: %w", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	// The lister has already finished here; Stop only releases it, and
	// reports "invalid subscription" when that happened on its own.
	_ = lister.Stop()
	sort.Strings(keys)
	for _, k := range keys {
		job, err := s.readJob(ctx, k)
		if err != nil || job.Status != protocol.JobRunning {
			continue
		}
		for _, st := range job.Steps {
			a := protocol.ActiveAgent{
				JobID: job.JobID, GroupID: job.GroupID, GroupName: job.GroupName, AgentID: st.AgentID,
				RoleInGroup: st.RoleInGroup, ExecutionOrder: st.ExecutionOrder, Phase: st.Phase, Status: st.Status,
				Session: st.Session, TurnID: st.TurnID, StartedAt: st.StartedAt, TeamID: job.TeamID,
			}
			out.Workers = append(out.Workers, a)
			if st.Status == protocol.JobRunning {
				out.Active = append(out.Active, a)
			}
		}
	}
	return out, nil
}

// planSteps lays out a run: members in executionOrder (ties keep their
// stored order); a coordinator's lead (the first member whose role is
// "lead", else the first member) plans first and combines last.
func planSteps(jobID string, g protocol.AgentGroup) []protocol.GroupJobStep {
	members := append([]protocol.AgentGroupMember(nil), g.Members...)
	sort.SliceStable(members, func(i, j int) bool { return members[i].ExecutionOrder < members[j].ExecutionOrder })
	step := func(m protocol.AgentGroupMember, phase string) protocol.GroupJobStep {
		return protocol.GroupJobStep{AgentID: m.AgentID, RoleInGroup: m.RoleInGroup, ExecutionOrder: m.ExecutionOrder, Phase: phase, Status: protocol.StepPending}
	}
	var steps []protocol.GroupJobStep
	if g.Strategy == protocol.StrategyCoordinator && len(members) > 0 {
		lead := 0
		for i, m := range members {
			if strings.EqualFold(m.RoleInGroup, protocol.RoleLead) {
				lead = i
				break
			}
		}
		steps = append(steps, step(members[lead], protocol.PhasePlan))
		for i, m := range members {
			if i != lead {
				steps = append(steps, step(m, protocol.PhaseWork))
			}
		}
		steps = append(steps, step(members[lead], protocol.PhaseCombine))
	} else {
		for _, m := range members {
			steps = append(steps, step(m, ""))
		}
	}
	for i := range steps {
		steps[i].Session = fmt.Sprintf("group-%s-%d", jobID, i+1)
	}
	if steps == nil {
		steps = []protocol.GroupJobStep{}
	}
	return steps
}

func cloneJob(j protocol.GroupJob) protocol.GroupJob {
	j.Steps = append([]protocol.GroupJobStep(nil), j.Steps...)
	return j
}

// run is one group run in progress. Its job record is written to the
// bucket on every change, under mu so writes land in order.
type run struct {
	s     *Service
	id    string
	group protocol.AgentGroup
	// task, ws, user and steps never change; step goroutines read them
	// freely.
	task string
	ws   string
	// user is the team-server user who started the run ("" locally):
	// every member's turn runs as them, so their team's governance
	// (blocked tools) applies as in their own chats.
	user  string
	steps int

	// stop cancels the run's context: its member turns are cancelled.
	stop context.CancelFunc

	mu  sync.Mutex
	job protocol.GroupJob
	// rev is the job's revision this run wrote last: a write is a
	// compare-and-set on it, so a cancel written by another instance
	// (cancelJob) is never overwritten by a late step update.
	rev uint64
	// cancelled says a user cancelled the job: every later write keeps
	// it cancelled. Atomic, so a cancel never waits for a write in
	// progress.
	cancelled atomic.Bool
}

// cancel is the owner's side of a cancel (GroupJobCancels): later writes
// keep the job cancelled, and the member turns stop.
func (r *run) cancel() {
	r.cancelled.Store(true)
	r.stop()
}

func (r *run) update(fn func(j *protocol.GroupJob)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fn(&r.job)
	now := time.Now()
	r.job.UpdatedAt = stamp(now)
	if r.cancelled.Load() {
		markCancelled(&r.job, now)
	}
	ctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
	defer cancel()
	for {
		data, err := json.Marshal(r.job)
		if err != nil {
			r.s.log.Error("encode job", "job", r.job.JobID, "err", err)
			return
		}
		rev, err := r.s.jobs.Update(ctx, r.job.JobID, data, r.rev)
		if err == nil {
			r.rev = rev
			return
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			r.s.log.Error("store job", "job", r.job.JobID, "err", err)
			return
		}
		// Another instance wrote the job since: only a cancel does. Keep
		// this run's step progress, take the cancel, and stop.
		e, err := r.s.jobs.Get(ctx, r.job.JobID)
		if err != nil {
			r.s.log.Error("read job", "job", r.job.JobID, "err", err)
			return
		}
		var stored protocol.GroupJob
		if err := json.Unmarshal(e.Value(), &stored); err != nil {
			r.s.log.Error("decode job", "job", r.job.JobID, "err", err)
			return
		}
		r.rev = e.Revision()
		if stored.Status == protocol.JobCancelled {
			r.cancel()
		}
		if r.cancelled.Load() {
			markCancelled(&r.job, now)
		}
	}
}

func (r *run) step(i int) protocol.GroupJobStep {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.job.Steps[i]
}

func (r *run) execute(ctx context.Context) {
	r.update(func(j *protocol.GroupJob) {
		j.Status = protocol.JobRunning
		j.StartedAt = stamp(time.Now())
	})
	var (
		result string
		err    error
	)
	switch {
	case r.steps == 0:
		err = errors.New("the group has no members")
	case r.group.Strategy == protocol.StrategySequential:
		result, err = r.sequential(ctx)
	case r.group.Strategy == protocol.StrategyParallel:
		result, err = r.parallel(ctx)
	case r.group.Strategy == protocol.StrategyCoordinator:
		result, err = r.coordinator(ctx)
	default:
		err = fmt.Errorf("unknown strategy %q", r.group.Strategy)
	}
	r.update(func(j *protocol.GroupJob) {
		j.FinishedAt = stamp(time.Now())
		if r.cancelled.Load() {
			return // update marks it
		}
		if err != nil {
			j.Status, j.Error = protocol.JobFailed, err.Error()
			for k := range j.Steps {
				if j.Steps[k].Status == protocol.StepPending {
					j.Steps[k].Status = protocol.StepSkipped
				}
			}
			return
		}
		j.Status, j.Result = protocol.JobCompleted, result
	})
}

func (r *run) sequential(ctx context.Context) (string, error) {
	n := r.steps
	var prev, prevAgent string
	for i := range n {
		st := r.step(i)
		var b strings.Builder
		fmt.Fprintf(&b, "You are agent %q (role: %s) in the agent group %q. The members work on the task one after another; you are step %d of %d.\n\nTask:\n%s",
			st.AgentID, st.RoleInGroup, r.group.Name, i+1, n, r.task)
		if i > 0 {
			fmt.Fprintf(&b, "\n\nOutput of the previous member, agent %q:\n%s", prevAgent, clip(prev, r.s.cfg.MaxHandoff))
		}
		b.WriteString("\n\nDo your part of the task and reply with your result.")
		out, err := r.runStep(ctx, i, b.String())
		if err != nil {
			return "", fmt.Errorf("agent %q failed: %w", st.AgentID, err)
		}
		prev, prevAgent = out, st.AgentID
	}
	return prev, nil
}

func (r *run) parallel(ctx context.Context) (string, error) {
	idx := make([]int, r.steps)
	for i := range idx {
		idx[i] = i
	}
	outs, err := r.concurrently(ctx, idx, func(st protocol.GroupJobStep) string {
		return fmt.Sprintf("You are agent %q (role: %s) in the agent group %q. The members work on the task at the same time.\n\nTask:\n%s\n\nDo your part of the task and reply with your result.",
			st.AgentID, st.RoleInGroup, r.group.Name, r.task)
	})
	if err != nil {
		return "", err
	}
	return sections(r, idx, outs, 0), nil
}

func (r *run) coordinator(ctx context.Context) (string, error) {
	n := r.steps
	lead := r.step(0)
	workers := make([]int, 0, n-2)
	names := make([]string, 0, n-2)
	for i := 1; i < n-1; i++ {
		workers = append(workers, i)
		names = append(names, fmt.Sprintf("%q", r.step(i).AgentID))
	}
	team := "no workers: do the task yourself"
	if len(names) > 0 {
		team = "workers " + strings.Join(names, ", ")
	}
	plan, err := r.runStep(ctx, 0, fmt.Sprintf(
		"You are agent %q, the lead of the agent group %q (%s). Plan how the task below is split: give each worker one clear assignment.\n\nTask:\n%s",
		lead.AgentID, r.group.Name, team, r.task))
	if err != nil {
		return "", fmt.Errorf("lead %q failed to plan: %w", lead.AgentID, err)
	}
	outs, err := r.concurrently(ctx, workers, func(st protocol.GroupJobStep) string {
		return fmt.Sprintf("You are agent %q (role: %s) in the agent group %q. Your lead %q planned the work:\n\n%s\n\nTask:\n%s\n\nDo your assignment and reply with your result.",
			st.AgentID, st.RoleInGroup, r.group.Name, lead.AgentID, clip(plan, r.s.cfg.MaxHandoff), r.task)
	})
	if err != nil {
		return "", err
	}
	results := "(no workers)"
	if len(workers) > 0 {
		results = sections(r, workers, outs, r.s.cfg.MaxHandoff/len(workers))
	}
	return r.runStep(ctx, n-1, fmt.Sprintf(
		"You are agent %q, the lead of the agent group %q. Combine your workers' results into one final answer to the task.\n\nTask:\n%s\n\nResults:\n%s",
		lead.AgentID, r.group.Name, r.task, results))
}

// concurrently runs the given steps at once and waits for all of them;
// the first failure (in step order) is the error.
func (r *run) concurrently(ctx context.Context, idx []int, message func(protocol.GroupJobStep) string) ([]string, error) {
	outs := make([]string, len(idx))
	errs := make([]error, len(idx))
	var wg sync.WaitGroup
	for k, i := range idx {
		st := r.step(i)
		wg.Go(func() { outs[k], errs[k] = r.runStep(ctx, i, message(st)) })
	}
	wg.Wait()
	for k, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("agent %q failed: %w", r.step(idx[k]).AgentID, err)
		}
	}
	return outs, nil
}

// sections joins outputs under their agents' headings, each clipped to
// limit bytes when limit > 0.
func sections(r *run, idx []int, outs []string, limit int) string {
	parts := make([]string, len(idx))
	for k, i := range idx {
		out := outs[k]
		if limit > 0 {
			out = clip(out, limit)
		}
		parts[k] = "### " + r.step(i).AgentID + "\n" + out
	}
	return strings.Join(parts, "\n\n")
}

// runStep runs step i as one chat turn and records its progress.
func (r *run) runStep(ctx context.Context, i int, message string) (string, error) {
	turnID := protocol.NewUUID()
	r.update(func(j *protocol.GroupJob) {
		st := &j.Steps[i]
		st.Status, st.TurnID, st.StartedAt = protocol.JobRunning, turnID, stamp(time.Now())
	})
	st := r.step(i)
	out, err := r.s.runTurn(ctx, protocol.TurnRequest{
		TurnID: turnID, Workspace: r.ws, Session: st.Session, Message: message, User: r.user,
	})
	r.update(func(j *protocol.GroupJob) {
		st := &j.Steps[i]
		st.FinishedAt = stamp(time.Now())
		if err != nil && r.cancelled.Load() {
			st.Status = protocol.JobCancelled
			return
		}
		if err != nil {
			st.Status, st.Error = protocol.JobFailed, err.Error()
			return
		}
		st.Status, st.Output = protocol.JobCompleted, out
	})
	return out, err
}

// runTurn starts a chat turn and reads its events from the turn stream
// until the terminal one. The reply is the done event's content (or the
// streamed tokens when it has none).
func (s *Service) runTurn(ctx context.Context, req protocol.TurnRequest) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StepTimeout)
	defer cancel()
	started, err := bus.Call(ctx, s.nc, protocol.StartTurn, req, bus.Within(s.cfg.RequestTimeout))
	if err != nil {
		if errors.Is(err, protocol.ErrUnavailable) {
			return "", errors.New("no turn runner is available")
		}
		if ctx.Err() != nil {
			// Stopped while the start was on its way: a runner may have
			// accepted the turn all the same (the job already shows it
			// running), so ask for it to stop too.
			s.cancelTurn(req.TurnID)
		}
		return "", s.stepError(ctx, err)
	}
	cons, err := s.js.OrderedConsumer(ctx, protocol.StreamTurns, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{protocol.TurnEvents(started.TurnID)},
	})
	if err != nil {
		s.cancelTurn(started.TurnID)
		return "", s.stepError(ctx, fmt.Errorf("read turn events: %w", err))
	}
	it, err := cons.Messages()
	if err != nil {
		s.cancelTurn(started.TurnID)
		return "", s.stepError(ctx, fmt.Errorf("read turn events: %w", err))
	}
	defer it.Stop()
	// Next blocks; stopping the iterator is how a cancelled run gets out.
	defer context.AfterFunc(ctx, it.Stop)()
	var text strings.Builder
	for {
		m, err := it.Next()
		if err != nil {
			s.cancelTurn(started.TurnID)
			return "", s.stepError(ctx, fmt.Errorf("read turn events: %w", err))
		}
		switch m.Headers().Get(protocol.HeaderEvent) {
		case protocol.EventToken:
			var d protocol.TokenData
			if json.Unmarshal(m.Data(), &d) == nil {
				text.WriteString(d.Content)
			}
		case protocol.EventDone:
			var d struct {
				Content string `json:"content"`
			}
			if json.Unmarshal(m.Data(), &d) == nil && d.Content != "" {
				return d.Content, nil
			}
			return strings.TrimSuffix(text.String(), " "), nil
		case protocol.EventError:
			var d protocol.ErrorData
			_ = json.Unmarshal(m.Data(), &d)
			if d.Message == "" {
				d.Message = "the turn failed"
			}
			return "", errors.New(d.Message)
		}
	}
}

// stepError explains why a turn ended early: a stop, a timeout, or err.
func (s *Service) stepError(ctx context.Context, err error) error {
	switch {
	case s.runCtx.Err() != nil:
		return errStopped
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("the turn took longer than %s", s.cfg.StepTimeout)
	}
	return err
}

// cancelTurn asks the turn's runner to stop it, so an abandoned member
// turn does not keep a model busy.
func (s *Service) cancelTurn(turnID string) {
	msg := protocol.TurnControlMsg{Action: protocol.ControlCancel, Reason: "group-run-stopped"}
	if err := bus.Publish(s.nc, protocol.TurnControl(turnID), msg); err != nil {
		s.log.Warn("publish cancel", "turn", turnID, "err", err)
	}
}

// clip keeps at most limit bytes of s, cut on a rune boundary.
func clip(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "\n[…truncated]"
}
