package agentcontext

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
func (m Memory) Query(ctx context.Context, workspace, query, entityType string, limit int) (protocol.KnowledgeGraph, error) {
	g, err := read(ctx, m.Store, protocol.GetKnowledgeGraph, protocol.KnowledgeGraphRequest{
		MemoryOwner: protocol.MemoryOwner{Workspace: workspace, User: m.User}, Scope: protocol.KnowledgeScopeAll,
		Query: query, Type: entityType, Limit: limit,
	})
	if err != nil {
		return protocol.KnowledgeGraph{}, fmt.Errorf("agentcontext: query knowledge of %s: %w", workspace, err)
	}
	return g, nil
}

// Correct implements tools.Knowledge over the session store.
func (m Memory) Correct(ctx context.Context, workspace, id, reason string) (protocol.KnowledgeGraph, error) {
	g, err := bus.Call(ctx, m.Conn, protocol.CorrectKnowledge, protocol.KnowledgeCorrectRequest{
		MemoryOwner: protocol.MemoryOwner{Workspace: workspace, User: m.User}, ID: id, Reason: reason,
	}, m.within())
	if err != nil {
		return protocol.KnowledgeGraph{}, fmt.Errorf("agentcontext: correct knowledge of %s: %w", workspace, err)
	}
	return g, nil
}

// KeyKnowledge is the "key knowledge" part of a workspace's system
// prompt: its most mentioned entities and the relations between them, or
// "" when the graph is empty or unreachable (a prompt part is never worth
// failing a turn for). The system prompt's builder calls it once per turn.
func (m Memory) KeyKnowledge(ctx context.Context, workspace string) string {
	g, err := read(ctx, m.Store, protocol.GetKnowledgeGraph, protocol.KnowledgeGraphRequest{
		MemoryOwner: protocol.MemoryOwner{Workspace: workspace, User: m.User}, Limit: keyKnowledgeEntities,
	})
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
