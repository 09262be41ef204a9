// Package agentcontext gathers what an agent turn knows besides the user's
// message — its history, the workspace's settings, today's spend, the
// user's profile, memory frames, Workspace Now, the minds' identity and
// awareness, key knowledge, the persona — from the session store over the
// bus, builds the system prompt from it, and gives the turn's memory tools
// their bus backends.
package agentcontext

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/injection"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/wsnow"
	"github.com/waggle-os/core/services/turnrunner/prompt"
)

// What a turn knows besides its history (docs/agent.md): the user's
// profile, the preloaded frames and Workspace Now, loaded next to the
// history; every piece is optional and a failure to read it only leaves
// its part of the prompt out.

// preloadFrames is how many of the newest frames (workspace and personal
// mind together) the preloaded sections are chosen from.
const preloadFrames = 200

// Store reaches the session store over the bus, each request bounded by
// Timeout.
type Store struct {
	Conn    *nats.Conn
	Timeout time.Duration
}

// within bounds one request to the store.
func (s Store) within() bus.CallOption { return bus.Within(s.Timeout) }

// readResendAfter is how long a read waits for its answer before it is
// sent again (a read answers in milliseconds).
const readResendAfter = 2 * time.Second

// read sends a read to the store within s.Timeout, again while it is
// unanswered: a request lost with a dying cluster node (or sent while the
// store reconnects to another node) costs a resend, not the whole
// timeout. A read changes nothing, so a copy served twice costs nothing.
// A read nobody serves answers protocol.ErrUnavailable at once: what it
// reads is optional.
func read[Req, Rep any](ctx context.Context, s Store, ep protocol.Endpoint[Req, Rep], req Req) (Rep, error) {
	return resendRead(ctx, s, ep, req, 0)
}

// readRequired is read for what a turn cannot go without (its history):
// a read nobody serves is sent again for readResendAfter too (a store
// reconnecting after a node loss).
func readRequired[Req, Rep any](ctx context.Context, s Store, ep protocol.Endpoint[Req, Rep], req Req) (Rep, error) {
	return resendRead(ctx, s, ep, req, readResendAfter)
}

func resendRead[Req, Rep any](ctx context.Context, s Store, ep protocol.Endpoint[Req, Rep], req Req, unanswered time.Duration) (Rep, error) {
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}
	return bus.CallResending(ctx, s.Conn, ep, req, bus.Resending{After: readResendAfter, Unanswered: unanswered})
}

// Loader reads one turn's context from the session store.
type Loader struct {
	Store
	// Req is the turn's request: its workspace, session and user.
	Req protocol.TurnRequest
	// Log is the turn's logger.
	Log *slog.Logger
}

// Context is what the prompt is built from besides the recall.
type Context struct {
	profile *protocol.Profile
	now     string
	recent  []protocol.MemoryFrame
	prefs   []protocol.MemoryFrame
	fixes   []protocol.MemoryFrame
	// identity is the agent's configured identity, awareness its live
	// items (tasks and the like), as text ("" for none).
	identity, awareness string
	// knowledge is the workspace graph's key knowledge ("" for none).
	knowledge string
}

// Context reads the profile, the newest frames and Workspace Now
// concurrently.
func (l Loader) Context(ctx context.Context) Context {
	var (
		out Context
		wg  sync.WaitGroup
	)
	wg.Go(func() {
		p, err := read(ctx, l.Store, protocol.GetProfile, protocol.ProfileRequest{User: l.Req.User})
		if l.optional(ctx, "profile", err) {
			out.profile = &p
		}
	})
	wg.Go(func() {
		rep, err := read(ctx, l.Store, protocol.ListFrames, protocol.MemoryFramesRequest{
			MemoryOwner: protocol.MemoryOwner{Workspace: l.Req.Workspace, User: l.Req.User}, Limit: preloadFrames,
		})
		if l.optional(ctx, "frames", err) {
			out.recent, out.prefs, out.fixes = preload(rep.Frames)
		}
	})
	wg.Go(func() {
		n, err := read(ctx, l.Store, protocol.GetWorkspaceNow, protocol.WorkspaceNowRequest{Workspace: l.Req.Workspace, ExceptSession: l.Req.Session})
		if l.optional(ctx, "workspace now", err) {
			out.now = wsnow.Format(n)
		}
	})
	mind := Mind{Store: l.Store, Workspace: l.Req.Workspace, User: l.Req.User}
	wg.Go(func() {
		text, err := mind.Identity(ctx)
		if l.optional(ctx, "identity", err) {
			out.identity = text
		}
	})
	wg.Go(func() {
		items, err := mind.items(ctx)
		if l.optional(ctx, "awareness", err) && len(items) > 0 {
			out.awareness = protocol.AwarenessContext(items)
		}
	})
	wg.Go(func() {
		out.knowledge = Memory{Store: l.Store, User: l.Req.User}.KeyKnowledge(ctx, l.Req.Workspace)
	})
	wg.Wait()
	return out
}

// optional reports whether err is nil; a store without the endpoint or a
// missing workspace is silent, anything else is logged.
func (l Loader) optional(ctx context.Context, what string, err error) bool {
	if err == nil {
		return true
	}
	if !errors.Is(err, protocol.ErrUnavailable) && protocol.KindOf(err) != protocol.NotFound && ctx.Err() == nil {
		l.Log.Warn("turn context unavailable; prompt built without it", "part", what, "err", err)
	}
	return false
}

// preload picks, from frames newest first, the workspace's important
// frames, the user's preference and style notes and their corrections.
// Deprecated frames and frames that read as injected instructions are
// left out: they would reach the system prompt on every turn.
func preload(frames []protocol.MemoryFrame) (recent, prefs, fixes []protocol.MemoryFrame) {
	for _, f := range frames {
		if f.Importance == protocol.ImportanceDeprecated || injection.Scan(f.Content, injection.ToolOutput).Blocked() {
			continue
		}
		c := strings.TrimSpace(f.Content)
		switch {
		case strings.HasPrefix(c, prompt.PrefixCorrection):
			if len(fixes) < prompt.MaxCorrections {
				fixes = append(fixes, f)
			}
		case strings.HasPrefix(c, prompt.PrefixPreference), strings.HasPrefix(c, prompt.PrefixStyle), strings.HasPrefix(c, prompt.PrefixTopic):
			if len(prefs) < prompt.MaxPreferences {
				prefs = append(prefs, f)
			}
		case f.Mind == protocol.MindWorkspace && (f.Importance == protocol.ImportanceCritical || f.Importance == protocol.ImportanceImportant):
			if len(recent) < prompt.MaxRecent {
				recent = append(recent, f)
			}
		}
	}
	return recent, prefs, fixes
}

// catchUp matches messages that ask to be brought up to date (the
// original's list): recall then goes by importance and recency.
var catchUp = regexp.MustCompile(`(?i)\bcatch me up\b|\bwhere (?:are|were) we\b|\bwhat matters\b|\bwhat did we decide\b|\bwhere did we leave off\b|\bwhat['’]?s the status\b|\bwhat should i do\b|\bwhat['’]?s next\b|\bsummariz|\bbrief me\b|\bget me up to speed\b|\bwhat['’]?s going on\b|\bremind me\b`)

// IsCatchUp reports whether message asks to be caught up.
func IsCatchUp(message string) bool { return catchUp.MatchString(message) }

// Recall sizes (the original's).
const (
	catchUpRecent   = 3
	catchUpPersonal = 2
)

// recallFrames is the auto-recall: up to prompt.RecallPerMind frames of
// each mind for query, or for a catch-up the workspace's important and
// decision frames plus its newest, and the 2 best personal hits.
func (m Memory) recallFrames(ctx context.Context, workspace, query string) ([]protocol.MemoryFrame, error) {
	owner := protocol.MemoryOwner{Workspace: workspace, User: m.User}
	var (
		ws, personal []protocol.MemoryFrame
		wsErr, pErr  error
		wg           sync.WaitGroup
	)
	personalLimit := prompt.RecallPerMind
	catching := IsCatchUp(query)
	if catching {
		personalLimit = catchUpPersonal
	}
	wg.Go(func() {
		rep, err := read(ctx, m.Store, protocol.QueryMemory, protocol.MemoryQueryRequest{
			MemoryOwner: owner, Query: query, Scope: protocol.MindPersonal, Limit: personalLimit})
		personal, pErr = rep.Frames, err
	})
	wg.Go(func() {
		if catching {
			rep, err := read(ctx, m.Store, protocol.ListFrames, protocol.MemoryFramesRequest{MemoryOwner: owner, Limit: preloadFrames})
			ws, wsErr = catchUpFrames(rep.Frames), err
			return
		}
		rep, err := read(ctx, m.Store, protocol.QueryMemory, protocol.MemoryQueryRequest{
			MemoryOwner: owner, Query: query, Scope: protocol.MindWorkspace, Limit: prompt.RecallPerMind})
		ws, wsErr = rep.Frames, err
	})
	wg.Wait()
	if err := errors.Join(wsErr, pErr); err != nil {
		return nil, err
	}
	for i := range personal {
		personal[i].Mind = protocol.MindPersonal
	}
	return append(ws, personal...), nil
}

var decisionish = regexp.MustCompile(`(?i)^decision|decided`)

// catchUpFrames picks from frames (newest first) the workspace's critical,
// important and decision frames, most important first, then its newest
// non-temporary frames, each once.
func catchUpFrames(frames []protocol.MemoryFrame) []protocol.MemoryFrame {
	var key, newest []protocol.MemoryFrame
	for _, f := range frames {
		if f.Mind != protocol.MindWorkspace || f.Importance == protocol.ImportanceDeprecated {
			continue
		}
		if f.Importance == protocol.ImportanceCritical || f.Importance == protocol.ImportanceImportant || decisionish.MatchString(f.Content) {
			key = append(key, f)
		}
		if f.Importance != protocol.ImportanceTemporary && len(newest) < catchUpRecent {
			newest = append(newest, f)
		}
	}
	rank := map[string]int{protocol.ImportanceCritical: 0, protocol.ImportanceImportant: 1}
	slices.SortStableFunc(key, func(a, b protocol.MemoryFrame) int {
		ra, okA := rank[a.Importance]
		rb, okB := rank[b.Importance]
		if !okA {
			ra = 2
		}
		if !okB {
			rb = 2
		}
		return ra - rb
	})
	out := key[:min(len(key), prompt.RecallPerMind)]
	for _, f := range newest {
		if len(out) == prompt.RecallPerMind {
			break
		}
		if !slices.ContainsFunc(out, func(o protocol.MemoryFrame) bool { return o.ID == f.ID }) {
			out = append(out, f)
		}
	}
	return out
}

// Prompt returns the agent's prompt builder for this turn: budget is the
// prompt's most estimated tokens, history the length of the turn's
// history, vague whether message is a vague first message.
func (l Loader) Prompt(budget int, tc Context, ws protocol.Workspace, persona Persona, message string, history int, vague bool) func([]protocol.MemoryFrame, bool) string {
	return func(recalled []protocol.MemoryFrame, expanded bool) string {
		a := prompt.Assembler{Budget: budget}
		if tc.knowledge != "" {
			a.Extra = []prompt.Part{{Name: "key-knowledge", Build: func(prompt.Input) string { return tc.knowledge }}}
		}
		p := a.Assemble(prompt.Input{
			Now: time.Now(), Workspace: l.Req.Workspace, WorkspaceName: ws.Name, WorkspaceDir: l.Req.WorkspacePath,
			Persona: persona.Prompt, ReadOnly: persona.ReadOnly, Tone: ws.Tone,
			Profile: tc.profile, WorkspaceNow: tc.now, AgentIdentity: tc.identity, Awareness: tc.awareness,
			Recent: tc.recent, Preferences: tc.prefs, Corrections: tc.fixes,
			Recalled: recalled, CatchUp: IsCatchUp(message),
			Vague: vague && !expanded, HistoryLength: history,
		})
		if len(p.Trimmed) > 0 {
			l.Log.Info("system prompt trimmed to its budget", "tokens", p.Tokens, "trimmed", p.Trimmed)
		}
		return p.Text
	}
}

// Mind is the identity and awareness of a turn's workspace mind and its
// user's personal mind, kept by the session store. It implements
// tools.Mind.
type Mind struct {
	Store
	Workspace, User string
}

func (m Mind) refs() (ws, personal protocol.MindRef) {
	return protocol.MindRef{Workspace: m.Workspace}, protocol.MindRef{User: m.User}
}

// Identity is the workspace's identity when it has one, else the user's.
// Both are asked at once: the prompt waits for the slower, not the sum.
func (m Mind) Identity(ctx context.Context) (string, error) {
	var ids [2]protocol.Identity
	err := m.both(ctx, func(i int, ref protocol.MindRef) error {
		id, err := read(ctx, m.Store, protocol.GetIdentity, ref)
		ids[i] = id
		return err
	})
	if err != nil {
		return "", fmt.Errorf("agentcontext: identity: %w", err)
	}
	for _, id := range ids {
		if text := id.IdentityContext(); text != "" {
			return text, nil
		}
	}
	return "", nil
}

// items are the live awareness items of the workspace, then the user's.
func (m Mind) items(ctx context.Context) ([]protocol.AwarenessItem, error) {
	var lists [2][]protocol.AwarenessItem
	err := m.both(ctx, func(i int, ref protocol.MindRef) error {
		l, err := read(ctx, m.Store, protocol.GetAwareness, ref)
		lists[i] = l.Items
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("agentcontext: awareness: %w", err)
	}
	return append(lists[0], lists[1]...), nil
}

// both runs ask for the workspace mind (0) and the personal mind (1)
// concurrently; the first error wins.
func (m Mind) both(ctx context.Context, ask func(i int, ref protocol.MindRef) error) error {
	ws, personal := m.refs()
	var errs [2]error
	var wg sync.WaitGroup
	for i, ref := range []protocol.MindRef{ws, personal} {
		wg.Go(func() { errs[i] = ask(i, ref) })
	}
	wg.Wait()
	return cmp.Or(errs[0], errs[1])
}

// Awareness is the items as the original's text.
func (m Mind) Awareness(ctx context.Context) (string, error) {
	items, err := m.items(ctx)
	if err != nil {
		return "", err
	}
	return protocol.AwarenessContext(items), nil
}

// AddTask adds a task to the workspace's awareness.
func (m Mind) AddTask(ctx context.Context, content string, priority int) (string, int, error) {
	it, err := bus.Call(ctx, m.Conn, protocol.AddAwareness, protocol.AwarenessAddRequest{
		MindRef: protocol.MindRef{Workspace: m.Workspace}, Category: protocol.AwarenessTask, Content: content, Priority: priority,
	}, m.within())
	if err != nil {
		return "", 0, fmt.Errorf("agentcontext: add task: %w", err)
	}
	return it.Content, it.Priority, nil
}
