package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/jsonl"
	"github.com/waggle-os/core/services/sessionstore/workspaces"
)

// maxCreateAttempts bounds the ids one create tries ("x", "x-2", …).
const maxCreateAttempts = 10000

// EnsureDefault creates workspace "default" when it does not exist.
func (s *Store) EnsureDefault(ctx context.Context) error {
	return s.insertWorkspace(ctx, workspaces.DefaultDoc(s.now()), nil)
}

// WorkspaceExists reports whether workspace id exists here.
func (s *Store) WorkspaceExists(ctx context.Context, id string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM workspaces WHERE id = $1)`, id).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("pgstore: workspace exists %s: %w", id, err)
	}
	return ok, nil
}

// GetWorkspace reads a workspace's doc; workspaces.ErrNotFound when missing.
func (s *Store) GetWorkspace(ctx context.Context, id string) (workspaces.Doc, error) {
	var raw string
	err := s.pool.QueryRow(ctx, `SELECT doc FROM workspaces WHERE id = $1`, id).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, workspaces.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: get workspace %s: %w", id, err)
	}
	return decodeDoc(id, raw)
}

func decodeDoc(id, raw string) (workspaces.Doc, error) {
	var doc workspaces.Doc
	if err := json.Unmarshal([]byte(raw), &doc); err != nil || doc == nil {
		return nil, fmt.Errorf("pgstore: decode workspace %s: %v", id, err)
	}
	doc["id"], _ = json.Marshal(id)
	return doc, nil
}

// ListWorkspaces returns every workspace here, oldest first (ties by id).
func (s *Store) ListWorkspaces(ctx context.Context) ([]workspaces.Doc, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, doc FROM workspaces`)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list workspaces: %w", err)
	}
	out := []workspaces.Doc{}
	var id, raw string
	_, err = pgx.ForEachRow(rows, []any{&id, &raw}, func() error {
		doc, err := decodeDoc(id, raw)
		if err != nil {
			return err
		}
		out = append(out, doc)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: list workspaces: %w", err)
	}
	workspaces.SortDocs(out)
	return out, nil
}

// CreateWorkspace creates a workspace whose id is the slug of its name,
// skipping ids that exist here or that taken reports.
func (s *Store) CreateWorkspace(ctx context.Context, fields workspaces.Doc, taken func(string) (bool, error)) (workspaces.Doc, error) {
	if err := workspaces.Validate(fields, true); err != nil {
		return nil, err
	}
	var name string
	_ = json.Unmarshal(fields["name"], &name)
	base := workspaces.Slug(name)
	now := s.now()
	for n := 1; n <= maxCreateAttempts; n++ {
		id := workspaces.CandidateID(base, n)
		if taken != nil {
			t, err := taken(id)
			if err != nil {
				return nil, fmt.Errorf("pgstore: create workspace %s: %w", id, err)
			}
			if t {
				continue
			}
		}
		doc := workspaces.NewDoc(id, fields, now)
		var inserted bool
		if err := s.insertWorkspace(ctx, doc, &inserted); err != nil {
			return nil, err
		}
		if inserted {
			return doc, nil
		}
	}
	return nil, fmt.Errorf("pgstore: create workspace %s: no free id", base)
}

// insertWorkspace inserts doc unless its id exists; inserted (optional)
// reports which.
func (s *Store) insertWorkspace(ctx context.Context, doc workspaces.Doc, inserted *bool) error {
	raw, err := jsonl.EncodeLine(doc)
	if err != nil {
		return fmt.Errorf("pgstore: encode workspace %s: %w", doc.ID(), err)
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO workspaces (id, doc, created, team_id) VALUES ($1, $2, $3, $4)
		ON CONFLICT (id) DO NOTHING`, doc.ID(), string(raw), doc.Created(), teamID(doc))
	if err != nil {
		return fmt.Errorf("pgstore: create workspace %s: %w", doc.ID(), err)
	}
	if inserted != nil {
		*inserted = tag.RowsAffected() == 1
	}
	return nil
}

func teamID(doc workspaces.Doc) *string {
	if t := doc.Workspace().TeamID; t != "" {
		return &t
	}
	return nil
}

// UpdateWorkspace merges fields into workspace id.
func (s *Store) UpdateWorkspace(ctx context.Context, id string, fields workspaces.Doc) (workspaces.Doc, error) {
	if err := workspaces.Validate(fields, false); err != nil {
		return nil, err
	}
	var doc workspaces.Doc
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var raw string
		err := tx.QueryRow(ctx, `SELECT doc FROM workspaces WHERE id = $1 FOR UPDATE`, id).Scan(&raw)
		if errors.Is(err, pgx.ErrNoRows) {
			return workspaces.ErrNotFound
		}
		if err != nil {
			return err
		}
		if doc, err = decodeDoc(id, raw); err != nil {
			return err
		}
		workspaces.Merge(doc, fields)
		b, err := jsonl.EncodeLine(doc)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE workspaces SET doc = $2, team_id = $3 WHERE id = $1`, id, string(b), teamID(doc))
		return err
	})
	if err != nil {
		return nil, wrap(err, "update workspace %s", id)
	}
	return doc, nil
}

// DeleteWorkspace removes a workspace, its sessions and its memories in
// one transaction and returns the removed sessions' ids in name order.
func (s *Store) DeleteWorkspace(ctx context.Context, id string) ([]string, error) {
	var ids []string
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM workspaces WHERE id = $1`, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return workspaces.ErrNotFound
		}
		rows, err := tx.Query(ctx, `DELETE FROM sessions WHERE workspace = $1 RETURNING id`, id)
		if err != nil {
			return err
		}
		if ids, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM memories WHERE workspace = $1`, id)
		return err
	})
	if err != nil {
		return nil, wrap(err, "delete workspace %s", id)
	}
	slices.Sort(ids)
	return ids, nil
}

// wrap adds context to err, passing the contract's errors through as is.
func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*protocol.Error](err); ok {
		return err
	}
	return fmt.Errorf("pgstore: "+format+": %w", append(args, err)...)
}
