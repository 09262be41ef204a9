package sessionstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/userdocs"
)

// A mind's identity and awareness (the original's identity and awareness
// layers): one identity record and a short list of awareness items per
// mind — the personal mind of each user, and each workspace's.

// Awareness sizes: the original shows 10 live items; we keep at most
// maxAwarenessKept, dropping the lowest-priority oldest first.
const (
	awarenessShown   = 10
	maxAwarenessKept = 100
)

// mindKey is where a mind's document of kind lives.
func mindKey(kind string, m protocol.MindRef) (userdocs.Key, error) {
	switch {
	case m.Workspace != "":
		if !protocol.ValidID(m.Workspace) {
			return userdocs.Key{}, protocol.Errorf(protocol.Invalid, "invalid workspace id")
		}
		return userdocs.Key{Kind: kind, Scope: "workspaces", Owner: m.Workspace}, nil
	case m.User != "":
		return userdocs.Key{Kind: kind, Scope: "users", Owner: m.User}, nil
	}
	return userdocs.Key{Kind: kind}, nil
}

// mindDocKinds are the documents a mind keeps in userdocs.
var mindDocKinds = []string{"identity", "awareness"}

// dropMindDocs deletes workspace's mind documents.
func (s *Service) dropMindDocs(ctx context.Context, workspace string) error {
	for _, kind := range mindDocKinds {
		key, err := mindKey(kind, protocol.MindRef{Workspace: workspace})
		if err == nil {
			err = s.docs.Delete(ctx, key)
		}
		if err != nil {
			return fmt.Errorf("sessionstore: drop workspace %s: %w", kind, err)
		}
	}
	return nil
}

// checkMind makes sure a workspace mind's workspace exists.
func (h contextHandlers) checkMind(ctx context.Context, m protocol.MindRef) error {
	if m.Workspace == "" {
		return nil
	}
	_, err := h.s.getWorkspace(ctx, m.Workspace)
	return err
}

func (h contextHandlers) identityGet(ctx context.Context, m protocol.MindRef) (protocol.Identity, error) {
	key, err := mindKey("identity", m)
	if err != nil {
		return protocol.Identity{}, err
	}
	if err := h.checkMind(ctx, m); err != nil {
		return protocol.Identity{}, err
	}
	doc, found, err := h.docs.Get(ctx, key)
	if err != nil || !found {
		return protocol.Identity{}, err
	}
	var id protocol.Identity
	if err := json.Unmarshal(doc, &id); err != nil {
		return protocol.Identity{}, fmt.Errorf("sessionstore: identity: %w", err)
	}
	return id, nil
}

func (h contextHandlers) identitySet(ctx context.Context, req protocol.IdentitySetRequest) (protocol.Identity, error) {
	key, err := mindKey("identity", req.MindRef)
	if err != nil {
		return protocol.Identity{}, err
	}
	if err := h.checkMind(ctx, req.MindRef); err != nil {
		return protocol.Identity{}, err
	}
	w := req.Write
	for _, v := range []string{w.Name, w.Role, w.Department, w.Personality, w.Capabilities, w.SystemPrompt} {
		if len(v) > protocol.MaxIdentityField {
			return protocol.Identity{}, protocol.Errorf(protocol.Invalid, "identity fields are at most %d bytes", protocol.MaxIdentityField)
		}
	}
	var out protocol.Identity
	err = h.docs.Update(ctx, key, func(old []byte, found bool) ([]byte, error) {
		var prev protocol.Identity
		if found {
			_ = json.Unmarshal(old, &prev) // unreadable: written anew
		}
		ts := protocol.Timestamp(h.now())
		created := ts
		if prev.CreatedAt != nil {
			created = *prev.CreatedAt
		}
		s := func(v string) *string { return &v }
		out = protocol.Identity{Configured: true, Name: s(w.Name), Role: s(w.Role), Department: s(w.Department),
			Personality: s(w.Personality), Capabilities: s(w.Capabilities), SystemPrompt: s(w.SystemPrompt),
			CreatedAt: &created, UpdatedAt: &ts}
		return json.MarshalIndent(out, "", "  ")
	})
	return out, err
}

func decodeAwareness(doc []byte, found bool) []protocol.AwarenessItem {
	var items []protocol.AwarenessItem
	if found {
		_ = json.Unmarshal(doc, &items) // unreadable: none
	}
	return items
}

// live is items not expired, highest priority first, newest first within
// a priority.
func (h contextHandlers) live(items []protocol.AwarenessItem) []protocol.AwarenessItem {
	now := protocol.Timestamp(h.now())
	out := slices.DeleteFunc(slices.Clone(items), func(it protocol.AwarenessItem) bool {
		return it.ExpiresAt != nil && *it.ExpiresAt <= now
	})
	slices.SortStableFunc(out, func(a, b protocol.AwarenessItem) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), cmp.Compare(b.ID, a.ID))
	})
	return out
}

func (h contextHandlers) awarenessGet(ctx context.Context, m protocol.MindRef) (protocol.AwarenessList, error) {
	key, err := mindKey("awareness", m)
	if err != nil {
		return protocol.AwarenessList{}, err
	}
	if err := h.checkMind(ctx, m); err != nil {
		return protocol.AwarenessList{}, err
	}
	doc, found, err := h.docs.Get(ctx, key)
	if err != nil {
		return protocol.AwarenessList{}, err
	}
	items := h.live(decodeAwareness(doc, found))
	return protocol.AwarenessList{Items: append([]protocol.AwarenessItem{}, items[:min(awarenessShown, len(items))]...)}, nil
}

func (h contextHandlers) awarenessAdd(ctx context.Context, req protocol.AwarenessAddRequest) (protocol.AwarenessItem, error) {
	key, err := mindKey("awareness", req.MindRef)
	if err != nil {
		return protocol.AwarenessItem{}, err
	}
	switch req.Category {
	case protocol.AwarenessTask, protocol.AwarenessAction, protocol.AwarenessPending, protocol.AwarenessFlag:
	default:
		return protocol.AwarenessItem{}, protocol.Errorf(protocol.Invalid, "unknown awareness category %q", req.Category)
	}
	content := strings.TrimSpace(req.Content)
	if content == "" {
		return protocol.AwarenessItem{}, protocol.Errorf(protocol.Invalid, "content is required")
	}
	if len(content) > 2000 {
		content = content[:2000]
	}
	if err := h.checkMind(ctx, req.MindRef); err != nil {
		return protocol.AwarenessItem{}, err
	}
	var out protocol.AwarenessItem
	err = h.docs.Update(ctx, key, func(old []byte, found bool) ([]byte, error) {
		items := h.live(decodeAwareness(old, found))
		next := 1
		for _, it := range items {
			next = max(next, it.ID+1)
		}
		out = protocol.AwarenessItem{ID: next, Category: req.Category, Content: content, Priority: min(max(req.Priority, 0), 10),
			Metadata: "{}", CreatedAt: protocol.Timestamp(h.now())}
		items = h.live(append(items, out))
		return json.MarshalIndent(items[:min(maxAwarenessKept, len(items))], "", "  ")
	})
	return out, err
}
