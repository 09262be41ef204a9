package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/waggle-os/core/libs/protocol"
)

// Knowledge reads and corrects a workspace's knowledge graph (the session
// store's; the turn runner implements it over the bus).
type Knowledge interface {
	// Query finds the entities whose name contains query (empty: the most
	// mentioned) and their relations, in the workspace's and the personal
	// mind.
	Query(ctx context.Context, workspace, query, entityType string, limit int) (protocol.KnowledgeGraph, error)
	// Correct retires a wrong entity or relation by id.
	Correct(ctx context.Context, workspace, id, reason string) (protocol.KnowledgeGraph, error)
}

// Knowledge query bounds.
const (
	defaultKnowledgeResults = 10
	maxKnowledgeResults     = 50
)

var errNoKnowledge = errors.New("the knowledge graph is not available in this session")

// ---- query_knowledge ----

type queryKnowledgeTool struct{}

func (queryKnowledgeTool) Name() string { return "query_knowledge" }

func (queryKnowledgeTool) Description() string {
	return "Look up what this workspace's knowledge graph knows: people, organisations, projects, technologies, " +
		"places and concepts named in earlier conversations and memories, with how they relate (leads, works_at, " +
		"depends_on, ...). Each fact has an id; if one is wrong, retire it with correct_knowledge."
}

func (queryKnowledgeTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"query":{"type":"string","description":"A name or part of one (empty: the most mentioned entities)"},` +
		`"type":{"type":"string","enum":["person","organisation","project","technology","place","concept","event","document"],"description":"Only entities of this type"},` +
		`"limit":{"type":"integer","minimum":1,"maximum":50,"description":"Maximum number of matching entities"}` +
		`},"required":[]}`)
}

// Available hides the tool when the turn has no knowledge graph.
func (queryKnowledgeTool) Available(env Env) bool { return env.Knowledge != nil }

// queryKnowledgeInput is query_knowledge's arguments.
type queryKnowledgeInput struct {
	Query string  `json:"query,omitempty"`
	Type  string  `json:"type,omitempty"`
	Limit *intArg `json:"limit,omitempty"`
}

func (in *queryKnowledgeInput) validate() error {
	if len(in.Query) > 120 {
		return errors.New("query is at most 120 characters")
	}
	return nil
}

func (t queryKnowledgeTool) Decode(input json.RawMessage) (Call, error) {
	return decodeCall(input, t.run)
}

func (queryKnowledgeTool) run(ctx context.Context, env Env, in *queryKnowledgeInput) (string, error) {
	if env.Knowledge == nil {
		return "", errNoKnowledge
	}
	limit := defaultKnowledgeResults
	if in.Limit != nil && *in.Limit > 0 {
		limit = min(int(*in.Limit), maxKnowledgeResults)
	}
	g, err := env.Knowledge.Query(ctx, env.Workspace, strings.TrimSpace(in.Query), in.Type, limit)
	if err != nil {
		return "", fmt.Errorf("knowledge query failed: %v", err)
	}
	if len(g.Entities) == 0 {
		return "No matching entities in the knowledge graph.", nil
	}
	return DescribeKnowledge(g), nil
}

// DescribeKnowledge renders a graph as the text a model reads: one line
// per entity (name, type, id), then one per relation by name.
func DescribeKnowledge(g protocol.KnowledgeGraph) string {
	names := make(map[string]string, len(g.Entities))
	var b strings.Builder
	fmt.Fprintf(&b, "Entities (%d):", len(g.Entities))
	for _, e := range g.Entities {
		names[e.ID] = e.Name
		fmt.Fprintf(&b, "\n- %s (%s; mentioned %d×; id %s)", e.Name, e.Type, e.Mentions, e.ID)
		if e.ValidTo != "" {
			fmt.Fprintf(&b, " [retired %s]", e.ValidTo)
		}
	}
	if len(g.Relations) > 0 {
		fmt.Fprintf(&b, "\nRelations (%d):", len(g.Relations))
		for _, r := range g.Relations {
			fmt.Fprintf(&b, "\n- %s %s %s (confidence %.1f; id %s)", nameOr(names, r.Source), r.Type, nameOr(names, r.Target), r.Confidence, r.ID)
		}
	}
	return b.String()
}

func nameOr(names map[string]string, id string) string {
	if n, ok := names[id]; ok {
		return n
	}
	return id
}

// ---- correct_knowledge ----

type correctKnowledgeTool struct{}

func (correctKnowledgeTool) Name() string { return "correct_knowledge" }

func (correctKnowledgeTool) Description() string {
	return "Retire a wrong fact of the knowledge graph: an entity (with all its relations) or one relation, by the id " +
		"query_knowledge showed. The fact stays on record as retired, with your reason; it is no longer recalled."
}

func (correctKnowledgeTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"id":{"type":"string","description":"The id of the entity (ent-...) or relation (rel-...) to retire"},` +
		`"reason":{"type":"string","description":"Why it is wrong (kept with the retired fact)"}` +
		`},"required":["id"]}`)
}

// Available hides the tool when the turn has no knowledge graph.
func (correctKnowledgeTool) Available(env Env) bool { return env.Knowledge != nil }

// correctKnowledgeInput is correct_knowledge's arguments.
type correctKnowledgeInput struct {
	ID     string `json:"id"`
	Reason string `json:"reason,omitempty"`
}

func (in *correctKnowledgeInput) validate() error {
	if !protocol.ValidID(in.ID) {
		return errors.New("id must be an entity or relation id from query_knowledge")
	}
	if len(in.Reason) > 500 {
		return errors.New("reason is at most 500 characters")
	}
	return nil
}

func (t correctKnowledgeTool) Decode(input json.RawMessage) (Call, error) {
	return decodeCall(input, t.run)
}

func (correctKnowledgeTool) run(ctx context.Context, env Env, in *correctKnowledgeInput) (string, error) {
	if env.Knowledge == nil {
		return "", errNoKnowledge
	}
	g, err := env.Knowledge.Correct(ctx, env.Workspace, in.ID, strings.TrimSpace(in.Reason))
	if protocol.KindOf(err) == protocol.NotFound {
		return "", fmt.Errorf("no valid entity or relation has id %s", in.ID)
	}
	if err != nil {
		return "", fmt.Errorf("correcting the knowledge graph failed: %v", err)
	}
	return fmt.Sprintf("Retired %d entities and %d relations.", len(g.Entities), len(g.Relations)), nil
}
