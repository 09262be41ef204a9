package sessionstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/waggle-os/core/libs/personas"
	"github.com/waggle-os/core/libs/preload"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/frames"
	"github.com/waggle-os/core/services/sessionstore/workspaces"
)

// A turn's whole context in one request (protocol.LoadTurnContext): an
// agent turn used to make about a dozen concurrent requests before its
// model was called, each decoded, routed and answered on its own (and
// Workspace Now, identity, awareness and the persona's team each read the
// workspace's record again). Here the record is read once, the rules of
// the separate endpoints are applied once, and the parts are read
// concurrently inside the store.

// turnContext answers LoadTurnContext. Only the history is required: a
// part that fails is logged here and named in Unavailable, and the turn
// builds its prompt without it.
func (h contextHandlers) turnContext(ctx context.Context, req protocol.TurnContextRequest) (protocol.TurnContext, error) {
	if err := validRef(req.SessionRef); err != nil {
		return protocol.TurnContext{}, err
	}
	if req.User != "" && !protocol.ValidID(req.User) {
		return protocol.TurnContext{}, protocol.Errorf(protocol.Invalid, "invalid user id")
	}
	var out protocol.TurnContext
	doc, err := h.s.getWorkspace(ctx, req.Workspace)
	switch {
	case err == nil:
		ws := doc.Workspace()
		out.Workspace = &ws
	case errors.Is(err, workspaces.ErrNotFound) || protocol.KindOf(err) == protocol.NotFound:
		doc = nil // no workspace: its parts are left out, as the separate endpoints' 404s
	default:
		h.s.log.Warn("turn context: workspace unreadable", "workspace", req.Workspace, "err", err)
		out.Unavailable = append(out.Unavailable, protocol.TurnContextWorkspace)
		doc = nil
	}
	l := turnLoad{h: h, req: req, doc: doc, out: &out}
	if err := l.authorize(ctx); err != nil {
		return protocol.TurnContext{}, err
	}
	var (
		histErr error
		wg      sync.WaitGroup
	)
	wg.Go(func() {
		rep, err := h.s.store.History(ctx, protocol.HistoryRequest{SessionRef: req.SessionRef, Tools: true})
		out.History, histErr = rep, err
	})
	l.start(ctx, &wg)
	wg.Wait()
	if histErr != nil {
		return protocol.TurnContext{}, histErr
	}
	slices.Sort(out.Unavailable)
	return out, nil
}

// turnLoad is one LoadTurnContext request being answered: doc is the
// workspace's record (nil when it does not exist), out the reply its
// parts fill.
type turnLoad struct {
	h   contextHandlers
	req protocol.TurnContextRequest
	doc workspaces.Doc
	out *protocol.TurnContext

	mu sync.Mutex // guards out.Unavailable
}

// authorize applies the team rule the gateway applied before the turn: a
// team workspace's context goes only to a member of that team. The
// separate endpoints leave it to their callers; one request that reads
// everything checks it itself, so a wrong workspace id in a turn never
// reads another team's workspace.
func (l *turnLoad) authorize(ctx context.Context) error {
	if l.doc == nil || l.req.User == "" || l.h.s.teams == nil {
		return nil
	}
	if l.doc.Workspace().TeamID == "" {
		return nil
	}
	_, _, err := l.h.s.teams.AuthorizeWorkspace(ctx, l.req.User, l.req.Workspace, protocol.ActionRead)
	if err != nil {
		return fmt.Errorf("sessionstore: turn context of %s: %w", l.req.Workspace, err)
	}
	return nil
}

// failed logs a part that could not be read and names it in the reply. A
// missing document is not a failure: the part is simply empty.
func (l *turnLoad) failed(part string, err error) bool {
	if err == nil {
		return false
	}
	if protocol.KindOf(err) == protocol.NotFound || errors.Is(err, workspaces.ErrNotFound) {
		return true
	}
	l.h.s.log.Warn("turn context: part unavailable", "part", part, "workspace", l.req.Workspace, "err", err)
	l.mu.Lock()
	l.out.Unavailable = append(l.out.Unavailable, part)
	l.mu.Unlock()
	return true
}

// start runs every part but the history on wg. Each goroutine writes its
// own fields of out.
func (l *turnLoad) start(ctx context.Context, wg *sync.WaitGroup) {
	h, req, out := l.h, l.req, l.out
	owner := protocol.MemoryOwner{Workspace: req.Workspace, User: req.User}
	wg.Go(func() {
		p, err := h.profileGet(ctx, protocol.ProfileRequest{User: req.User})
		if !l.failed(protocol.TurnContextProfile, err) {
			out.Profile = &p
		}
	})
	// The newest frames are read once for both their uses: the prompt's
	// preloaded sections and a catch-up's workspace recall. Only the
	// frames picked are sent.
	catching := req.Recall != nil && preload.IsCatchUp(req.Recall.Query)
	if req.Preload || catching {
		wg.Go(func() {
			fs, err := h.s.minds.Frames(ctx, protocol.MemoryFramesRequest{MemoryOwner: owner, Limit: preload.Window})
			if l.failed(protocol.TurnContextFrames, err) {
				if catching {
					l.failed(protocol.TurnContextRecall, err)
				}
				return
			}
			if req.Preload {
				p := preload.Pick(fs)
				out.Preload = &p
			}
			if catching {
				out.RecallWorkspace = preload.CatchUp(fs)
			}
		})
	}
	if l.doc != nil {
		wg.Go(func() {
			n, err := h.nowOf(ctx, l.doc, protocol.WorkspaceNowRequest{Workspace: req.Workspace, ExceptSession: req.Session})
			if !l.failed(protocol.TurnContextNow, err) {
				out.Now = &n
			}
		})
		wg.Go(func() { l.identity(ctx) })
		wg.Go(func() { l.awareness(ctx) })
	}
	if req.Knowledge > 0 {
		wg.Go(func() {
			g, err := h.s.knowledge.Graph(ctx, protocol.KnowledgeGraphRequest{MemoryOwner: owner, Limit: req.Knowledge})
			if !l.failed(protocol.TurnContextKnowledge, err) {
				out.Knowledge = &g
			}
		})
	}
	if r := req.Recall; r != nil {
		l.recall(ctx, wg, owner, r.Query, catching)
	}
	if id := l.personaID(); id != "" {
		wg.Go(func() { l.persona(ctx, id) })
	}
	if req.UsageSince != "" && h.s.ledger != nil {
		wg.Go(func() {
			sum, err := h.s.ledger.SummaryFor(req.UsageSince, "")
			if !l.failed(protocol.TurnContextUsage, err) {
				out.Usage = &sum
			}
		})
	}
}

// recall runs the auto-recall's searches for query: the personal mind's
// (its hits marked as personal), and the workspace mind's unless a
// catch-up picks that part from the newest frames.
func (l *turnLoad) recall(ctx context.Context, wg *sync.WaitGroup, owner protocol.MemoryOwner, query string, catching bool) {
	search := func(scope string, limit int, into *[]protocol.MemoryFrame) {
		wg.Go(func() {
			fs, err := l.h.s.minds.Query(ctx, protocol.MemoryQueryRequest{MemoryOwner: owner, Query: query, Scope: scope, Limit: limit}, frames.DefaultQuery)
			if l.failed(protocol.TurnContextRecall, err) {
				return
			}
			if scope == protocol.MindPersonal {
				for i := range fs {
					fs[i].Mind = protocol.MindPersonal
				}
			}
			*into = fs
		})
	}
	if catching {
		search(protocol.MindPersonal, preload.CatchUpPersonal, &l.out.RecallPersonal)
		return
	}
	search(protocol.MindPersonal, preload.RecallPerMind, &l.out.RecallPersonal)
	search(protocol.MindWorkspace, preload.RecallPerMind, &l.out.RecallWorkspace)
}

// identity is the workspace mind's identity when it says something, else
// the personal mind's.
func (l *turnLoad) identity(ctx context.Context) {
	var ids [2]protocol.Identity
	errs := l.bothMinds(ctx, "identity", func(i int, doc []byte) error {
		return json.Unmarshal(doc, &ids[i])
	})
	if l.failed(protocol.TurnContextIdentity, errs) {
		return
	}
	for _, id := range ids {
		if id.IdentityContext() != "" {
			l.out.Identity = &id
			return
		}
	}
}

// awareness is the live items of the workspace's mind, then the personal
// mind's (each as GetAwareness lists them).
func (l *turnLoad) awareness(ctx context.Context) {
	var lists [2][]protocol.AwarenessItem
	err := l.bothMinds(ctx, "awareness", func(i int, doc []byte) error {
		items := l.h.live(decodeAwareness(doc, true))
		lists[i] = items[:min(awarenessShown, len(items))]
		return nil
	})
	if !l.failed(protocol.TurnContextAwareness, err) {
		l.out.Awareness = append(lists[0], lists[1]...)
	}
}

// bothMinds reads the document of kind of the workspace's mind (0) and
// the user's personal mind (1) concurrently and hands each one found to
// decode.
func (l *turnLoad) bothMinds(ctx context.Context, kind string, decode func(i int, doc []byte) error) error {
	refs := [2]protocol.MindRef{{Workspace: l.req.Workspace}, {User: l.req.User}}
	var errs [2]error
	var wg sync.WaitGroup
	for i, ref := range refs {
		wg.Go(func() {
			key, err := mindKey(kind, ref)
			if err != nil {
				errs[i] = err
				return
			}
			doc, found, err := l.h.docs.Get(ctx, key)
			if err == nil && found {
				err = decode(i, doc)
			}
			if err != nil {
				errs[i] = fmt.Errorf("sessionstore: %s: %w", kind, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs[0], errs[1])
}

// personaID is the custom persona to look up: the turn's, else the
// workspace's; "" for none or a built-in one.
func (l *turnLoad) personaID() string {
	id := l.req.Persona
	if id == "" && l.out.Workspace != nil {
		id = l.out.Workspace.Persona
	}
	if _, builtIn := personas.Get(id); builtIn {
		return ""
	}
	return id
}

// persona looks id up among the user's custom personas, then the shared
// ones of the workspace's own team (never a team the request names).
func (l *turnLoad) persona(ctx context.Context, id string) {
	if !protocol.ValidID(id) {
		return
	}
	p, err := l.h.personaIn(ctx, l.req.User, "", id)
	if protocol.KindOf(err) == protocol.NotFound && l.doc != nil {
		if team := l.doc.Workspace().TeamID; team != "" {
			p, err = l.h.personaIn(ctx, "", team, id)
		}
	}
	if !l.failed(protocol.TurnContextPersona, err) {
		l.out.Persona = &p
	}
}
