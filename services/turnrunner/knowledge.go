package turnrunner

import (
	"context"
	"fmt"
	"strings"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

// keyKnowledgeEntities is how many entities the "key knowledge" part of
// the system prompt names.
const keyKnowledgeEntities = 12

// Query implements tools.Knowledge over the session store.
func (m busMemory) Query(ctx context.Context, workspace, query, entityType string, limit int) (protocol.KnowledgeGraph, error) {
	g, err := bus.Call(ctx, m.s.nc, protocol.GetKnowledgeGraph, protocol.KnowledgeGraphRequest{
		MemoryOwner: protocol.MemoryOwner{Workspace: workspace, User: m.user}, Scope: protocol.KnowledgeScopeAll,
		Query: query, Type: entityType, Limit: limit,
	}, bus.Within(m.s.cfg.StoreTimeout))
	if err != nil {
		return protocol.KnowledgeGraph{}, fmt.Errorf("turnrunner: query knowledge of %s: %w", workspace, err)
	}
	return g, nil
}

// Correct implements tools.Knowledge over the session store.
func (m busMemory) Correct(ctx context.Context, workspace, id, reason string) (protocol.KnowledgeGraph, error) {
	g, err := bus.Call(ctx, m.s.nc, protocol.CorrectKnowledge, protocol.KnowledgeCorrectRequest{
		MemoryOwner: protocol.MemoryOwner{Workspace: workspace, User: m.user}, ID: id, Reason: reason,
	}, bus.Within(m.s.cfg.StoreTimeout))
	if err != nil {
		return protocol.KnowledgeGraph{}, fmt.Errorf("turnrunner: correct knowledge of %s: %w", workspace, err)
	}
	return g, nil
}

// KeyKnowledge is the "key knowledge" part of a workspace's system
// prompt: its most mentioned entities and the relations between them, or
// "" when the graph is empty or unreachable (a prompt part is never worth
// failing a turn for). The system prompt's builder calls it once per turn.
func (m busMemory) KeyKnowledge(ctx context.Context, workspace string) string {
	g, err := bus.Call(ctx, m.s.nc, protocol.GetKnowledgeGraph, protocol.KnowledgeGraphRequest{
		MemoryOwner: protocol.MemoryOwner{Workspace: workspace, User: m.user}, Limit: keyKnowledgeEntities,
	}, bus.Within(m.s.cfg.StoreTimeout))
	if err != nil || len(g.Entities) == 0 {
		return ""
	}
	return KeyKnowledgeText(g)
}

// KeyKnowledgeText renders a graph's top entities for the system prompt:
// facts the model may rely on, each a short line.
func KeyKnowledgeText(g protocol.KnowledgeGraph) string {
	names := map[string]string{}
	var b strings.Builder
	b.WriteString("## Key knowledge of this workspace\n")
	for _, e := range g.Entities {
		names[e.ID] = e.Name
		fmt.Fprintf(&b, "- %s (%s)\n", e.Name, e.Type)
	}
	for _, r := range g.Relations {
		from, ok1 := names[r.Source]
		to, ok2 := names[r.Target]
		if ok1 && ok2 && r.Type != "mentioned_with" {
			fmt.Fprintf(&b, "- %s %s %s\n", from, strings.ReplaceAll(r.Type, "_", " "), to)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}
