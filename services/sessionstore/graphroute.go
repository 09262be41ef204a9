package sessionstore

import (
	"context"
	"errors"

	"github.com/waggle-os/core/services/sessionstore/frames"
	"github.com/waggle-os/core/services/sessionstore/graph"
)

// graphRouter keeps a workspace's knowledge graph where the workspace
// lives (as Router does its sessions): a team workspace's in PostgreSQL,
// so a team server writes no file for it; the personal minds and personal
// workspaces' in JSONL files.
type graphRouter struct {
	files, team graph.Backend
	isTeam      func(ctx context.Context, ws string) (bool, error)
}

var _ graph.Backend = (*graphRouter)(nil)

func (r *graphRouter) pick(ctx context.Context, m graph.Mind) (graph.Backend, error) {
	if m.Kind != frames.KindWorkspace {
		return r.files, nil
	}
	team, err := r.isTeam(ctx, m.ID)
	if err != nil {
		return nil, err
	}
	if team {
		return r.team, nil
	}
	return r.files, nil
}

func (r *graphRouter) Apply(ctx context.Context, m graph.Mind, b graph.Batch, now string) (graph.Result, error) {
	be, err := r.pick(ctx, m)
	if err != nil {
		return graph.Result{}, err
	}
	return be.Apply(ctx, m, b, now)
}

func (r *graphRouter) Retire(ctx context.Context, m graph.Mind, id, reason, now string) (graph.Snapshot, error) {
	be, err := r.pick(ctx, m)
	if err != nil {
		return graph.Snapshot{}, err
	}
	return be.Retire(ctx, m, id, reason, now)
}

func (r *graphRouter) Graph(ctx context.Context, m graph.Mind, f graph.Filter) (graph.Snapshot, error) {
	be, err := r.pick(ctx, m)
	if err != nil {
		return graph.Snapshot{}, err
	}
	return be.Graph(ctx, m, f)
}

func (r *graphRouter) Count(ctx context.Context, m graph.Mind) (int, int, error) {
	be, err := r.pick(ctx, m)
	if err != nil {
		return 0, 0, err
	}
	return be.Count(ctx, m)
}

func (r *graphRouter) Related(ctx context.Context, m graph.Mind, keys []string) ([]graph.Entity, []graph.Entity, error) {
	be, err := r.pick(ctx, m)
	if err != nil {
		return nil, nil, err
	}
	return be.Related(ctx, m, keys)
}

// Drop drops the mind from both: the workspace is gone, so where it lived
// may no longer be known.
func (r *graphRouter) Drop(ctx context.Context, m graph.Mind) error {
	return errors.Join(r.files.Drop(ctx, m), r.team.Drop(ctx, m))
}

func (r *graphRouter) Close() error { return errors.Join(r.files.Close(), r.team.Close()) }
