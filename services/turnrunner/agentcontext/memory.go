package agentcontext

import (
	"context"
	"errors"
	"fmt"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

// Memory is the minds kept by the session store, reached over the bus:
// a workspace's mind and the personal mind of User (on a team server, the
// turn's user; locally empty, the one personal mind). It implements
// tools.Memory and tools.Knowledge.
type Memory struct {
	Store
	User string
}

// Save stores one frame in the workspace's mind and returns its id (the
// existing frame's when the content is already kept).
func (m Memory) Save(ctx context.Context, workspace, content string, tags []string) (string, error) {
	rep, err := bus.Call(ctx, m.Conn, protocol.SaveMemory,
		protocol.MemorySaveRequest{Workspace: workspace, Content: content, Tags: tags, User: m.User}, m.within())
	if err != nil {
		return "", fmt.Errorf("agentcontext: save memory in %s: %w", workspace, err)
	}
	return rep.ID, nil
}

// Search is the store's hybrid search over the workspace's and the
// personal mind, best first.
func (m Memory) Search(ctx context.Context, workspace, query string, limit int) ([]protocol.Memory, error) {
	rep, err := bus.Call(ctx, m.Conn, protocol.SearchMemory,
		protocol.MemorySearchRequest{Workspace: workspace, Query: query, Limit: limit, User: m.User}, m.within())
	if err != nil {
		return nil, fmt.Errorf("agentcontext: search memory in %s: %w", workspace, err)
	}
	return rep.Memories, nil
}

// Recaller is the agent's auto-recall over one workspace's memory.
type Recaller struct {
	Memory    Memory
	Workspace string
	// Loaded is the recall the turn's context was loaded with (nil:
	// none): a search for its query is answered from it.
	Loaded *Recall
}

// Recall is an auto-recall answered with the turn's context.
type Recall struct {
	Query  string
	Frames []protocol.MemoryFrame
	// Err is set when the store could not search.
	Err error
}

// errRecall is a recall the store could not answer with the context.
var errRecall = errors.New("agentcontext: recall unavailable")

// Search returns the frames relevant to query, workspace mind first. A
// store without memory (no responder) or an unknown workspace is no
// memories, not a failure: the turn still shows that recall found nothing.
func (r Recaller) Search(ctx context.Context, query string) ([]protocol.MemoryFrame, error) {
	if l := r.Loaded; l != nil && l.Query == query {
		return l.Frames, l.Err
	}
	fs, err := r.Memory.recallFrames(ctx, r.Workspace, query)
	if errors.Is(err, protocol.ErrUnavailable) || protocol.KindOf(err) == protocol.NotFound {
		return nil, nil
	}
	return fs, err
}
