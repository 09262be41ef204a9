// Package turnrunner is the turn-runner service: it takes chat turns over
// NATS (admission, ownership, control messages, followers' presence) and
// runs each with package turn, whose events any gateway relays from
// JetStream; it also serves retrieval runs, turn look-ups, workspace
// files and profile analyses.
package turnrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/llmprobe"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/mcp"
	"github.com/waggle-os/core/services/turnrunner/ownership"
	"github.com/waggle-os/core/services/turnrunner/ownership/recovery"
	"github.com/waggle-os/core/services/turnrunner/presence"
	"github.com/waggle-os/core/services/turnrunner/profileai"
	"github.com/waggle-os/core/services/turnrunner/retrieval"
	"github.com/waggle-os/core/services/turnrunner/runnerconfig"
	"github.com/waggle-os/core/services/turnrunner/settings"
	"github.com/waggle-os/core/services/turnrunner/subagent"
	"github.com/waggle-os/core/services/turnrunner/tools"
	"github.com/waggle-os/core/services/turnrunner/turn"
	"github.com/waggle-os/core/services/turnrunner/turnevents"
)

// Service is the turn-runner service.
type Service struct {
	cfg  runnerconfig.Config
	id   string
	dial bus.Dialer
	log  *slog.Logger

	nc *nats.Conn
	js jetstream.JetStream
	// turns is the turn stream's handle: reads of one turn's last event
	// use it without asking for the stream's info each time.
	stream jetstream.Stream
	// own keeps this runner's turns' leases and session places, and
	// claims the turns other runners left (package ownership).
	own *ownership.Owner
	// subagents lists the running sub-agents (protocol.BucketSubAgents).
	subagents *subagent.List
	// host runs the sub-agents other runners' turns place here.
	host     *subagent.Host
	svc      *bus.Service
	subs     []*nats.Subscription
	probe    *llmprobe.Prober
	agent    *agent.Agent
	tools    *tools.Registry
	models   *settings.Cache
	policies *settings.Policies
	mcp      *mcp.Manager

	// orphanAfter is how long a due lease no runner can take stays before
	// a runner ends its turn (ownership.OrphanAfter when 0; tests shorten
	// it).
	orphanAfter time.Duration

	// loops is the heartbeat loop (lease renewal, presence), stopped by
	// Stop.
	loops     sync.WaitGroup
	stopLoops context.CancelFunc
	stopping  atomic.Bool

	// deps is what every turn of this runner needs of it, built once the
	// runner is connected.
	deps *turn.Deps

	mu    sync.Mutex
	turns map[string]*runningTurn
	// starting counts the starts of each turn under way here: their lease
	// may be written before the turn runs, and the ownership claim loop
	// must not take it for one this runner lost track of (ownerHost.Runs).
	starting map[string]int
	runs     map[string]context.CancelCauseFunc // retrieval runs
	// starts shares one outcome among the deliveries of one turn's start
	// (startTurnOnce).
	starts starts
	// retrieval runs POST /api/agent/run.
	retrieval *retrieval.Runner
	// profileAI reads writing samples, brand descriptions and profiles
	// for the profile's analyze routes.
	profileAI *profileai.Analyzer
	analyses  chan struct{}  // one per running analysis (maxAnalyses)
	wg        sync.WaitGroup // running turns
	slots     chan struct{}
}

// New returns an unstarted runner.
func New(cfg runnerconfig.Config, dial bus.Dialer, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{cfg: cfg, dial: dial, log: log.With("service", "turn-runner"), turns: map[string]*runningTurn{}, starting: map[string]int{}, runs: map[string]context.CancelCauseFunc{}}
}

// ID is this runner's name in turn leases.
func (s *Service) ID() string { return s.id }

// Start connects, makes sure the turn stream and the lease and lock
// buckets exist, and starts taking turns — new ones and those other
// runners left behind.
func (s *Service) Start(ctx context.Context) error {
	if err := s.cfg.Prepare(); err != nil {
		return err
	}
	if err := s.build(); err != nil {
		return err
	}
	// Say at once which model server this runner will use and whether it
	// answered (reportModelServer logs it): a newcomer's first question.
	s.probe.Check(ctx)
	for _, step := range []func(context.Context) error{s.connect, s.subscribe, s.startLoops, s.serve} {
		if err := step(ctx); err != nil {
			s.Stop(ctx)
			return err
		}
	}
	// bus.Handle flushed the subscriptions: the first chat after start-up
	// finds this runner.
	return nil
}

// build makes the parts that need no bus: the agent loop, the retrieval
// runner, the tools and the caches.
func (s *Service) build() error {
	s.id = s.cfg.RunnerID
	s.log = s.log.With("runner", s.id)
	s.own = ownership.NewOwner(ownership.OwnerConfig{
		Runner: s.id, Replicas: s.cfg.Stream.Replicas, OrphanAfter: s.orphanAfter, Logger: s.log,
		Async: s.asyncCoordination(), OnEnded: s.onOrphanEnded,
	}, ownerHost{s})
	s.models = settings.New(s.cfg.ModelConfigCheck, s.cfg.StoreTimeout, s.log)
	probe := s.cfg.Probe
	probe.OnChange = s.reportModelServer
	if probe.APIKey == "" {
		probe.KeyFunc = s.models.ProbeKey
	}
	s.probe = llmprobe.New(probe)
	ag, err := agent.New(s.cfg.AgentConfig())
	if err != nil {
		return fmt.Errorf("turnrunner: %w", err)
	}
	s.agent = ag
	if s.retrieval, err = retrieval.New(retrieval.Config{Model: s.cfg.ChatModel()}); err != nil {
		return fmt.Errorf("turnrunner: %w", err)
	}
	s.profileAI, s.analyses = profileai.New(s.cfg.ChatModel().Client(nil)), make(chan struct{}, maxAnalyses)
	s.tools = tools.NewRegistry(s.cfg.ToolsConfig())
	s.slots = make(chan struct{}, s.cfg.MaxTurns)
	return nil
}

// connect dials the bus and sets up what the runner keeps there: the MCP
// manager, JetStream, the turn stream and the coordination buckets.
func (s *Service) connect(ctx context.Context) error {
	nc, err := s.dial(protocol.ServiceTurnRunner)
	if err != nil {
		return err
	}
	s.nc = nc
	s.models.Connect(nc)
	s.policies = settings.NewPolicies(nc, s.cfg.PolicyTTL, s.cfg.PolicyTimeout)
	s.mcp = mcp.New(s.cfg.MCPConfig(), nc, s.log)
	if err := s.mcp.Start(ctx); err != nil {
		return fmt.Errorf("turnrunner: %w", err)
	}
	// The async window is shared by every turn of this runner; each turn
	// keeps a few events in flight (see turnevents.Publisher), so the window
	// is sized for many turns, and a publish that finds it full waits for
	// room rather than failing. The ack timeout makes sure every future
	// resolves even if NATS loses a message.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(turnevents.AsyncWindow),
		jetstream.WithPublishAsyncTimeout(turnevents.PublishWait))
	if err != nil {
		return fmt.Errorf("turnrunner: jetstream: %w", err)
	}
	s.js = js
	// On a fresh cluster the stream and buckets wait for a JetStream meta
	// leader (seconds; each creation retries, saying so in the log). Past
	// clusterWait the start fails with the cluster's last answer, which
	// the process reports as this module's failure.
	ctx, cancel := context.WithTimeout(ctx, clusterWait)
	defer cancel()
	if s.stream, err = bus.EnsureTurnStream(ctx, js, s.cfg.Stream); err != nil {
		return clusterError(err)
	}
	if err := s.own.Open(ctx, js); err != nil {
		return clusterError(fmt.Errorf("turnrunner: %w", err))
	}
	if err := s.recoverAccepted(ctx); err != nil {
		return err
	}
	if s.subagents, err = subagent.OpenList(ctx, s.js, s.cfg.SubAgents, s.cfg.Stream.Replicas, s.cfg.StoreTimeout, s.log); err != nil {
		return err
	}
	s.deps = s.turnDeps()
	s.host = &subagent.Host{Conn: s.nc, Runner: s.id, Agent: s.agent, Free: s.freeSlots, Reserve: s.reserveChild,
		Unreserve: func() { <-s.slots }, Build: s.subAgentEnv, Log: s.log}
	return nil
}

// freeSlots is how many more turns (or sub-agents of other runners' turns)
// this runner takes now.
func (s *Service) freeSlots() int {
	if s.stopping.Load() {
		return 0
	}
	return cap(s.slots) - len(s.slots)
}

// reserveChild takes a turn slot for another runner's sub-agent.
func (s *Service) reserveChild() bool {
	if s.stopping.Load() {
		return false
	}
	select {
	case s.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// subAgentEnv rebuilds the tools of another runner's turn for its
// sub-agent (turn.SubAgentEnv).
func (s *Service) subAgentEnv(ctx context.Context, req protocol.TurnRequest, model string, step func(string)) (subagent.Env, error) {
	return turn.SubAgentEnv(ctx, s.deps, req, model, step)
}

// turnDeps is what the runner's turns need of it.
func (s *Service) turnDeps() *turn.Deps {
	c := s.cfg
	var remote *subagent.Remote
	if !c.SubAgents.Local {
		remote = &subagent.Remote{Conn: s.nc, Runner: s.id, Free: s.freeSlots, Peers: s.own.Peers, Log: s.log}
	}
	return &turn.Deps{
		Conn: s.nc, JS: s.js, Log: s.log,
		Config: turn.Config{
			DataDir: c.DataDir, LLMAPIKey: c.LLMAPIKey, EchoDelay: c.EchoDelay, StoreTimeout: c.StoreTimeout,
			PromptBudget: c.PromptBudget, SubAgents: c.SubAgents, Approval: c.Approval,
			RecordAccepted: s.asyncCoordination(),
		},
		ModelServer: s.probe, Settings: s.models, Policies: s.policies, FallbackModel: s.fallbackModel,
		Agent: s.agent, Tools: s.tools, MCP: s.mcp, SubAgents: s.subagents, Remote: remote,
	}
}

// clusterWait bounds the set-up of the runner's stream and buckets.
const clusterWait = 2 * time.Minute

// clusterError says what a set-up that ran out of time waited for.
func clusterError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("turnrunner: the NATS cluster did not answer within %s (is a JetStream meta leader elected? are all --nats-replicas nodes up?): %w", clusterWait, err)
	}
	return err
}

// subscribe listens for what is addressed to every runner.
func (s *Service) subscribe(context.Context) error {
	// Control messages reach whichever runner owns the turn; one wildcard
	// subscription per runner instead of one per turn.
	control, err := s.nc.Subscribe(protocol.SubjTurnControlAll, s.onControl)
	if err != nil {
		return fmt.Errorf("turnrunner: subscribe %s: %w", protocol.SubjTurnControlAll, err)
	}
	s.subs = append(s.subs, control)
	aborts, err := bus.Subscribe(s.nc, protocol.WorkspaceAborts, s.onAbort)
	if err != nil {
		return fmt.Errorf("turnrunner: %w", err)
	}
	s.subs = append(s.subs, aborts)
	policies, err := bus.Subscribe(s.nc, protocol.PolicyChanges, s.policies.OnChanged)
	if err != nil {
		return fmt.Errorf("turnrunner: %w", err)
	}
	s.subs = append(s.subs, policies)
	settings, err := bus.Subscribe(s.nc, protocol.SettingsChanges, s.onSettingsChanged)
	if err != nil {
		return fmt.Errorf("turnrunner: %w", err)
	}
	s.subs = append(s.subs, settings)
	return nil
}

// startLoops starts the runner's heartbeat, lease renewal and claim loops;
// Stop ends them.
func (s *Service) startLoops(context.Context) error {
	loopCtx, stopLoops := context.WithCancel(context.Background())
	s.stopLoops = stopLoops
	s.loops.Go(func() { s.heartbeatLoop(loopCtx) })
	s.own.Start()
	return nil
}

// serve registers the runner's endpoints, last: a runner takes turns only
// once it can run them.
func (s *Service) serve(context.Context) error {
	svc, err := bus.NewService(s.nc, bus.ServiceConfig{Name: protocol.ServiceTurnRunner, Logger: s.log})
	if err != nil {
		return err
	}
	s.svc = svc
	if err := s.host.Start(); err != nil {
		return err
	}
	return errors.Join(
		bus.Handle(svc, protocol.StartTurn, s.startTurnOnce),
		bus.Handle(svc, protocol.StartAgentRun, s.startAgentRun),
		bus.Handle(svc, protocol.LookupTurn, s.turnInfo),
		bus.Handle(svc, protocol.ListSubAgents, s.listSubAgents),
		bus.Handle(svc, protocol.WorkspaceFiles, s.workspaceFiles),
		bus.Handle(svc, protocol.CheckModelServer, s.checkModelServer),
		bus.Handle(svc, protocol.AnalyzeProfile, s.analyzeProfile),
	)
}

// listSubAgents answers protocol.ListSubAgents: the running sub-agents of
// every runner (subagent.List.Running).
func (s *Service) listSubAgents(ctx context.Context, req protocol.Empty) (protocol.SubAgentList, error) {
	return s.subagents.Running(ctx, req)
}

// Stop takes no new turns and claims none, lets running turns finish
// until HandoverMargin before ctx's deadline, then hands the rest to other
// runners (their leases are released, so a survivor claims them at once
// and resumes them from their checkpoints) and waits for them to let go.
// Without a deadline on ctx, turns may finish until ctx is done.
func (s *Service) Stop(ctx context.Context) error {
	s.stopping.Store(true)
	var errs []error
	if s.svc != nil {
		errs = append(errs, s.svc.Stop(ctx))
	}
	if s.own != nil {
		s.own.StopClaiming()
	}
	if s.host != nil {
		s.host.StopTaking()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	drain := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		drain, cancel = context.WithDeadline(ctx, dl.Add(-s.cfg.HandoverMargin))
		defer cancel()
	}
	select {
	case <-done:
	case <-drain.Done():
		turns := s.running()
		// With no other runner to take them (a desktop app quitting), the
		// turns end here, persisting what they produced.
		cause := turn.ErrShutdown
		if len(turns) > 0 && s.othersAlive() {
			cause = turn.ErrHandover
			s.log.Info("handing unfinished turns to other runners", "turns", len(turns))
		}
		for _, rt := range turns {
			rt.t.Cancel(cause)
		}
		s.mu.Lock()
		for _, cancel := range s.runs {
			cancel(turn.ErrShutdown) // a run is not handed over: its client gets done
		}
		s.mu.Unlock()
		<-done
	}
	if s.host != nil {
		// Other runners' sub-agents end with this runner: their turns'
		// calls get an error result and go on.
		s.host.Stop()
	}
	if s.stopLoops != nil {
		s.stopLoops()
		s.loops.Wait()
	}
	if s.own != nil {
		s.own.Stop() // no turn waits any more
	}
	for _, sub := range s.subs {
		_ = sub.Unsubscribe()
	}
	if s.mcp != nil {
		errs = append(errs, s.mcp.Stop(ctx))
	}
	if s.nc != nil {
		errs = append(errs, bus.Drain(ctx, s.nc))
	}
	return errors.Join(errs...)
}

// othersAlive reports whether another turn runner answers a micro ping
// (this runner's own service is stopped by then).
func (s *Service) othersAlive() bool {
	inbox := nats.NewInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return false
	}
	defer sub.Unsubscribe()
	if err := s.nc.PublishRequest(protocol.PingSubject(protocol.ServiceTurnRunner), inbox, nil); err != nil {
		return false
	}
	_, err = sub.NextMsg(300 * time.Millisecond)
	return err == nil
}

func (s *Service) startTurn(ctx context.Context, req protocol.TurnRequest) (protocol.TurnStarted, error) {
	if req.TurnID == "" {
		req.TurnID = protocol.NewUUID()
	}
	if !protocol.ValidID(req.TurnID) || !protocol.ValidID(req.Workspace) || !protocol.ValidID(req.Session) {
		return protocol.TurnStarted{}, protocol.Errorf(protocol.Invalid, "invalid turn, workspace or session id")
	}
	if req.Message == "" {
		return protocol.TurnStarted{}, protocol.Errorf(protocol.Invalid, "message is required")
	}
	if req.User != "" && !protocol.ValidID(req.User) {
		return protocol.TurnStarted{}, protocol.Errorf(protocol.Invalid, "invalid user id")
	}
	switch req.Multitask {
	case "":
		req.Multitask = protocol.MultitaskQueue
	case protocol.MultitaskQueue, protocol.MultitaskReject, protocol.MultitaskInterrupt:
	default:
		return protocol.TurnStarted{}, protocol.Errorf(protocol.Invalid, "multitask must be one of queue, reject, interrupt")
	}
	if bus.Resent(ctx) && s.turnStored(ctx, req.TurnID) {
		// The first delivery ran the turn (its lease is gone with it).
		return protocol.TurnStarted{}, protocol.ErrTurnExists
	}
	if s.stopping.Load() {
		return protocol.TurnStarted{}, errBusy
	}
	select {
	case s.slots <- struct{}{}:
	default:
		return protocol.TurnStarted{}, errBusy
	}
	s.beginStart(req.TurnID)
	defer s.endStart(req.TurnID)
	// The lease first, then the place in the session's queue (see
	// ownership.Owner.Accept).
	lctx, cancel := startWriteCtx(ctx)
	tk, err := s.own.Accept(lctx, req)
	cancel()
	if err != nil {
		<-s.slots
		if errors.Is(err, ownership.ErrLeased) {
			// A retried start of a turn that exists: its place in the
			// queue is that turn's, not ours to give back.
			return protocol.TurnStarted{}, protocol.ErrTurnExists
		}
		return protocol.TurnStarted{}, storageError(fmt.Errorf("turnrunner: %w", err))
	}
	rt := s.newTurn(req, tk)
	fail := func(err error) (protocol.TurnStarted, error) {
		tk.Leave()
		tk.Drop()
		<-s.slots
		return protocol.TurnStarted{}, err
	}
	jctx, cancel := startWriteCtx(ctx)
	holder, err := tk.Join(jctx, joinMode(req.Multitask))
	cancel()
	if err != nil {
		return fail(storageError(fmt.Errorf("turnrunner: %w", err)))
	}
	if holder != "" {
		if req.Multitask == protocol.MultitaskReject {
			return fail(protocol.ErrSessionBusy)
		}
		if s.deps.Config.RecordAccepted {
			// A turn that waits is recorded now, durably: its user message
			// is stored only once it holds the session. From here a failed
			// start closes the record too (a record whose answer was lost
			// may have landed).
			unjoin := fail
			fail = func(err error) (protocol.TurnStarted, error) {
				turn.CloseRecord(s.deps, req)
				return unjoin(err)
			}
			if err := turn.RecordQueued(ctx, s.deps, tk.Record()); err != nil {
				return fail(storageError(fmt.Errorf("turnrunner: record turn: %w", err)))
			}
		}
		if req.Multitask == protocol.MultitaskInterrupt {
			s.publishControl(holder, protocol.TurnControlMsg{Action: protocol.ControlCancel, Reason: "interrupted"})
		}
	}
	if err := rt.t.MarkStarted(s.id); err != nil {
		return fail(err)
	}
	if !s.launch(rt, rt.t.Run) {
		return fail(protocol.Errorf(protocol.Conflict, "turn %s already exists", req.TurnID))
	}
	if s.deps.Config.RecordAccepted && holder == "" {
		// The turn holds its session: its user message's append records
		// it (turn.Turn.Recorded). The start is answered once the store
		// has it, so a client told its turn runs is never told so of a
		// turn a crash could lose.
		select {
		case <-rt.t.Recorded():
		case <-ctx.Done():
		}
	}
	return protocol.TurnStarted{TurnID: req.TurnID}, nil
}

// asyncCoordination reports whether this runner's leases and session
// queues are written without an fsync: AsyncCoordination on a
// single-replica stream (a replicated one is the raft log's anyway).
func (s *Service) asyncCoordination() bool {
	return s.cfg.AsyncCoordination && s.cfg.Stream.Replicas <= 1
}

// recoverAccepted puts back, from the session store's record of accepted
// turns, the leases and places NATS lost in a crash (recovery.Recover), before
// the runner takes any turn. It waits for the store (it may start after
// the runner) up to clusterWait.
func (s *Service) recoverAccepted(ctx context.Context) error {
	if !s.asyncCoordination() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, clusterWait)
	defer cancel()
	open, err := bus.CallResending(ctx, s.nc, protocol.OpenTurns, protocol.OpenTurnsRequest{},
		bus.Resending{After: 5 * time.Second, Unanswered: clusterWait})
	if err != nil {
		return fmt.Errorf("turnrunner: read the session store's open turns: %w", err)
	}
	leases, queue := s.own.Coordination()
	if _, _, err := recovery.Recover(ctx, leases, queue, open.Turns, s.log); err != nil {
		return fmt.Errorf("turnrunner: %w", err)
	}
	return nil
}

// onOrphanEnded closes the store's record of a turn the claim loop ended
// because no runner could take it: it must not run after a restart.
func (s *Service) onOrphanEnded(req protocol.TurnRequest) {
	if s.asyncCoordination() {
		turn.CloseRecord(s.deps, req)
	}
}

var errBusy = protocol.ErrRunnerBusy

// beginStart notes a start of turnID under way here; endStart, its end
// (by then the turn runs here, or its start failed).
func (s *Service) beginStart(turnID string) {
	s.mu.Lock()
	s.starting[turnID]++
	s.mu.Unlock()
}

func (s *Service) endStart(turnID string) {
	s.mu.Lock()
	if s.starting[turnID]--; s.starting[turnID] <= 0 {
		delete(s.starting, turnID)
	}
	s.mu.Unlock()
}

// turnStored reports whether the turn stream holds any event of turnID,
// or the question cannot be answered now (then a second delivery of its
// start must not run it: the gateway still awaits the first's answer).
func (s *Service) turnStored(ctx context.Context, turnID string) bool {
	_, stored, err := turnevents.LastEvent(ctx, s.js, turnID)
	return stored || err != nil
}

// runningTurn is a turn of this runner with what the runner keeps of it:
// its ownership, renewed by the heartbeat, and its followers, told by
// control messages.
type runningTurn struct {
	t        *turn.Turn
	own      *ownership.Ticket
	presence *presence.Tracker
}

// newTurn builds the state of one turn, owned through tk (nothing runs
// yet).
func (s *Service) newTurn(req protocol.TurnRequest, tk *ownership.Ticket) *runningTurn {
	var t *turn.Turn
	// p calls back only once the turn is launched (a tick or a detach),
	// and t is set by then.
	p := presence.New(s.cfg.DisconnectGrace, func() { t.Cancel(turn.ErrClientGone) })
	t = turn.New(s.deps, req, tk, p)
	return &runningTurn{t: t, own: tk, presence: p}
}

// launch registers rt and runs fn (its Run or Resume) on its own
// goroutine, which owns the slot the caller took. It reports false if the
// turn already runs here.
func (s *Service) launch(rt *runningTurn, fn func()) bool {
	id := rt.t.Request().TurnID
	s.mu.Lock()
	if _, dup := s.turns[id]; dup {
		s.mu.Unlock()
		return false
	}
	s.turns[id] = rt
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer func() {
			s.mu.Lock()
			delete(s.turns, id)
			s.mu.Unlock()
			rt.t.Close()
			<-s.slots
			s.wg.Done()
		}()
		fn()
	}()
	return true
}

func (s *Service) onControl(m *nats.Msg) {
	id := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	var ctl protocol.TurnControlMsg
	if err := json.Unmarshal(m.Data, &ctl); err != nil {
		return
	}
	s.mu.Lock()
	rt := s.turns[id]
	s.mu.Unlock()
	if rt == nil {
		// A retrieval run has no presence grace: its client leaving (or a
		// cancel) stops it, as the original's run ended with its request.
		if ctl.Action == protocol.ControlCancel || ctl.Action == protocol.ControlDetach {
			s.cancelRun(id, turn.ErrClientGone)
		}
		return
	}
	switch ctl.Action {
	case protocol.ControlProbe:
		if m.Reply != "" {
			_ = m.Respond([]byte(s.id))
		}
	case protocol.ControlCancel:
		if ctl.Reason == "interrupted" {
			rt.t.Cancel(turn.ErrInterrupted)
		} else {
			rt.t.Cancel(turn.ErrCancelled)
		}
	case protocol.ControlAttach:
		rt.presence.Attach(ctl.Client, time.Now())
	case protocol.ControlDetach:
		rt.presence.Detach(ctl.Client, time.Now())
	}
}

// onAbort cancels this runner's turns of one workspace.
func (s *Service) onAbort(a protocol.AbortWorkspace) {
	if a.Workspace == "" {
		return
	}
	for _, rt := range s.running() {
		if rt.t.Request().Workspace == a.Workspace {
			rt.t.Cancel(turn.ErrAborted)
		}
	}
}

// publishControl sends a control message to the runner of a turn.
func (s *Service) publishControl(turnID string, msg protocol.TurnControlMsg) {
	if err := bus.Publish(s.nc, protocol.TurnControl(turnID), msg); err != nil {
		s.log.Warn("publish turn control", "turn", turnID, "action", msg.Action, "err", err)
	}
}
