package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/userdocs"
)

// The user documents (profiles, custom personas, minds' identity and
// awareness) follow the minds' rule (mindroute.go): with PostgreSQL for
// team workspaces and JSONL files for the rest, a team's documents (its
// shared personas) and a team workspace's are in PostgreSQL, everything
// personal — the local owner's, each user's own, a personal workspace's —
// in the data dir, so nothing personal reaches the team database.

// Scopes of userdocs keys (the Key.Scope values the store uses).
const (
	docScopeTeams      = "teams"
	docScopeWorkspaces = "workspaces"
)

// docsRouter sends each document to the store holding its owner.
type docsRouter struct {
	placement
	files, team userdocs.Store
}

var _ userdocs.Store = (*docsRouter)(nil)

// docInTeamStore reports whether k's document belongs in PostgreSQL.
func (p placement) docInTeamStore(ctx context.Context, k userdocs.Key) (bool, error) {
	switch k.Scope {
	case docScopeTeams:
		return true, nil
	case docScopeWorkspaces:
		ok, err := p.isTeam(ctx, k.Owner)
		if err != nil {
			return false, fmt.Errorf("sessionstore: where workspace %s lives: %w", k.Owner, err)
		}
		return ok, nil
	}
	return false, nil
}

func (r *docsRouter) pick(ctx context.Context, k userdocs.Key) (userdocs.Store, error) {
	team, err := r.docInTeamStore(ctx, k)
	if err != nil {
		return nil, err
	}
	if team {
		return r.team, nil
	}
	return r.files, nil
}

func (r *docsRouter) Get(ctx context.Context, k userdocs.Key) ([]byte, bool, error) {
	s, err := r.pick(ctx, k)
	if err != nil {
		return nil, false, err
	}
	return s.Get(ctx, k)
}

func (r *docsRouter) Update(ctx context.Context, k userdocs.Key, fn func([]byte, bool) ([]byte, error)) error {
	s, err := r.pick(ctx, k)
	if err != nil {
		return err
	}
	return s.Update(ctx, k, fn)
}

// Delete removes a workspace's document from both stores: the workspace
// may be gone already, so where it lived is no longer known.
func (r *docsRouter) Delete(ctx context.Context, k userdocs.Key) error {
	if k.Scope == docScopeWorkspaces {
		return errors.Join(r.files.Delete(ctx, k), r.team.Delete(ctx, k))
	}
	s, err := r.pick(ctx, k)
	if err != nil {
		return err
	}
	return s.Delete(ctx, k)
}

// workspaceExists reports whether workspace id exists (in either store).
func (s *Service) workspaceExists(ctx context.Context, id string) (bool, error) {
	_, err := s.store.GetWorkspace(ctx, id)
	if protocol.KindOf(err) == protocol.NotFound {
		return false, nil
	}
	return err == nil, err
}

// personalWorkspace reports whether workspace id exists and lives in the
// data dir (not a team workspace).
func (s *Service) personalWorkspace(ctx context.Context, id string) (bool, error) {
	team, err := s.pg.WorkspaceExists(ctx, id)
	if err != nil || team {
		return false, err
	}
	return s.workspaceExists(ctx, id)
}

// movePersonalDocs moves the documents an older version kept in
// PostgreSQL although they are personal (it put every document there when
// it had a pool) into the data dir: each is written to its file, which
// it replaces (PostgreSQL held the newer copy: it was where writes went),
// then its row is deleted. A crash in between leaves the row, and the next
// start writes the same file again.
//
// A workspace's document moves only when the workspace exists: the
// documents of one deleted under an older version stay where they are
// rather than make a directory for a workspace that is gone.
func movePersonalDocs(ctx context.Context, pool *pgxpool.Pool, r *docsRouter, workspaceExists func(ctx context.Context, id string) (bool, error), log *slog.Logger) error {
	var checkErr error
	keys, err := userdocs.Keys(ctx, pool, func(k userdocs.Key) bool {
		team, err := r.docInTeamStore(ctx, k)
		if err == nil && !team && k.Scope == docScopeWorkspaces {
			var ok bool
			ok, err = workspaceExists(ctx, k.Owner)
			team = !ok
		}
		if err != nil {
			checkErr = err
			return false
		}
		return !team
	})
	if err != nil {
		return err
	}
	if checkErr != nil {
		return checkErr
	}
	for _, k := range keys {
		doc, found, err := r.team.Get(ctx, k)
		if err != nil {
			return err
		}
		if found {
			if err := r.files.Update(ctx, k, func([]byte, bool) ([]byte, error) { return doc, nil }); err != nil {
				return err
			}
		}
		if err := r.team.Delete(ctx, k); err != nil {
			return err
		}
		log.Info("personal document moved out of PostgreSQL into the data dir", "kind", k.Kind, "scope", k.Scope, "owner", k.Owner)
	}
	return nil
}
