package sessionstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/wsnow"
	"github.com/waggle-os/core/services/sessionstore/userdocs"
	"github.com/waggle-os/core/services/sessionstore/workspaces"
)

// What the agent knows about the user and the workspace (docs/agent.md):
// the profile, kept per user, and Workspace Now, computed from the
// workspace's sessions and frames on request.

// nowFrames is how many of a workspace's newest frames the briefing reads.
const nowFrames = 200

// contextHandlers serve the profile and Workspace Now.
type contextHandlers struct {
	s    *Service
	docs userdocs.Store
	now  func() time.Time
}

// registerContext opens the documents store (PostgreSQL when pool is set)
// and adds the profile and Workspace Now endpoints.
func (s *Service) registerContext(pool *pgxpool.Pool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	docs, err := s.openDocs(ctx, pool)
	if err != nil {
		return err
	}
	s.docs = docs
	h := contextHandlers{s: s, docs: docs, now: time.Now}
	return errors.Join(
		bus.Handle(s.svc, protocol.GetProfile, h.profileGet),
		bus.Handle(s.svc, protocol.UpdateProfile, h.profileUpdate),
		bus.Handle(s.svc, protocol.GetWorkspaceNow, h.workspaceNow),
		bus.Handle(s.svc, protocol.LoadTurnContext, h.turnContext),
		bus.Handle(s.svc, protocol.ListCustomPersonas, h.personaList),
		bus.Handle(s.svc, protocol.GetCustomPersona, h.personaGet),
		bus.Handle(s.svc, protocol.CreateCustomPersona, h.personaCreate),
		bus.Handle(s.svc, protocol.UpdateCustomPersona, h.personaUpdate),
		bus.Handle(s.svc, protocol.DeleteCustomPersona, h.personaDelete),
		bus.Handle(s.svc, protocol.GetIdentity, h.identityGet),
		bus.Handle(s.svc, protocol.SetIdentity, h.identitySet),
		bus.Handle(s.svc, protocol.GetAwareness, h.awarenessGet),
		bus.Handle(s.svc, protocol.AddAwareness, h.awarenessAdd),
	)
}

// openDocs opens the documents store: PostgreSQL when every workspace
// lives there, files without a pool, and with PostgreSQL for team
// workspaces only, both behind docsRouter (docroute.go), after moving
// what an older version left on the wrong side.
func (s *Service) openDocs(ctx context.Context, pool *pgxpool.Pool) (userdocs.Store, error) {
	if pool == nil || s.cfg.Store == StorePostgres {
		docs, err := userdocs.New(ctx, s.cfg.DataDir, pool)
		if err != nil {
			return nil, fmt.Errorf("sessionstore: %w", err)
		}
		return docs, nil
	}
	files, err := userdocs.New(ctx, s.cfg.DataDir, nil)
	if err != nil {
		return nil, fmt.Errorf("sessionstore: %w", err)
	}
	team, err := userdocs.New(ctx, "", pool)
	if err != nil {
		return nil, fmt.Errorf("sessionstore: %w", err)
	}
	r := &docsRouter{placement: placement{isTeam: s.pg.WorkspaceExists}, files: files, team: team}
	if err := movePersonalDocs(ctx, pool, r, s.workspaceExists, s.log); err != nil {
		return nil, fmt.Errorf("sessionstore: move personal documents out of PostgreSQL: %w", err)
	}
	return r, nil
}

// profileKey is where user's profile lives: the data dir's profile.json
// locally (the original's file), one per user on a team server.
func profileKey(user string) userdocs.Key {
	if user == "" {
		return userdocs.Key{Kind: "profile"}
	}
	return userdocs.Key{Kind: "profile", Scope: "users", Owner: user}
}

func decodeProfile(doc []byte, found bool) (protocol.Profile, error) {
	p := protocol.DefaultProfile()
	if !found {
		return p, nil
	}
	// Fields the file lacks keep their defaults, as the original's merge.
	if err := json.Unmarshal(doc, &p); err != nil {
		return protocol.DefaultProfile(), fmt.Errorf("sessionstore: profile: %w", err)
	}
	return protocol.ProfileUpdate{}.Apply(p) // normalises nil lists
}

func (h contextHandlers) profileGet(ctx context.Context, req protocol.ProfileRequest) (protocol.Profile, error) {
	doc, found, err := h.docs.Get(ctx, profileKey(req.User))
	if err != nil {
		return protocol.Profile{}, err
	}
	p, err := decodeProfile(doc, found)
	if err != nil {
		// An unreadable profile reads as the defaults (as the original);
		// the next update replaces it.
		h.s.log.Warn("unreadable profile treated as the defaults", "user", req.User, "err", err)
		return protocol.DefaultProfile(), nil
	}
	return p, nil
}

func (h contextHandlers) profileUpdate(ctx context.Context, req protocol.ProfileUpdateRequest) (protocol.Profile, error) {
	var out protocol.Profile
	err := h.docs.Update(ctx, profileKey(req.User), func(old []byte, found bool) ([]byte, error) {
		p, err := decodeProfile(old, found)
		if err != nil {
			h.s.log.Warn("unreadable profile replaced", "user", req.User, "err", err)
		}
		if p, err = req.Update.Apply(p); err != nil {
			return nil, err
		}
		if len(req.AddSample) > protocol.MaxProfileField {
			return nil, protocol.Errorf(protocol.Invalid, "a writing sample is at most %d bytes", protocol.MaxProfileField)
		}
		if req.AddSample != "" {
			p.WritingStyle.Samples = append(p.WritingStyle.Samples, req.AddSample)
			if n := len(p.WritingStyle.Samples); n > protocol.MaxProfileSamples {
				p.WritingStyle.Samples = slices.Clone(p.WritingStyle.Samples[n-protocol.MaxProfileSamples:])
			}
		}
		ts := protocol.Timestamp(h.now())
		if p.CreatedAt == "" {
			p.CreatedAt = ts
		}
		p.UpdatedAt = ts
		out = p
		return json.MarshalIndent(p, "", "  ")
	})
	return out, err
}

func (h contextHandlers) workspaceNow(ctx context.Context, req protocol.WorkspaceNowRequest) (protocol.WorkspaceNow, error) {
	if !protocol.ValidID(req.Workspace) {
		return protocol.WorkspaceNow{}, protocol.Errorf(protocol.Invalid, "invalid workspace id")
	}
	doc, err := h.s.getWorkspace(ctx, req.Workspace)
	if err != nil {
		return protocol.WorkspaceNow{}, err
	}
	return h.nowOf(ctx, doc, req)
}

// nowOf is Workspace Now of doc, the workspace req names: the cached
// briefing while nothing it was built from changed (nowcache.go).
func (h contextHandlers) nowOf(ctx context.Context, doc workspaces.Doc, req protocol.WorkspaceNowRequest) (protocol.WorkspaceNow, error) {
	// The workspace's own frames only: the personal mind of whoever asks
	// is not the workspace's state. The minds' versions are read before
	// the frames, so a change in between only costs a rebuild.
	owner := protocol.MemoryOwner{Workspace: req.Workspace}
	versions, versioned := h.s.minds.Version(ctx, owner)
	sessions, err := h.s.store.RecentSessions(ctx, protocol.SessionListRequest{Workspace: req.Workspace, HideEmpty: true})
	if err != nil {
		return protocol.WorkspaceNow{}, err
	}
	sessions = slices.DeleteFunc(sessions, func(s protocol.SessionInfo) bool { return s.ID == req.ExceptSession })
	key, at, digest := nowKey{req.Workspace, req.ExceptSession}, h.now(), listingDigest(sessions)
	if versioned {
		if b, ok := h.s.nows.get(key); ok && b.current(doc, digest, versions, at) {
			return b.now, nil
		}
	}
	mf, ok := h.s.nows.framesOf(req.Workspace, versions)
	if !versioned || !ok {
		if mf, err = h.mindFrames(ctx, owner); err != nil {
			return protocol.WorkspaceNow{}, err
		}
		if versioned {
			mf.minds = versions
			h.s.nows.putFrames(req.Workspace, mf)
		}
	}
	n := wsnow.Build(wsnow.Input{Workspace: doc.Workspace(), Sessions: sessions, Frames: mf.frames, MemoryCount: mf.count,
		TranscriptItems: h.s.transcriptItems(ctx, req.Workspace, sessions), Now: at})
	if versioned {
		h.s.nows.put(key, builtNow{doc: doc, sessions: digest, minds: versions, at: at, now: n})
	}
	return n, nil
}

// mindFrames reads the workspace's newest frames (nowFrames of its mind
// and the personal one together) and its mind's frame count.
func (h contextHandlers) mindFrames(ctx context.Context, owner protocol.MemoryOwner) (mindFrames, error) {
	all, err := h.s.minds.Frames(ctx, protocol.MemoryFramesRequest{MemoryOwner: owner, Limit: nowFrames})
	if err != nil {
		return mindFrames{}, err
	}
	frames := make([]protocol.MemoryFrame, 0, len(all))
	for _, f := range all {
		if f.Mind == protocol.MindWorkspace {
			frames = append(frames, f)
		}
	}
	count := len(frames)
	if st, err := h.s.minds.Stats(ctx, protocol.MemoryStatsRequest{MemoryOwner: owner}); err == nil && st.Workspace != nil {
		count = st.Workspace.FrameCount
	}
	return mindFrames{frames: frames, count: count}, nil
}
