package frames

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/mindindex"
	"github.com/waggle-os/core/services/sessionstore/ranking"
)

// Result bounds.
const (
	// DefaultFrames is the listing size when a request names none.
	DefaultFrames = 50
	// DefaultQuery is the API search size when a request names none.
	DefaultQuery = 20
	// DefaultRecall is the agent's search size (save_memory's neighbour
	// search_memory, auto-recall) when a request names none.
	DefaultRecall = 5
	// MaxResults caps every listing and search.
	MaxResults = 200
)

// Config configures Minds.
type Config struct {
	// Setting returns a top-level field of the settings (config.json,
	// whose one reader is sessionstore/settings): embeddingModel. Nil: no
	// settings, the default model.
	Setting func(key string) json.RawMessage
	// Backend stores the frames. Required.
	Backend Backend
	// Embedder requests vectors; nil: keyword search only.
	Embedder Embedder
	// RetryInterval is how long the embedder rests after a failure before
	// the background worker tries again (and queries skip vectors).
	// Default 30s.
	RetryInterval time.Duration
	// QueryTimeout bounds a search query's embedding. Default 2s.
	QueryTimeout time.Duration
	// BatchSize is the number of texts per embeddings request. Default 64.
	BatchSize int
	// Now is the clock. Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// Knowledge, when set, is each mind's knowledge graph: it hears of
	// every frame saved (and extracts off the caller's path) and counts
	// entities and relations for Stats.
	Knowledge Knowledge
}

// Knowledge is what the minds need of the knowledge graph
// (sessionstore/knowledge implements it).
type Knowledge interface {
	// Observe queues a saved frame's content for extraction; it must not
	// block.
	Observe(m Mind, content string)
	// Count counts a mind's valid entities and relations.
	Count(ctx context.Context, m Mind) (entities, relations int, err error)
	// Related lists the lower-case names of the mind's entities that text
	// names (direct) and of their neighbours: the graph signal of the
	// connected ranking.
	Related(ctx context.Context, m Mind, text string) (direct, neighbours []string, err error)
}

// Minds serves the minds over a Backend: validation, the personal and
// workspace minds together, query embeddings and the background worker
// that embeds new frames.
type Minds struct {
	cfg   Config
	log   *slog.Logger
	model embeddingModel

	kick chan struct{}
	stop context.CancelFunc
	done chan struct{}

	mu        sync.Mutex
	down      bool
	downUntil time.Time
	queryVecs map[string][]float32

	stamps protocol.Stamps // of writes: "newest first" needs distinct times
}

// New returns unstarted minds.
func New(cfg Config) *Minds {
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = 30 * time.Second
	}
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = 2 * time.Second
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 64
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Minds{cfg: cfg, log: cfg.Logger.With("component", "minds"), model: embeddingModel{setting: cfg.Setting},
		kick: make(chan struct{}, 1), queryVecs: map[string][]float32{}}
}

// Start runs the background embedding worker (when there is an embedder).
// It first embeds whatever is pending: frames saved while the provider was
// down, or vectors of another model.
func (m *Minds) Start(ctx context.Context) {
	if m.cfg.Embedder == nil || m.done != nil {
		return
	}
	ctx, m.stop = context.WithCancel(context.WithoutCancel(ctx))
	m.done = make(chan struct{})
	go m.worker(ctx)
	m.wake()
}

// Stop ends the worker and waits for it.
func (m *Minds) Stop() {
	if m == nil || m.done == nil {
		return
	}
	m.stop()
	<-m.done
	m.done = nil
}

// Model is the current embedding model ("" with vectors off).
func (m *Minds) Model() string {
	if m.cfg.Embedder == nil {
		return ""
	}
	return m.model.Model()
}

func (m *Minds) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

func (m *Minds) worker(ctx context.Context) {
	defer close(m.done)
	tick := time.NewTicker(m.cfg.RetryInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
		case <-tick.C:
		}
		m.embedPending(ctx)
	}
}

// embedPending embeds pending frames batch by batch until none is left or
// the provider fails.
func (m *Minds) embedPending(ctx context.Context) {
	for ctx.Err() == nil {
		model := m.Model()
		if model == "" {
			return
		}
		batch, err := m.cfg.Backend.Pending(ctx, model, m.cfg.BatchSize)
		if err != nil {
			m.log.Warn("list frames to embed", "err", err)
			return
		}
		if len(batch) == 0 {
			return
		}
		texts := make([]string, len(batch))
		for i, p := range batch {
			texts[i] = p.Content
		}
		vecs, err := m.cfg.Embedder.Embed(ctx, model, texts)
		if err != nil {
			if ctx.Err() == nil && m.markDown() {
				m.log.Info("embedding provider unavailable; keyword search only until it answers", "model", model, "pending", len(batch), "err", err)
			}
			return
		}
		m.markUp()
		byMind := map[string]map[string][]float32{}
		minds := map[string]Mind{}
		for i, p := range batch {
			k := p.Mind.Key()
			if byMind[k] == nil {
				byMind[k], minds[k] = map[string][]float32{}, p.Mind
			}
			byMind[k][p.ID] = vecs[i]
		}
		for k, vs := range byMind {
			if err := m.cfg.Backend.SetVectors(ctx, minds[k], model, vs); err != nil {
				m.log.Warn("store vectors", "mind", k, "err", err)
				return
			}
		}
	}
}

// markDown rests the embedder for RetryInterval and reports whether it
// was up (so a provider that stays down is logged once, not every retry).
func (m *Minds) markDown() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	wasUp := !m.down
	m.down, m.downUntil = true, m.cfg.Now().Add(m.cfg.RetryInterval)
	return wasUp
}

func (m *Minds) markUp() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		m.log.Info("embedding provider answers again")
	}
	m.down, m.downUntil = false, time.Time{}
}

// anyFrames reports whether any of the minds holds a frame: in empty
// minds, embedding the query (a model-server round trip on every recall,
// before the turn's first model call) could find nothing. Frames not yet
// embedded still count: the query's embedding also tells whether the
// provider is back.
func (m *Minds) anyFrames(ctx context.Context, targets []Mind, model string) bool {
	if model == "" {
		return false
	}
	for _, mind := range targets {
		if n, _, err := m.cfg.Backend.Count(ctx, mind, model); err != nil || n > 0 {
			return true // on doubt, search by vector as well
		}
	}
	return false
}

// queryVector embeds a search query; nil when vectors are off, the
// provider failed recently or fails now (keyword search still answers).
func (m *Minds) queryVector(ctx context.Context, model, query string) []float32 {
	if model == "" || strings.TrimSpace(query) == "" {
		return nil
	}
	key := model + "\x00" + query
	m.mu.Lock()
	if v, ok := m.queryVecs[key]; ok {
		m.mu.Unlock()
		return v
	}
	down := m.cfg.Now().Before(m.downUntil)
	m.mu.Unlock()
	if down {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.QueryTimeout)
	defer cancel()
	vecs, err := m.cfg.Embedder.Embed(ctx, model, []string{query})
	if err != nil {
		if m.markDown() {
			m.log.Info("query embedding failed; keyword search only until the provider answers", "model", model, "err", err)
		}
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.queryVecs) >= 1024 {
		clear(m.queryVecs)
	}
	m.queryVecs[key] = vecs[0]
	// A provider that answers again: let the worker catch up now.
	if m.down {
		m.down, m.downUntil = false, time.Time{}
		m.wake()
	}
	return vecs[0]
}

// personal is the personal mind of an owner.
func personal(o protocol.MemoryOwner) Mind {
	if o.User != "" {
		return Mind{Kind: KindUser, ID: o.User}
	}
	return Mind{Kind: KindPersonal}
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

// minds are the minds an owner reaches, workspace first.
func minds(o protocol.MemoryOwner) []Mind {
	if o.Workspace == "" {
		return []Mind{personal(o)}
	}
	return []Mind{{Kind: KindWorkspace, ID: o.Workspace}, personal(o)}
}

func limit(n, def int) int {
	if n <= 0 {
		n = def
	}
	return min(n, MaxResults)
}

// now is the time of a write, a millisecond past the previous one at
// least.
func (m *Minds) now() string { return m.stamps.Next(m.cfg.Now()) }

// Add stores one frame (see protocol.MemoryAddRequest); source defaults
// to agent_inferred, importance to normal.
func (m *Minds) Add(ctx context.Context, req protocol.MemoryAddRequest) (protocol.MemoryAddReply, error) {
	if err := checkOwner(req.MemoryOwner); err != nil {
		return protocol.MemoryAddReply{}, err
	}
	content := strings.TrimSpace(Sanitise(req.Content))
	if content == "" {
		return protocol.MemoryAddReply{}, protocol.Errorf(protocol.Invalid, "content is required")
	}
	if err := errors.Join(CheckImportance(req.Importance), CheckSource(req.Source)); err != nil {
		var pe *protocol.Error
		errors.As(err, &pe)
		return protocol.MemoryAddReply{}, pe
	}
	mind := personal(req.MemoryOwner)
	if req.Workspace != "" && !req.Personal {
		mind = Mind{Kind: KindWorkspace, ID: req.Workspace}
	}
	now := m.now()
	f := Frame{ID: "mem-" + protocol.NewUUID(), Content: content, Tags: req.Tags,
		Importance: cmp.Or(req.Importance, protocol.ImportanceNormal), Source: cmp.Or(req.Source, protocol.SourceAgentInferred),
		Created: now, Updated: now}
	// The caller's deadline (carried over the bus) may have passed while
	// the content was checked: then the caller was told the save failed,
	// and it must not happen.
	if err := ctx.Err(); err != nil {
		return protocol.MemoryAddReply{}, fmt.Errorf("frames: add to %s: %w", mind.Key(), err)
	}
	saved, dup, err := m.cfg.Backend.Add(ctx, mind, f)
	if err != nil {
		return protocol.MemoryAddReply{}, wrap("add to", mind, err)
	}
	if !dup {
		// Embedding and extraction happen off the caller's path.
		m.wake()
		if m.cfg.Knowledge != nil {
			m.cfg.Knowledge.Observe(mind, saved.Content)
		}
	}
	return protocol.MemoryAddReply{Saved: !dup, Duplicate: dup, Frame: saved.Public(mind, 0)}, nil
}

// Versioned is a Backend that tells when a mind changed: Version differs
// after any change of its frames and never repeats for one backend; ok is
// false when it cannot tell (a cache then keeps nothing).
type Versioned interface {
	Version(ctx context.Context, m Mind) (v uint64, ok bool)
}

// Version is the versions of the minds Frames lists for owner (ok false:
// the backend cannot tell). Read it before the frames: frames read after
// it are at least that new.
func (m *Minds) Version(ctx context.Context, owner protocol.MemoryOwner) ([]uint64, bool) {
	vb, ok := m.cfg.Backend.(Versioned)
	if !ok || checkOwner(owner) != nil {
		return nil, false
	}
	var out []uint64
	for _, mind := range minds(owner) {
		v, ok := vb.Version(ctx, mind)
		if !ok {
			return nil, false
		}
		out = append(out, v)
	}
	return out, true
}

// Frames lists the newest frames of the personal and workspace minds.
func (m *Minds) Frames(ctx context.Context, req protocol.MemoryFramesRequest) ([]protocol.MemoryFrame, error) {
	if err := checkOwner(req.MemoryOwner); err != nil {
		return nil, err
	}
	opt, err := listOptions(req.Limit, DefaultFrames, req.Since, req.Until)
	if err != nil {
		return nil, err
	}
	type item struct {
		f    Frame
		mind Mind
	}
	var all []item
	for _, mind := range minds(req.MemoryOwner) {
		fs, err := m.cfg.Backend.Recent(ctx, mind, opt)
		if err != nil {
			return nil, wrap("list", mind, err)
		}
		for _, f := range fs {
			all = append(all, item{f, mind})
		}
	}
	slices.SortStableFunc(all, func(a, b item) int { return strings.Compare(b.f.Created, a.f.Created) })
	out := make([]protocol.MemoryFrame, 0, min(opt.Limit, len(all)))
	for _, it := range all[:min(opt.Limit, len(all))] {
		out = append(out, it.f.Public(it.mind, 0))
	}
	return out, nil
}

func listOptions(n, def int, since, until string) (ListOptions, error) {
	s, err := ParseTime("since", since)
	if err != nil {
		return ListOptions{}, err
	}
	u, err := ParseTime("until", until)
	if err != nil {
		return ListOptions{}, err
	}
	return ListOptions{Limit: limit(n, def), Since: s, Until: u}, nil
}

// find runs op on the frame id in the owner's workspace mind, then the
// personal mind.
func (m *Minds) find(ctx context.Context, req protocol.MemoryFrameRequest, op func(Mind) (Frame, error)) (protocol.MemoryFrame, error) {
	if err := checkOwner(req.MemoryOwner); err != nil {
		return protocol.MemoryFrame{}, err
	}
	if !protocol.ValidID(req.ID) {
		return protocol.MemoryFrame{}, protocol.Errorf(protocol.Invalid, "Invalid frame ID")
	}
	for _, mind := range minds(req.MemoryOwner) {
		f, err := op(mind)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return protocol.MemoryFrame{}, wrap("change", mind, err)
		}
		return f.Public(mind, 0), nil
	}
	return protocol.MemoryFrame{}, ErrNotFound
}

// Update edits a frame's content and importance; a new content is
// embedded again in the background.
func (m *Minds) Update(ctx context.Context, req protocol.MemoryUpdateRequest) (protocol.MemoryFrame, error) {
	content := strings.TrimSpace(Sanitise(req.Content))
	if content == "" {
		return protocol.MemoryFrame{}, protocol.Errorf(protocol.Invalid, "content is required")
	}
	if err := CheckImportance(req.Importance); err != nil {
		return protocol.MemoryFrame{}, err
	}
	now := m.now()
	f, err := m.find(ctx, req.MemoryFrameRequest, func(mind Mind) (Frame, error) {
		if err := ctx.Err(); err != nil { // as in Add
			return Frame{}, err
		}
		f, err := m.cfg.Backend.Update(ctx, mind, req.ID, content, req.Importance, now)
		if err == nil && m.cfg.Knowledge != nil {
			m.cfg.Knowledge.Observe(mind, f.Content)
		}
		return f, err
	})
	if err == nil {
		m.wake()
	}
	return f, err
}

// Delete removes a frame.
func (m *Minds) Delete(ctx context.Context, req protocol.MemoryFrameRequest) (protocol.MemoryFrame, error) {
	return m.find(ctx, req, func(mind Mind) (Frame, error) { return m.cfg.Backend.Delete(ctx, mind, req.ID) })
}

// Access counts one access of a frame.
func (m *Minds) Access(ctx context.Context, req protocol.MemoryFrameRequest) (protocol.MemoryFrame, error) {
	return m.find(ctx, req, func(mind Mind) (Frame, error) { return m.cfg.Backend.Access(ctx, mind, req.ID) })
}

// Query is the hybrid search over the minds of scope: personal,
// workspace, or all (anything else, as the original).
func (m *Minds) Query(ctx context.Context, req protocol.MemoryQueryRequest, def int) ([]protocol.MemoryFrame, error) {
	if err := checkOwner(req.MemoryOwner); err != nil {
		return nil, err
	}
	opt, err := listOptions(req.Limit, def, req.Since, req.Until)
	if err != nil {
		return nil, err
	}
	profile, ok := ranking.Get(req.Profile)
	if !ok {
		return nil, protocol.Errorf(protocol.Invalid, "Invalid profile %q. Valid values: %s", req.Profile, strings.Join(ranking.Names, ", "))
	}
	// Ranking reorders more candidates than it returns, so an important
	// frame just below the cut by relevance can still make it.
	want := opt.Limit
	opt.Limit = min(MaxResults, max(3*want, want+10))
	var targets []Mind
	switch req.Scope {
	case protocol.MindPersonal:
		targets = []Mind{personal(req.MemoryOwner)}
	case protocol.MindWorkspace:
		if req.Workspace != "" {
			targets = []Mind{{Kind: KindWorkspace, ID: req.Workspace}}
		}
	default:
		targets = minds(req.MemoryOwner)
	}
	model := m.Model()
	var vec []float32
	if m.anyFrames(ctx, targets, model) {
		vec = m.queryVector(ctx, model, req.Query)
	}
	type item struct {
		h    Hit
		mind Mind
	}
	var all []item
	now := m.cfg.Now()
	for _, mind := range targets {
		hits, err := m.cfg.Backend.Search(ctx, mind, req.Query, vec, model, opt)
		if err != nil {
			return nil, wrap("search", mind, err)
		}
		graph := m.graphSignal(ctx, profile, mind, req.Query)
		for _, h := range hits {
			// Each mind's fused scores are reciprocal-rank sums over the
			// same lists, so over their best possible value they compare.
			h.Score = profile.Score(ranking.Signals{
				Relevance: h.Score / bestFused, Importance: h.Frame.Importance, Updated: parseTime(h.Frame.Updated, h.Frame.Created),
				AccessCount: h.Frame.AccessCount, Graph: graph(h.Frame.Content),
			}, now)
			all = append(all, item{h, mind})
		}
	}
	opt.Limit = want
	slices.SortStableFunc(all, func(a, b item) int {
		if c := cmp.Compare(b.h.Score, a.h.Score); c != 0 {
			return c
		}
		return strings.Compare(b.h.Frame.Created, a.h.Frame.Created)
	})
	out := make([]protocol.MemoryFrame, 0, min(opt.Limit, len(all)))
	for _, it := range all[:min(opt.Limit, len(all))] {
		out = append(out, it.h.Frame.Public(it.mind, it.h.Score))
	}
	return out, nil
}

// Stats counts the personal and workspace minds.
func (m *Minds) Stats(ctx context.Context, req protocol.MemoryStatsRequest) (protocol.MemoryStats, error) {
	if err := checkOwner(req.MemoryOwner); err != nil {
		return protocol.MemoryStats{}, err
	}
	model := m.Model()
	st := protocol.MemoryStats{Model: model}
	for _, mind := range minds(req.MemoryOwner) {
		n, e, err := m.cfg.Backend.Count(ctx, mind, model)
		if err != nil {
			return protocol.MemoryStats{}, wrap("count", mind, err)
		}
		if model != "" {
			st.Embedded += e
			st.Pending += n - e
		}
		ms := protocol.MemoryMindStats{FrameCount: n}
		if m.cfg.Knowledge != nil {
			if ms.EntityCount, ms.RelationCount, err = m.cfg.Knowledge.Count(ctx, mind); err != nil {
				return protocol.MemoryStats{}, wrap("count knowledge of", mind, err)
			}
		}
		st.Total.FrameCount += n
		st.Total.EntityCount += ms.EntityCount
		st.Total.RelationCount += ms.RelationCount
		if mind.Kind == KindWorkspace {
			st.Workspace = &ms
		} else {
			st.Personal = ms
		}
	}
	return st, nil
}

// DropWorkspace forgets a deleted workspace's mind.
func (m *Minds) DropWorkspace(ctx context.Context, ws string) error {
	if !protocol.ValidID(ws) {
		return nil
	}
	return m.cfg.Backend.Drop(ctx, Mind{Kind: KindWorkspace, ID: ws})
}

// Register adds the memory endpoints to svc: the API's subjects and the
// agent's save and search.
func (m *Minds) Register(svc *bus.Service) error {
	return errors.Join(
		bus.Handle(svc, protocol.SaveMemory, m.agentSave),
		bus.Handle(svc, protocol.SearchMemory, m.agentSearch),
		bus.Handle(svc, protocol.ListFrames, func(ctx context.Context, req protocol.MemoryFramesRequest) (protocol.MemoryFramesReply, error) {
			fs, err := m.Frames(ctx, req)
			return protocol.MemoryFramesReply{Frames: fs}, err
		}),
		bus.Handle(svc, protocol.AddFrame, m.Add),
		bus.Handle(svc, protocol.UpdateFrame, func(ctx context.Context, req protocol.MemoryUpdateRequest) (protocol.MemoryFrameReply, error) {
			f, err := m.Update(ctx, req)
			return protocol.MemoryFrameReply{Frame: f}, err
		}),
		bus.Handle(svc, protocol.DeleteFrame, func(ctx context.Context, req protocol.MemoryFrameRequest) (protocol.MemoryFrameReply, error) {
			f, err := m.Delete(ctx, req)
			return protocol.MemoryFrameReply{Frame: f}, err
		}),
		bus.Handle(svc, protocol.AccessFrame, func(ctx context.Context, req protocol.MemoryFrameRequest) (protocol.MemoryFrameReply, error) {
			f, err := m.Access(ctx, req)
			return protocol.MemoryFrameReply{Frame: f}, err
		}),
		bus.Handle(svc, protocol.QueryMemory, func(ctx context.Context, req protocol.MemoryQueryRequest) (protocol.MemoryFramesReply, error) {
			fs, err := m.Query(ctx, req, DefaultQuery)
			return protocol.MemoryFramesReply{Frames: fs}, err
		}),
		bus.Handle(svc, protocol.CountFrames, m.Stats),
	)
}

// agentSave is save_memory (and auto-save): a workspace frame unless
// Personal, source agent_inferred unless given.
func (m *Minds) agentSave(ctx context.Context, req protocol.MemorySaveRequest) (protocol.MemorySaveReply, error) {
	if !protocol.ValidID(req.Workspace) {
		return protocol.MemorySaveReply{}, protocol.Errorf(protocol.Invalid, "invalid workspace id")
	}
	rep, err := m.Add(ctx, protocol.MemoryAddRequest{
		MemoryOwner: protocol.MemoryOwner{Workspace: req.Workspace, User: req.User},
		Content:     req.Content, Tags: req.Tags, Importance: req.Importance, Source: req.Source, Personal: req.Personal,
	})
	if err != nil {
		return protocol.MemorySaveReply{}, err
	}
	return protocol.MemorySaveReply{ID: rep.Frame.ID, Duplicate: rep.Duplicate}, nil
}

// agentSearch is search_memory, auto-recall and retrieval: the hybrid
// search over the workspace and personal minds, as Memory values.
func (m *Minds) agentSearch(ctx context.Context, req protocol.MemorySearchRequest) (protocol.MemorySearchReply, error) {
	if !protocol.ValidID(req.Workspace) {
		return protocol.MemorySearchReply{}, protocol.Errorf(protocol.Invalid, "invalid workspace id")
	}
	owner := protocol.MemoryOwner{Workspace: req.Workspace, User: req.User}
	var fs []protocol.MemoryFrame
	var err error
	if strings.TrimSpace(req.Query) == "" {
		// No query (catch-up recall): the recent memories that matter,
		// ranked by importance and recency.
		n := limit(req.Limit, DefaultRecall)
		fs, err = m.Frames(ctx, protocol.MemoryFramesRequest{MemoryOwner: owner, Limit: min(MaxResults, 4*n)})
		fs = catchUp(fs, n, m.cfg.Now())
	} else {
		fs, err = m.Query(ctx, protocol.MemoryQueryRequest{MemoryOwner: owner, Query: req.Query, Scope: req.Scope, Limit: req.Limit}, DefaultRecall)
	}
	if err != nil {
		return protocol.MemorySearchReply{}, err
	}
	out := make([]protocol.Memory, 0, len(fs))
	for _, f := range fs {
		// A search's score is the ranking's, in [0, 1].
		out = append(out, protocol.Memory{ID: f.ID, Content: f.Content, Tags: f.Tags, Timestamp: f.Created, Score: min(1, f.Score)})
	}
	return protocol.MemorySearchReply{Memories: out}, nil
}

// bestFused is the best fused score there is: first in both rankings.
const bestFused = 2.0 / (mindindex.RRFK + 1)

// parseTime reads a frame's update time (its creation when unreadable).
func parseTime(updated, created string) time.Time {
	for _, v := range []string{updated, created} {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t
		}
	}
	return time.Time{}
}

// graphSignal returns the graph signal of a frame's content for a query:
// 1 when it names an entity the query names, 0.5 a neighbour of one. It
// reads the graph only for a profile that weighs it.
func (m *Minds) graphSignal(ctx context.Context, p ranking.Profile, mind Mind, query string) func(content string) float64 {
	none := func(string) float64 { return 0 }
	if p.Graph == 0 || m.cfg.Knowledge == nil {
		return none
	}
	direct, neighbours, err := m.cfg.Knowledge.Related(ctx, mind, query)
	if err != nil {
		m.log.Warn("graph signal unavailable; ranking without it", "mind", mind.Key(), "err", err)
		return none
	}
	if len(direct) == 0 && len(neighbours) == 0 {
		return none
	}
	return func(content string) float64 {
		c := strings.ToLower(content)
		for _, n := range direct {
			if strings.Contains(c, n) {
				return 1
			}
		}
		for _, n := range neighbours {
			if strings.Contains(c, n) {
				return 0.5
			}
		}
		return 0
	}
}

// catchUp keeps the n frames of fs that rank first by importance and
// recency (ranking.CatchUp), best first.
func catchUp(fs []protocol.MemoryFrame, n int, now time.Time) []protocol.MemoryFrame {
	p, _ := ranking.Get(ranking.CatchUp)
	score := func(f protocol.MemoryFrame) float64 {
		return p.Score(ranking.Signals{Importance: f.Importance, Updated: parseTime(f.Updated, f.Created), AccessCount: f.AccessCount}, now)
	}
	slices.SortStableFunc(fs, func(a, b protocol.MemoryFrame) int { return cmp.Compare(score(b), score(a)) })
	return fs[:min(n, len(fs))]
}
