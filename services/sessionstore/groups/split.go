package groups

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/waggle-os/core/libs/protocol"
)

// split keeps each group with its owner, as the session store places
// what it keeps (docs/teams.md): a team's group (teamId set) is a row of
// PostgreSQL, a group of no team — the local owner's, or on a team server
// the operator's — is in the data dir's file. A group's team is set at
// creation and never changes, so a group never moves between them.
type split struct {
	files *fileBackend
	team  *pgBackend
	log   *slog.Logger
}

var _ backend = (*split)(nil)

// list is both sides' groups in creation order (a stable sort on
// createdAt, whose fixed-width stamps sort as text).
func (s *split) list(ctx context.Context) ([]protocol.AgentGroup, error) {
	fs, err := s.files.list(ctx)
	if err != nil {
		return nil, err
	}
	ts, err := s.team.list(ctx)
	if err != nil {
		return nil, err
	}
	gs := append(fs, ts...)
	sort.SliceStable(gs, func(i, j int) bool { return gs[i].CreatedAt < gs[j].CreatedAt })
	return gs, nil
}

func (s *split) insert(ctx context.Context, g protocol.AgentGroup) error {
	if g.TeamID != "" {
		return s.team.insert(ctx, g)
	}
	return s.files.insert(ctx, g)
}

// update and remove try PostgreSQL, then the file: an id names one group
// on one side.
func (s *split) update(ctx context.Context, id string, fn func(protocol.AgentGroup) (protocol.AgentGroup, error)) (protocol.AgentGroup, error) {
	g, err := s.team.update(ctx, id, fn)
	if errors.Is(err, ErrNotFound) {
		return s.files.update(ctx, id, fn)
	}
	return g, err
}

func (s *split) remove(ctx context.Context, id string) error {
	err := s.team.remove(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return s.files.remove(ctx, id)
	}
	return err
}

// moveTeamless moves the groups of no team an older version kept in
// PostgreSQL (it kept every group there) into the file, where each
// replaces a group of the same id (PostgreSQL held the newer copy: writes
// went there), then deletes their rows. A crash in between leaves the
// rows, and the next start writes the same groups again.
func (s *split) moveTeamless(ctx context.Context) error {
	rows, err := s.team.pool.Query(ctx, `SELECT doc FROM agent_groups WHERE coalesce(doc->>'teamId', '') = '' ORDER BY seq`)
	if err != nil {
		return fmt.Errorf("groups: list groups of no team: %w", err)
	}
	moved, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (protocol.AgentGroup, error) {
		var doc []byte
		if err := r.Scan(&doc); err != nil {
			return protocol.AgentGroup{}, err
		}
		return decode(doc)
	})
	if err != nil {
		return fmt.Errorf("groups: list groups of no team: %w", err)
	}
	if len(moved) == 0 {
		return nil
	}
	err = s.files.modify(func(gs []protocol.AgentGroup) ([]protocol.AgentGroup, error) {
		for _, g := range moved {
			if i := index(gs, g.ID); i >= 0 {
				gs[i] = g
			} else {
				gs = append(gs, g)
			}
		}
		return gs, nil
	})
	if err != nil {
		return err
	}
	ids := make([]string, len(moved))
	for i, g := range moved {
		ids[i] = g.ID
	}
	if _, err := s.team.pool.Exec(ctx, `DELETE FROM agent_groups WHERE id = ANY($1)`, ids); err != nil {
		return fmt.Errorf("groups: delete moved groups: %w", err)
	}
	s.log.Info("agent groups of no team moved out of PostgreSQL into the data dir", "groups", len(moved))
	return nil
}
