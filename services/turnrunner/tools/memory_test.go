package tools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
)

// fakeMemory keeps memories per workspace and matches queries by word.
type fakeMemory struct {
	mu        sync.Mutex
	saved     map[string][]protocol.Memory
	lastLimit int
	fail      error
}

func (f *fakeMemory) Save(_ context.Context, ws, content string, tags []string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return "", f.fail
	}
	if f.saved == nil {
		f.saved = map[string][]protocol.Memory{}
	}
	id := fmt.Sprintf("m%d", len(f.saved[ws])+1)
	f.saved[ws] = append(f.saved[ws], protocol.Memory{ID: id, Content: content, Tags: tags, Timestamp: "2026-01-02T03:04:05Z"})
	return id, nil
}

func (f *fakeMemory) Search(_ context.Context, ws, query string, limit int) ([]protocol.Memory, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastLimit = limit
	if f.fail != nil {
		return nil, f.fail
	}
	var out []protocol.Memory
	for _, m := range f.saved[ws] {
		for _, w := range strings.Fields(strings.ToLower(query)) {
			if strings.Contains(strings.ToLower(m.Content), w) {
				out = append(out, m)
				break
			}
		}
	}
	return out, nil
}

func TestMemoryTools(t *testing.T) {
	mem := &fakeMemory{}
	env := newEnv(t)
	env.Memory = mem

	out := mustCall(t, env, "save_memory", map[string]any{"content": "  The team prefers PostgreSQL  ", "tags": []string{"db", " "}})
	if out != "Saved to memory (id m1)." {
		t.Errorf("save_memory = %q", out)
	}
	got := mem.saved["ws1"]
	if len(got) != 1 || got[0].Content != "The team prefers PostgreSQL" || !slices.Equal(got[0].Tags, []string{"db"}) {
		t.Fatalf("stored %+v, want trimmed content in workspace ws1 with tags [db]", got)
	}
	// A comma-separated string is accepted as tags too.
	mustCall(t, env, "save_memory", map[string]any{"content": "Deploys happen on Fridays", "tags": "ops, schedule"})
	if tags := mem.saved["ws1"][1].Tags; !slices.Equal(tags, []string{"ops", "schedule"}) {
		t.Errorf("tags from string = %v", tags)
	}

	out = mustCall(t, env, "search_memory", map[string]any{"query": "postgresql"})
	for _, want := range []string{"Found 1 memory:", "1. The team prefers PostgreSQL", "tags: db", "id m1"} {
		if !strings.Contains(out, want) {
			t.Errorf("search_memory output %q lacks %q", out, want)
		}
	}
	if mem.lastLimit != defaultMemoryResults {
		t.Errorf("default limit passed = %d, want %d", mem.lastLimit, defaultMemoryResults)
	}
	mustCall(t, env, "search_memory", map[string]any{"query": "x", "limit": 500})
	if mem.lastLimit != maxMemoryResults {
		t.Errorf("limit 500 passed as %d, want cap %d", mem.lastLimit, maxMemoryResults)
	}

	if out := mustCall(t, env, "search_memory", map[string]any{"query": "kubernetes"}); out != "No relevant memories found." {
		t.Errorf("no-hit search = %q", out)
	}
	if _, err := call(t, env, "save_memory", map[string]any{"content": "  "}); err == nil {
		t.Error("save_memory with blank content succeeded")
	}

	mem.fail = errors.New("bus down")
	if _, err := call(t, env, "search_memory", map[string]any{"query": "x"}); err == nil || !strings.Contains(err.Error(), "bus down") {
		t.Errorf("search_memory with failing backend: err = %v", err)
	}
	if _, err := call(t, Env{Workspace: "w"}, "save_memory", map[string]any{"content": "x"}); !errors.Is(err, errNoMemory) {
		t.Errorf("save_memory without Memory: err = %v", err)
	}
}
