package turnrunner

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

// recallLimit is how many memories auto-recall asks for.
const recallLimit = 5

// busMemory is a workspace memory kept by the session store, reached over
// the bus. It implements tools.Memory.
type busMemory struct{ s *Service }

// Save stores one memory and returns its id.
func (m busMemory) Save(ctx context.Context, workspace, content string, tags []string) (string, error) {
	rep, err := turnRequest[protocol.MemorySaveReply](ctx, m.s, protocol.SubjStoreMemorySave,
		protocol.MemorySaveRequest{Workspace: workspace, Content: content, Tags: tags})
	if err != nil {
		return "", fmt.Errorf("turnrunner: save memory in %s: %w", workspace, err)
	}
	return rep.ID, nil
}

// Search finds a workspace's memories matching query, best first.
func (m busMemory) Search(ctx context.Context, workspace, query string, limit int) ([]protocol.Memory, error) {
	rep, err := turnRequest[protocol.MemorySearchReply](ctx, m.s, protocol.SubjStoreMemorySearch,
		protocol.MemorySearchRequest{Workspace: workspace, Query: query, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("turnrunner: search memory in %s: %w", workspace, err)
	}
	return rep.Memories, nil
}

// recaller is the agent's auto-recall over one workspace's memory.
type recaller struct {
	mem       busMemory
	workspace string
}

// Search returns the contents of the memories relevant to query. A store
// without memory (no responder) or an unknown workspace is no memories,
// not a failure: the turn still shows that recall found nothing.
func (r recaller) Search(ctx context.Context, query string) ([]string, error) {
	mems, err := r.mem.Search(ctx, r.workspace, query, recallLimit)
	if errors.Is(err, protocol.ErrUnavailable) || protocol.StatusOf(err) == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(mems))
	for _, m := range mems {
		if m.Content != "" {
			out = append(out, m.Content)
		}
	}
	return out, nil
}

// turnRequest is a bus request bounded by StoreTimeout that also ends when
// ctx (the turn) is cancelled — for work done on the turn's behalf, unlike
// storeRequest, which persists even after a cancel.
func turnRequest[Rep any](ctx context.Context, s *Service, subject string, req any) (Rep, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
	defer cancel()
	return bus.Request[Rep](ctx, s.nc, subject, req)
}
