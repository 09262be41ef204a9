package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Memory search result bounds.
const (
	defaultMemoryResults = 5
	maxMemoryResults     = 20
)

var errNoMemory = errors.New("memory is not available in this session")

// ---- save_memory ----

type saveMemoryTool struct{}

func (saveMemoryTool) Name() string { return "save_memory" }

func (saveMemoryTool) Description() string {
	return "Save a fact, decision or preference to this workspace's long-term memory so it can be recalled in " +
		"later conversations. Write content as a self-contained statement; tags are optional keywords."
}

func (saveMemoryTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"content":{"type":"string","description":"What to remember, as a self-contained statement"},` +
		`"tags":{"type":"array","items":{"type":"string"},"description":"Optional keywords"}` +
		`},"required":["content"]}`)
}

// Available hides the tool when the turn has no memory backend.
func (saveMemoryTool) Available(env Env) bool { return env.Memory != nil }

// saveMemoryInput is save_memory's arguments.
type saveMemoryInput struct {
	Content string  `json:"content"`
	Tags    tagsArg `json:"tags,omitempty"`
}

func (in *saveMemoryInput) validate() error {
	if strings.TrimSpace(in.Content) == "" {
		return errors.New("content is required")
	}
	return nil
}

func (t saveMemoryTool) Decode(input json.RawMessage) (Call, error) { return decodeCall(input, t.run) }

func (saveMemoryTool) run(ctx context.Context, env Env, in *saveMemoryInput) (string, error) {
	content := strings.TrimSpace(in.Content)
	if env.Memory == nil {
		return "", errNoMemory
	}
	id, err := env.Memory.Save(ctx, env.Workspace, content, []string(in.Tags))
	if err != nil {
		return "", fmt.Errorf("saving to memory failed: %v", err)
	}
	return fmt.Sprintf("Saved to memory (id %s).", id), nil
}

// ---- search_memory ----

type searchMemoryTool struct{}

func (searchMemoryTool) Name() string { return "search_memory" }

func (searchMemoryTool) Description() string {
	return fmt.Sprintf("Search this workspace's long-term memory for facts, decisions and preferences saved "+
		"earlier. Returns the most relevant memories, best first (limit: default %d, at most %d).",
		defaultMemoryResults, maxMemoryResults)
}

func (searchMemoryTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"query":{"type":"string","description":"What to look for (keywords or a question)"},` +
		`"limit":{"type":"integer","minimum":1,"maximum":20,"description":"Maximum number of memories to return"}` +
		`},"required":["query"]}`)
}

// Available hides the tool when the turn has no memory backend.
func (searchMemoryTool) Available(env Env) bool { return env.Memory != nil }

// searchMemoryInput is search_memory's arguments.
type searchMemoryInput struct {
	Query string  `json:"query"`
	Limit *intArg `json:"limit,omitempty"`
}

func (in *searchMemoryInput) validate() error {
	if strings.TrimSpace(in.Query) == "" {
		return errors.New("query is required")
	}
	return nil
}

func (t searchMemoryTool) Decode(input json.RawMessage) (Call, error) {
	return decodeCall(input, t.run)
}

func (searchMemoryTool) run(ctx context.Context, env Env, in *searchMemoryInput) (string, error) {
	query := strings.TrimSpace(in.Query)
	limit := defaultMemoryResults
	if in.Limit != nil && *in.Limit > 0 {
		limit = min(int(*in.Limit), maxMemoryResults)
	}
	if env.Memory == nil {
		return "", errNoMemory
	}
	mems, err := env.Memory.Search(ctx, env.Workspace, query, limit)
	if err != nil {
		return "", fmt.Errorf("memory search failed: %v", err)
	}
	if len(mems) > limit {
		mems = mems[:limit]
	}
	if len(mems) == 0 {
		return "No relevant memories found.", nil
	}
	var b strings.Builder
	if len(mems) == 1 {
		b.WriteString("Found 1 memory:\n")
	} else {
		fmt.Fprintf(&b, "Found %d memories:\n", len(mems))
	}
	for i, m := range mems {
		fmt.Fprintf(&b, "\n%d. %s", i+1, strings.TrimSpace(m.Content))
		var meta []string
		if len(m.Tags) > 0 {
			meta = append(meta, "tags: "+strings.Join(m.Tags, ", "))
		}
		if m.Timestamp != "" {
			meta = append(meta, "saved "+m.Timestamp)
		}
		if m.ID != "" {
			meta = append(meta, "id "+m.ID)
		}
		if len(meta) > 0 {
			fmt.Fprintf(&b, "\n   (%s)", strings.Join(meta, "; "))
		}
	}
	return b.String(), nil
}
