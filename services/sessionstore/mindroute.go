package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"

	"github.com/waggle-os/core/services/sessionstore/frames"
	"github.com/waggle-os/core/services/sessionstore/graph"
)

// A workspace's mind — its frames and its knowledge graph — lives where
// the workspace lives (as Router places its sessions): a team workspace's
// in PostgreSQL, so a team server writes no file for it; the personal
// minds (the local one and each user's) and the personal workspaces' in
// the JSONL files, so nothing personal reaches the team database. The two
// routers below send every call to the backend holding its mind.

// placement tells a team workspace's mind from a personal one.
type placement struct {
	// isTeam reports whether workspace ws lives in the team store.
	isTeam func(ctx context.Context, ws string) (bool, error)
}

// team reports whether mind m belongs to the team store.
func (p placement) team(ctx context.Context, m frames.Mind) (bool, error) {
	if m.Kind != frames.KindWorkspace {
		return false, nil
	}
	ok, err := p.isTeam(ctx, m.ID)
	if err != nil {
		return false, fmt.Errorf("sessionstore: where %s lives: %w", m.Key(), err)
	}
	return ok, nil
}

// pick returns the backend of the two that holds mind m.
func pick[B any](ctx context.Context, p placement, m frames.Mind, files, team B) (B, error) {
	isTeam, err := p.team(ctx, m)
	if err != nil {
		var none B
		return none, err
	}
	if isTeam {
		return team, nil
	}
	return files, nil
}

// graphRouter places each mind's knowledge graph.
type graphRouter struct {
	placement
	files, team graph.Backend
}

var _ graph.Backend = (*graphRouter)(nil)

func (r *graphRouter) pick(ctx context.Context, m graph.Mind) (graph.Backend, error) {
	return pick(ctx, r.placement, m, r.files, r.team)
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

func (r *graphRouter) Restore(ctx context.Context, m graph.Mind, id string) (graph.Snapshot, error) {
	be, err := r.pick(ctx, m)
	if err != nil {
		return graph.Snapshot{}, err
	}
	return be.Restore(ctx, m, id)
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

// framesRouter places each mind's frames.
type framesRouter struct {
	placement
	files frames.Backend
	team  frames.Backend
}

var _ frames.Backend = (*framesRouter)(nil)

func (r *framesRouter) pick(ctx context.Context, m frames.Mind) (frames.Backend, error) {
	return pick(ctx, r.placement, m, r.files, r.team)
}

// Version implements frames.Versioned for the minds kept in files; a
// team mind's PostgreSQL (shared by several stores) cannot tell.
func (r *framesRouter) Version(ctx context.Context, m frames.Mind) (uint64, bool) {
	be, err := r.pick(ctx, m)
	if err != nil {
		return 0, false
	}
	vb, ok := be.(frames.Versioned)
	if !ok {
		return 0, false
	}
	return vb.Version(ctx, m)
}

func (r *framesRouter) Add(ctx context.Context, m frames.Mind, f frames.Frame) (frames.Frame, bool, error) {
	be, err := r.pick(ctx, m)
	if err != nil {
		return frames.Frame{}, false, err
	}
	return be.Add(ctx, m, f)
}

func (r *framesRouter) Get(ctx context.Context, m frames.Mind, id string) (frames.Frame, error) {
	be, err := r.pick(ctx, m)
	if err != nil {
		return frames.Frame{}, err
	}
	return be.Get(ctx, m, id)
}

func (r *framesRouter) Update(ctx context.Context, m frames.Mind, id, content, importance, now string) (frames.Frame, error) {
	be, err := r.pick(ctx, m)
	if err != nil {
		return frames.Frame{}, err
	}
	return be.Update(ctx, m, id, content, importance, now)
}

func (r *framesRouter) Delete(ctx context.Context, m frames.Mind, id string) (frames.Frame, error) {
	be, err := r.pick(ctx, m)
	if err != nil {
		return frames.Frame{}, err
	}
	return be.Delete(ctx, m, id)
}

func (r *framesRouter) Access(ctx context.Context, m frames.Mind, id string) (frames.Frame, error) {
	be, err := r.pick(ctx, m)
	if err != nil {
		return frames.Frame{}, err
	}
	return be.Access(ctx, m, id)
}

func (r *framesRouter) Recent(ctx context.Context, m frames.Mind, opt frames.ListOptions) ([]frames.Frame, error) {
	be, err := r.pick(ctx, m)
	if err != nil {
		return nil, err
	}
	return be.Recent(ctx, m, opt)
}

func (r *framesRouter) Search(ctx context.Context, m frames.Mind, text string, vec []float32, model string, opt frames.ListOptions) ([]frames.Hit, error) {
	be, err := r.pick(ctx, m)
	if err != nil {
		return nil, err
	}
	return be.Search(ctx, m, text, vec, model, opt)
}

func (r *framesRouter) SetVectors(ctx context.Context, m frames.Mind, model string, vecs map[string][]float32) error {
	be, err := r.pick(ctx, m)
	if err != nil {
		return err
	}
	return be.SetVectors(ctx, m, model, vecs)
}

// Pending lists the files' pending frames first, then the team store's.
func (r *framesRouter) Pending(ctx context.Context, model string, n int) ([]frames.Pending, error) {
	out, err := r.files.Pending(ctx, model, n)
	if err != nil || len(out) >= n {
		return out, err
	}
	more, err := r.team.Pending(ctx, model, n-len(out))
	return append(out, more...), err
}

func (r *framesRouter) Count(ctx context.Context, m frames.Mind, model string) (int, int, error) {
	be, err := r.pick(ctx, m)
	if err != nil {
		return 0, 0, err
	}
	return be.Count(ctx, m, model)
}

// Drop drops the mind from both (as graphRouter.Drop).
func (r *framesRouter) Drop(ctx context.Context, m frames.Mind) error {
	return errors.Join(r.files.Drop(ctx, m), r.team.Drop(ctx, m))
}

// Minds lists the minds of both.
func (r *framesRouter) Minds(ctx context.Context) ([]frames.Mind, error) {
	a, err := r.files.Minds(ctx)
	if err != nil {
		return nil, err
	}
	b, err := r.team.Minds(ctx)
	return append(a, b...), err
}

func (r *framesRouter) SetImportance(ctx context.Context, m frames.Mind, id, importance string) (frames.Frame, error) {
	be, err := r.pick(ctx, m)
	if err != nil {
		return frames.Frame{}, err
	}
	return be.SetImportance(ctx, m, id, importance)
}

func (r *framesRouter) Close() error { return errors.Join(r.files.Close(), r.team.Close()) }

// moveTeamMinds moves the frames of team workspaces that an older version
// kept in the JSONL files into PostgreSQL (ids, times, use and vectors
// kept), then removes their files: from now on they are read from where
// their workspace lives. (Such a workspace's old knowledge.jsonl, derived
// data, is left where it is and no longer read.)
func moveTeamMinds(ctx context.Context, files *frames.JSONL, team *frames.Postgres, p placement, log *slog.Logger) error {
	minds, err := files.Minds(ctx)
	if err != nil {
		return err
	}
	for _, m := range minds {
		isTeam, err := p.team(ctx, m)
		if err != nil {
			return err
		}
		if !isTeam {
			continue
		}
		fs, err := files.Recent(ctx, m, frames.ListOptions{Limit: math.MaxInt32})
		if err != nil {
			return err
		}
		if err := team.Import(ctx, m, fs); err != nil {
			return err
		}
		if err := files.Drop(ctx, m); err != nil {
			return err
		}
		log.Info("moved a team workspace's memories from the data dir to PostgreSQL", "mind", m.Key(), "frames", len(fs))
	}
	return nil
}
