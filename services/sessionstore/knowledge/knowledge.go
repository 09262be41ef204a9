// Package knowledge runs the minds' knowledge graph in the session store:
// it extracts entities and relations from every saved frame and every
// finished turn in a background worker (the caller never waits), and
// answers the graph's bus endpoints (read, correct). See docs/memory.md.
package knowledge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/telemetry"
	"github.com/waggle-os/core/services/sessionstore/frames"
	"github.com/waggle-os/core/services/sessionstore/graph"
	"github.com/waggle-os/core/services/sessionstore/graph/extract"
)

// Bounds.
const (
	// MaxText is how much of one text is read for entities.
	MaxText = 16 << 10
	// MaxGraph bounds the entities one graph read returns.
	MaxGraph = 5000
	// maxPendingTurns bounds the user messages waiting for their reply.
	maxPendingTurns = 1024
)

// Extractor is a model that reads entities and relations from a text
// (the budget model; see ModelExtractor).
type Extractor interface {
	Extract(ctx context.Context, text string) (graph.Batch, error)
}

// Config configures Knowledge.
type Config struct {
	// Backend stores the graphs. Required.
	Backend graph.Backend
	// Model, when set, extracts typed relations after the rules do.
	Model Extractor
	// ModelTimeout bounds one model extraction. Default 60s.
	ModelTimeout time.Duration
	// Queue is how many texts may wait for extraction; more are dropped
	// (counted and logged): a burst must not grow memory without bound.
	// Default 256.
	Queue int
	// BacklogPoll is how often a running worker looks for texts other
	// stores left in the backlog (UseBacklog). Default 30s.
	BacklogPoll time.Duration
	// Now is the clock. Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// job is one text to extract.
type job struct {
	mind graph.Mind
	text string
	// rulesDone: only the model's extraction is left.
	rulesDone bool
	// msg is the backlog message the text came from (nil: observed here),
	// acknowledged once the text is extracted or put back.
	msg jetstream.Msg
}

// Knowledge is the graph service of the session store.
type Knowledge struct {
	cfg   Config
	log   *slog.Logger
	queue chan job

	stop context.CancelFunc
	done chan struct{}
	// backlog keeps unfinished texts across a stop (nil: none, they are
	// lost); kickBacklog asks the worker to read it now.
	backlog     *Backlog
	kickBacklog chan struct{}
	// unfinished are the texts the worker was extracting when it was
	// stopped (the worker's until done is closed, then Stop's).
	unfinished []job

	mu      sync.Mutex
	pending map[string]job // turn id → its user message, until the reply
	idle    *sync.Cond     // signalled as texts finish (Flush)
	queued  int            // texts queued and not yet finished
}

// New returns an unstarted Knowledge; texts observed before Start wait in
// the queue.
func New(cfg Config) *Knowledge {
	if cfg.Queue <= 0 {
		cfg.Queue = 256
	}
	if cfg.ModelTimeout <= 0 {
		cfg.ModelTimeout = 60 * time.Second
	}
	if cfg.BacklogPoll <= 0 {
		cfg.BacklogPoll = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	k := &Knowledge{cfg: cfg, log: cfg.Logger.With("component", "knowledge"), queue: make(chan job, cfg.Queue),
		kickBacklog: make(chan struct{}, 1), pending: map[string]job{}}
	k.idle = sync.NewCond(&k.mu)
	return k
}

// Start runs the extraction worker.
func (k *Knowledge) Start(ctx context.Context) {
	if k.done != nil {
		return
	}
	ctx, k.stop = context.WithCancel(context.WithoutCancel(ctx))
	k.done = make(chan struct{})
	go k.worker(ctx)
}

// UseBacklog gives the worker a backlog (once the store is on the bus,
// after Start): texts earlier stores left there are extracted now, others
// that stop later are looked for every BacklogPoll, and Stop puts this
// store's unfinished texts there.
func (k *Knowledge) UseBacklog(b *Backlog) {
	k.mu.Lock()
	k.backlog = b
	k.mu.Unlock()
	select {
	case k.kickBacklog <- struct{}{}:
	default:
	}
}

// Stop ends the worker: the extraction under way is stopped where it is
// (a model call is cancelled; the rules' findings, once stored, stay) and
// it and every text still queued or waiting for its turn's reply go to the
// backlog, so the next store to run extracts them. Without a backlog, or
// when it cannot take them before ctx ends, they are counted and logged as
// lost (the graph is derived data: no frame or message is lost).
func (k *Knowledge) Stop(ctx context.Context) {
	if k == nil || k.done == nil {
		return
	}
	k.stop()
	<-k.done
	k.done = nil
	left := k.unfinished
	k.unfinished = nil
	k.mu.Lock()
	for len(k.queue) > 0 {
		left = append(left, <-k.queue)
		k.queued--
	}
	k.idle.Broadcast()
	for _, j := range k.pending {
		// The reply will not be heard here: the message is a text alone.
		left = append(left, j)
	}
	clear(k.pending)
	b := k.backlog
	k.mu.Unlock()
	if len(left) == 0 {
		return
	}
	if b == nil {
		k.lost(left, errors.New("no backlog"))
		return
	}
	// A bus that does not answer must not hold the shutdown for ever.
	ctx, cancel := context.WithTimeout(ctx, backlogPutTimeout)
	defer cancel()
	if err := b.put(ctx, left); err != nil {
		k.lost(left, err)
		return
	}
	for _, j := range left {
		if j.msg != nil {
			_ = j.msg.Ack() // put back as a new message
		}
	}
	telemetry.KnowledgeExtractions.WithLabelValues("rules", "requeued").Add(float64(len(left)))
	k.log.Info("knowledge extraction stopped; unfinished texts kept in the backlog", "texts", len(left))
}

func (k *Knowledge) lost(left []job, err error) {
	telemetry.KnowledgeExtractions.WithLabelValues("rules", "dropped").Add(float64(len(left)))
	k.log.Warn("knowledge extraction stopped; unfinished texts lost", "texts", len(left), "err", err)
}

// Flush waits until every text queued so far has been extracted (tests
// and shutdown of a single-process app use it).
func (k *Knowledge) Flush() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for k.queued > 0 {
		k.idle.Wait()
	}
}

// Observe queues text of mind m for extraction and returns at once.
func (k *Knowledge) Observe(m graph.Mind, text string) {
	if k == nil {
		return
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return
	}
	if len(text) > MaxText {
		// A copy: the prefix alone would keep the whole text (a 5 MB
		// reply) alive for as long as the job waits in the queue.
		text = strings.Clone(text[:MaxText])
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	select {
	case k.queue <- job{mind: m, text: text}:
		k.queued++
	default:
		telemetry.KnowledgeExtractions.WithLabelValues("rules", "dropped").Inc()
		k.log.Warn("knowledge extraction queue full; text skipped", "mind", m.Key())
	}
}

// ObserveMessage queues a turn's messages of a workspace's session: a
// user message waits for the reply of its turn, so a turn is one text
// (and yields at most extract.MaxEntities entities).
func (k *Knowledge) ObserveMessage(workspace string, msg protocol.Message) {
	if k == nil || !protocol.ValidID(workspace) {
		return
	}
	m := graph.Mind{Kind: frames.KindWorkspace, ID: workspace}
	switch msg.Role {
	case "user":
		if msg.TurnID == "" {
			k.Observe(m, msg.Content)
			return
		}
		k.mu.Lock()
		if len(k.pending) >= maxPendingTurns {
			clear(k.pending) // replies that never came; their texts go unread
		}
		user := strings.TrimSpace(msg.Content)
		k.pending[msg.TurnID] = job{mind: m, text: strings.Clone(user[:min(len(user), MaxText)])}
		k.mu.Unlock()
	case "assistant":
		k.mu.Lock()
		user := k.pending[msg.TurnID].text
		delete(k.pending, msg.TurnID)
		k.mu.Unlock()
		reply := msg.Content
		if msg.Error != "" {
			reply = "" // a failed turn's partial reply states nothing
		}
		// Only MaxText of it is read: the reply is not copied whole.
		k.Observe(m, strings.TrimSpace(user+"\n\n"+reply[:min(len(reply), MaxText)]))
	}
}

func (k *Knowledge) worker(ctx context.Context) {
	defer close(k.done)
	poll := time.NewTicker(k.cfg.BacklogPoll)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.kickBacklog:
			k.takeBacklog(ctx)
		case <-poll.C:
			k.takeBacklog(ctx)
		case j := <-k.queue:
			k.run(ctx, j)
			k.mu.Lock()
			k.queued--
			k.idle.Broadcast()
			k.mu.Unlock()
		}
	}
}

// takeBacklog extracts the backlog's texts until it is empty or the worker
// stops.
func (k *Knowledge) takeBacklog(ctx context.Context) {
	k.mu.Lock()
	b := k.backlog
	k.mu.Unlock()
	for b != nil && ctx.Err() == nil {
		jobs, err := b.take()
		if err != nil {
			k.log.Warn("read the knowledge backlog", "err", err)
		}
		if len(jobs) == 0 {
			return
		}
		for i, j := range jobs {
			if ctx.Err() != nil {
				// Not begun: back to the backlog at once, for any store.
				for _, rest := range jobs[i:] {
					_ = rest.msg.Nak()
				}
				return
			}
			k.run(ctx, j)
		}
	}
}

func (k *Knowledge) now() string { return protocol.Timestamp(k.cfg.Now()) }

// run extracts one text; a text the worker's stop interrupted is kept in
// unfinished (for Stop's backlog), else its backlog message is
// acknowledged.
func (k *Knowledge) run(ctx context.Context, j job) {
	// A stop and a text can arrive together: the text is left whole.
	if ctx.Err() == nil && k.extract(ctx, &j) {
		if j.msg != nil {
			_ = j.msg.Ack()
		}
		return
	}
	k.unfinished = append(k.unfinished, j)
}

// extract runs the rules, then the model when there is one, on one text,
// and reports whether it finished. The rules' findings are stored even
// while the worker stops (a local, bounded write), so only the model's
// call is ever interrupted; j.rulesDone then records that the rules ran.
func (k *Knowledge) extract(ctx context.Context, j *job) bool {
	if !j.rulesDone {
		k.apply(context.WithoutCancel(ctx), j.mind, "rules", extract.Text(j.text))
		j.rulesDone = true
	}
	if k.cfg.Model == nil {
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	mctx, cancel := context.WithTimeout(ctx, k.cfg.ModelTimeout)
	b, err := k.cfg.Model.Extract(mctx, j.text)
	cancel()
	if ctx.Err() != nil {
		return false // stopped mid-call: the model's part is left
	}
	if err != nil {
		telemetry.KnowledgeExtractions.WithLabelValues("model", "error").Inc()
		k.log.Warn("model extraction failed; the rules' findings stand", "mind", j.mind.Key(), "err", err)
		return true
	}
	k.apply(context.WithoutCancel(ctx), j.mind, "model", b)
	return true
}

func (k *Knowledge) apply(ctx context.Context, m graph.Mind, extractor string, b graph.Batch) {
	if len(b.Entities) == 0 {
		return
	}
	if err := graph.Check(&b); err != nil {
		telemetry.KnowledgeExtractions.WithLabelValues(extractor, "error").Inc()
		k.log.Warn("extraction produced an invalid batch", "extractor", extractor, "mind", m.Key(), "err", err)
		return
	}
	res, err := k.cfg.Backend.Apply(ctx, m, b, k.now())
	if err != nil {
		telemetry.KnowledgeExtractions.WithLabelValues(extractor, "error").Inc()
		k.log.Warn("store extracted knowledge", "extractor", extractor, "mind", m.Key(), "err", err)
		return
	}
	telemetry.KnowledgeExtractions.WithLabelValues(extractor, "ok").Inc()
	telemetry.KnowledgeFacts.WithLabelValues("entity", "created").Add(float64(res.CreatedEntities))
	telemetry.KnowledgeFacts.WithLabelValues("relation", "created").Add(float64(res.CreatedRelations))
	k.log.Debug("knowledge extracted", "extractor", extractor, "mind", m.Key(),
		"entities", len(res.Entities), "newEntities", res.CreatedEntities, "relations", len(res.Relations), "newRelations", res.CreatedRelations)
}

// Count counts a mind's valid entities and relations (frames.Minds'
// stats).
func (k *Knowledge) Count(ctx context.Context, m graph.Mind) (int, int, error) {
	return k.cfg.Backend.Count(ctx, m)
}

// DropWorkspace forgets a deleted workspace's graph.
func (k *Knowledge) DropWorkspace(ctx context.Context, ws string) error {
	if !protocol.ValidID(ws) {
		return nil
	}
	return k.cfg.Backend.Drop(ctx, graph.Mind{Kind: frames.KindWorkspace, ID: ws})
}

// Register adds the graph's endpoints to svc.
func (k *Knowledge) Register(svc *bus.Service) error {
	return errors.Join(
		bus.Handle(svc, protocol.GetKnowledgeGraph, k.Graph),
		bus.Handle(svc, protocol.CorrectKnowledge, k.Correct),
		bus.Handle(svc, protocol.RestoreKnowledge, k.Restore),
	)
}

func personal(o protocol.MemoryOwner) graph.Mind {
	if o.User != "" {
		return graph.Mind{Kind: frames.KindUser, ID: o.User}
	}
	return graph.Mind{Kind: frames.KindPersonal}
}

func checkOwner(o protocol.MemoryOwner) error {
	if o.Workspace != "" && !protocol.ValidID(o.Workspace) {
		return protocol.Errorf(protocol.Invalid, "invalid workspace id")
	}
	if o.User != "" && !protocol.ValidID(o.User) {
		return protocol.Errorf(protocol.Invalid, "invalid user id")
	}
	return nil
}

// targets are the minds a graph request reads, workspace first.
func targets(req protocol.KnowledgeGraphRequest) []graph.Mind {
	ws := graph.Mind{Kind: frames.KindWorkspace, ID: req.Workspace}
	switch req.Scope {
	case protocol.MindPersonal:
		return []graph.Mind{personal(req.MemoryOwner)}
	case protocol.MindWorkspace:
		if req.Workspace == "" {
			return nil
		}
		return []graph.Mind{ws}
	case protocol.KnowledgeScopeAll:
		if req.Workspace == "" {
			return []graph.Mind{personal(req.MemoryOwner)}
		}
		return []graph.Mind{ws, personal(req.MemoryOwner)}
	}
	if req.Workspace != "" {
		return []graph.Mind{ws}
	}
	return []graph.Mind{personal(req.MemoryOwner)}
}

// Graph reads the graphs of the minds req reaches.
func (k *Knowledge) Graph(ctx context.Context, req protocol.KnowledgeGraphRequest) (protocol.KnowledgeGraph, error) {
	if err := checkOwner(req.MemoryOwner); err != nil {
		return protocol.KnowledgeGraph{}, err
	}
	if len(req.Query) > graph.MaxNameLen {
		return protocol.KnowledgeGraph{}, protocol.Errorf(protocol.Invalid, "query is at most %d characters", graph.MaxNameLen)
	}
	if req.Offset < 0 {
		return protocol.KnowledgeGraph{}, protocol.Errorf(protocol.Invalid, "offset must not be negative")
	}
	limit := req.Limit
	if limit <= 0 || limit > MaxGraph {
		limit = MaxGraph
	}
	out := protocol.KnowledgeGraph{Entities: []protocol.KnowledgeEntity{}, Relations: []protocol.KnowledgeRelation{}}
	for _, m := range targets(req) {
		g, err := k.cfg.Backend.Graph(ctx, m, graph.Filter{Query: req.Query, Type: req.Type, Retired: req.Retired, Limit: limit, Offset: req.Offset})
		if err != nil {
			return protocol.KnowledgeGraph{}, fmt.Errorf("knowledge: read %s: %w", m.Key(), err)
		}
		add(&out, m, g)
		if g.More {
			out.NextOffset = req.Offset + limit
		}
	}
	return out, nil
}

func add(out *protocol.KnowledgeGraph, m graph.Mind, g graph.Snapshot) {
	label := m.Label()
	for _, e := range g.Entities {
		out.Entities = append(out.Entities, protocol.KnowledgeEntity{ID: e.ID, Type: e.Type, Name: e.Name, Properties: e.Properties,
			Mentions: e.Mentions, ValidFrom: e.ValidFrom, ValidTo: e.ValidTo, Recorded: e.Recorded, Mind: label})
	}
	for _, r := range g.Relations {
		out.Relations = append(out.Relations, protocol.KnowledgeRelation{ID: r.ID, Source: r.Source, Target: r.Target, Type: r.Type,
			Confidence: r.Confidence, Properties: r.Properties, Mentions: r.Mentions, ValidFrom: r.ValidFrom, ValidTo: r.ValidTo,
			Recorded: r.Recorded, Mind: label})
	}
}

// Correct retires a wrong fact in the owner's workspace mind, else the
// personal mind.
func (k *Knowledge) Correct(ctx context.Context, req protocol.KnowledgeCorrectRequest) (protocol.KnowledgeGraph, error) {
	reason := strings.TrimSpace(frames.Sanitise(req.Reason))
	if len(reason) > graph.MaxPropLen {
		reason = reason[:graph.MaxPropLen]
	}
	now := k.now()
	return k.change(ctx, req.MemoryOwner, req.ID, "retired", func(m graph.Mind) (graph.Snapshot, error) {
		return k.cfg.Backend.Retire(ctx, m, req.ID, reason, now)
	})
}

// Restore undoes a correction in the owner's workspace mind, else the
// personal mind (graph.Backend.Restore).
func (k *Knowledge) Restore(ctx context.Context, req protocol.KnowledgeRestoreRequest) (protocol.KnowledgeGraph, error) {
	return k.change(ctx, req.MemoryOwner, req.ID, "restored", func(m graph.Mind) (graph.Snapshot, error) {
		return k.cfg.Backend.Restore(ctx, m, req.ID)
	})
}

// change runs a correction or its undo (op, named by what it makes of a
// fact) on fact id in the first of the owner's minds that has it, and
// reports, counts and logs what changed.
func (k *Knowledge) change(ctx context.Context, o protocol.MemoryOwner, id, what string, op func(graph.Mind) (graph.Snapshot, error)) (protocol.KnowledgeGraph, error) {
	if err := checkOwner(o); err != nil {
		return protocol.KnowledgeGraph{}, err
	}
	if !protocol.ValidID(id) {
		return protocol.KnowledgeGraph{}, protocol.Errorf(protocol.Invalid, "invalid entity or relation id")
	}
	for _, m := range ownerMinds(o) {
		g, err := op(m)
		if errors.Is(err, graph.ErrNotFound) {
			continue
		}
		if err != nil {
			return protocol.KnowledgeGraph{}, fmt.Errorf("knowledge: %s in %s: %w", what, m.Key(), err)
		}
		telemetry.KnowledgeFacts.WithLabelValues("entity", what).Add(float64(len(g.Entities)))
		telemetry.KnowledgeFacts.WithLabelValues("relation", what).Add(float64(len(g.Relations)))
		k.log.Info("knowledge "+what, "mind", m.Key(), "id", id, "entities", len(g.Entities), "relations", len(g.Relations))
		out := protocol.KnowledgeGraph{Entities: []protocol.KnowledgeEntity{}, Relations: []protocol.KnowledgeRelation{}}
		add(&out, m, g)
		return out, nil
	}
	return protocol.KnowledgeGraph{}, graph.ErrNotFound
}

// ownerMinds are the minds a correction reaches, workspace first.
func ownerMinds(o protocol.MemoryOwner) []graph.Mind {
	minds := []graph.Mind{personal(o)}
	if o.Workspace != "" {
		minds = append([]graph.Mind{{Kind: frames.KindWorkspace, ID: o.Workspace}}, minds...)
	}
	return minds
}

// Related lists the lower-case names of the mind's valid entities that
// text names (any run of up to four of its words, normalised, is looked
// up by key) and of their neighbours (frames.Knowledge: the connected
// ranking's graph signal). It reads only those entities and the
// relations of the ones found.
func (k *Knowledge) Related(ctx context.Context, m graph.Mind, text string) (direct, neighbours []string, err error) {
	ds, ns, err := k.cfg.Backend.Related(ctx, m, graph.Keys(text))
	if err != nil {
		return nil, nil, err
	}
	for _, e := range ds {
		direct = append(direct, strings.ToLower(e.Name))
	}
	for _, e := range ns {
		neighbours = append(neighbours, strings.ToLower(e.Name))
	}
	return direct, neighbours, nil
}
