package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/memory"
)

// SaveMemory stores a memory in a workspace (which need not exist).
func (s *Store) SaveMemory(ctx context.Context, req protocol.MemorySaveRequest) (protocol.Memory, error) {
	m, err := memory.NewMemory(req.Workspace, req.Content, req.Tags, s.now())
	if err != nil {
		return protocol.Memory{}, err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO memories (workspace, id, content, tags, ts, search) VALUES ($1, $2, $3, $4, $5, $6)`,
		req.Workspace, m.ID, m.Content, m.Tags, m.Timestamp, memory.SearchText(m))
	if err != nil {
		return protocol.Memory{}, fmt.Errorf("pgstore: save memory in %s: %w", req.Workspace, err)
	}
	return m, nil
}

// SearchMemories ranks a workspace's memories as the memory package does:
// one point per distinct query term found in the lower-cased content and
// tags, best score first, most recent first among equals; a query without
// terms returns the most recent memories.
func (s *Store) SearchMemories(ctx context.Context, req protocol.MemorySearchRequest) ([]protocol.Memory, error) {
	if !protocol.ValidID(req.Workspace) {
		return nil, protocol.Errorf(400, "invalid workspace id")
	}
	limit := memory.Limit(req.Limit)
	terms := memory.Terms(req.Query)
	var rows pgx.Rows
	var err error
	if len(terms) == 0 {
		rows, err = s.pool.Query(ctx, `SELECT id, content, tags, ts FROM memories WHERE workspace = $1 ORDER BY seq DESC LIMIT $2`,
			req.Workspace, limit)
	} else {
		// Terms are runs of letters and digits: no LIKE metacharacters.
		// One LIKE per term (OR-ed) lets the trigram index answer each.
		args := []any{req.Workspace, limit}
		var score, match []string
		for _, t := range terms {
			args = append(args, "%"+t+"%")
			p := "$" + strconv.Itoa(len(args))
			score = append(score, "(search LIKE "+p+")::int")
			match = append(match, "search LIKE "+p)
		}
		q := `SELECT id, content, tags, ts FROM memories WHERE workspace = $1 AND (` + strings.Join(match, " OR ") + `)
			ORDER BY ` + strings.Join(score, " + ") + ` DESC, seq DESC LIMIT $2`
		rows, err = s.pool.Query(ctx, q, args...)
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: search memories of %s: %w", req.Workspace, err)
	}
	out := []protocol.Memory{}
	var m protocol.Memory
	_, err = pgx.ForEachRow(rows, []any{&m.ID, &m.Content, &m.Tags, &m.Timestamp}, func() error {
		out = append(out, m)
		m.Tags = nil
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: search memories of %s: %w", req.Workspace, err)
	}
	return out, nil
}
