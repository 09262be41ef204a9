package turnrunner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
	"github.com/waggle-os/core/services/turnrunner/autosave"
)

// busMemory is the minds kept by the session store, reached over the bus:
// a workspace's mind and the personal mind of user (on a team server, the
// turn's user; locally empty, the one personal mind). It implements
// tools.Memory.
type busMemory struct {
	s    *Service
	user string
}

// Save stores one frame in the workspace's mind and returns its id (the
// existing frame's when the content is already kept).
func (m busMemory) Save(ctx context.Context, workspace, content string, tags []string) (string, error) {
	rep, err := bus.Call(ctx, m.s.nc, protocol.SaveMemory,
		protocol.MemorySaveRequest{Workspace: workspace, Content: content, Tags: tags, User: m.user}, bus.Within(m.s.cfg.StoreTimeout))
	if err != nil {
		return "", fmt.Errorf("turnrunner: save memory in %s: %w", workspace, err)
	}
	return rep.ID, nil
}

// Search is the store's hybrid search over the workspace's and the
// personal mind, best first.
func (m busMemory) Search(ctx context.Context, workspace, query string, limit int) ([]protocol.Memory, error) {
	rep, err := bus.Call(ctx, m.s.nc, protocol.SearchMemory,
		protocol.MemorySearchRequest{Workspace: workspace, Query: query, Limit: limit, User: m.user}, bus.Within(m.s.cfg.StoreTimeout))
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

// Search returns the frames relevant to query, workspace mind first. A
// store without memory (no responder) or an unknown workspace is no
// memories, not a failure: the turn still shows that recall found nothing.
func (r recaller) Search(ctx context.Context, query string) ([]protocol.MemoryFrame, error) {
	fs, err := r.mem.recallFrames(ctx, r.workspace, query)
	if errors.Is(err, protocol.ErrUnavailable) || protocol.KindOf(err) == protocol.NotFound {
		return nil, nil
	}
	return fs, err
}

// autoSave keeps what an agent turn that did not call save_memory said
// worth keeping (autosave.Extract) and reports it in a step before done.
// Saving is one store append per fact, in parallel; the store embeds them
// in the background, so the turn waits for no model. Failures are logged,
// never the turn's.
func (t *turn) autoSave(message string, res agent.Result) {
	if slices.Contains(res.ToolsUsed, "save_memory") || !t.svc.models.AutoSaveOn(t.req.Workspace) {
		return
	}
	facts := autosave.Extract(message, res.Content)
	if len(facts) == 0 {
		return
	}
	var saved atomic.Int32
	var wg sync.WaitGroup
	for _, f := range facts {
		wg.Go(func() {
			rep, err := bus.Call(t.ctx, t.svc.nc, protocol.SaveMemory, protocol.MemorySaveRequest{
				Workspace: t.req.Workspace, User: t.req.User, Content: f.Content, Importance: f.Importance,
				Source: protocol.SourceAgentInferred, Personal: f.Personal,
			}, bus.Within(t.svc.cfg.StoreTimeout))
			switch {
			case err != nil:
				t.logger().Warn("auto-save memory", "err", err)
			case !rep.Duplicate:
				saved.Add(1)
			}
		})
	}
	wg.Wait()
	if n := int(saved.Load()); n > 0 {
		if err := t.pub.Emit(protocol.EventStep, protocol.TokenData{Content: autosave.Step(n)}); err != nil {
			t.logger().Warn("publish auto-save step", "err", err)
		}
	}
}
