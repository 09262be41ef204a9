package frames

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/pgmigrate"
	"github.com/waggle-os/core/services/sessionstore/mindindex"
)

//go:embed migrations/*.sql
var migrations embed.FS

// SchemaTable is goose's version table for this package's migrations.
const SchemaTable = "waggle_schema_frames"

// migrationLockID is this package's advisory lock for migrating.
const migrationLockID int64 = 0x57616767467261 // "WaggFra"

// Postgres keeps minds in PostgreSQL: keyword ranking by its full-text
// search (ts_rank_cd over an english tsvector), vectors in a real[]
// column ranked in process. Each process caches a mind's vectors in a
// mindindex and refreshes the cache from rows whose seq moved, so store
// processes sharing the database see each other's writes.
type Postgres struct {
	pool *pgxpool.Pool

	mu    sync.Mutex
	cache map[string]*pgVectors
}

type pgVectors struct {
	mu    sync.Mutex
	model string
	seq   int64
	count int
	index *mindindex.Index
}

var _ Backend = (*Postgres)(nil)

// OpenPostgres migrates and returns the backend over pool (not owned).
func OpenPostgres(ctx context.Context, pool *pgxpool.Pool) (*Postgres, error) {
	if _, err := pgmigrate.Up(ctx, pool, pgmigrate.Set{FS: pgmigrate.Sub(migrations, "migrations"), Table: SchemaTable, LockID: migrationLockID}); err != nil {
		return nil, fmt.Errorf("frames: migrate: %w", err)
	}
	return &Postgres{pool: pool, cache: map[string]*pgVectors{}}, nil
}

const pgColumns = `id, content, tags, importance, source, created, updated, access_count, vector, coalesce(vec_model, '')`

func scanFrame(row pgx.Row) (Frame, error) {
	var f Frame
	err := row.Scan(&f.ID, &f.Content, &f.Tags, &f.Importance, &f.Source, &f.Created, &f.Updated, &f.AccessCount, &f.Vector, &f.VectorModel)
	if errors.Is(err, pgx.ErrNoRows) {
		return Frame{}, ErrNotFound
	}
	return f, err
}

func collect(rows pgx.Rows, err error) ([]Frame, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Frame
	for rows.Next() {
		f, err := scanFrame(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// Add implements Backend.
func (p *Postgres) Add(ctx context.Context, m Mind, f Frame) (Frame, bool, error) {
	tag, err := p.pool.Exec(ctx, `INSERT INTO memory_frames
		(mind, id, seq, content, tags, importance, source, created, created_ms, updated, search)
		VALUES ($1, $2, nextval('memory_frames_seq'), $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (mind, md5(content)) DO NOTHING`,
		m.Key(), f.ID, f.Content, f.Tags, f.Importance, f.Source, f.Created, createdMillis(f.Created), f.Updated, indexText(f))
	if err != nil {
		return Frame{}, false, wrap("add to", m, err)
	}
	if tag.RowsAffected() == 1 {
		return f, false, nil
	}
	old, err := scanFrame(p.pool.QueryRow(ctx, `UPDATE memory_frames SET access_count = access_count + 1
		WHERE mind = $1 AND md5(content) = md5($2) AND content = $2 RETURNING `+pgColumns, m.Key(), f.Content))
	if err != nil {
		return Frame{}, false, wrap("add to", m, err)
	}
	return old, true, nil
}

// Import stores frames of mind m as they are — ids, times, use and
// vectors kept — skipping any whose id or content the mind already holds.
// It moves a mind from the JSONL files into PostgreSQL (a team workspace's
// mind written by an older version to the data dir).
func (p *Postgres) Import(ctx context.Context, m Mind, fs []Frame) error {
	b := &pgx.Batch{}
	for _, f := range fs {
		var model *string
		if f.Vector != nil && f.VectorModel != "" {
			model = &f.VectorModel
		}
		b.Queue(`INSERT INTO memory_frames
			(mind, id, seq, content, tags, importance, source, created, created_ms, updated, access_count, search, vector, vec_model)
			VALUES ($1, $2, nextval('memory_frames_seq'), $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
			ON CONFLICT DO NOTHING`,
			m.Key(), f.ID, f.Content, f.Tags, f.Importance, f.Source, f.Created, createdMillis(f.Created), f.Updated,
			f.AccessCount, indexText(f), vectorOrNil(f, model), model)
	}
	if err := p.pool.SendBatch(ctx, b).Close(); err != nil {
		return wrap("import into", m, err)
	}
	return nil
}

func vectorOrNil(f Frame, model *string) []float32 {
	if model == nil {
		return nil
	}
	return f.Vector
}

// Get implements Backend.
func (p *Postgres) Get(ctx context.Context, m Mind, id string) (Frame, error) {
	f, err := scanFrame(p.pool.QueryRow(ctx, `SELECT `+pgColumns+` FROM memory_frames WHERE mind = $1 AND id = $2`, m.Key(), id))
	return f, wrap("get from", m, err)
}

// Update implements Backend.
func (p *Postgres) Update(ctx context.Context, m Mind, id, content, importance, now string) (Frame, error) {
	f, err := scanFrame(p.pool.QueryRow(ctx, `UPDATE memory_frames SET
			seq = nextval('memory_frames_seq'),
			vector = CASE WHEN content = $3 THEN vector END,
			vec_model = CASE WHEN content = $3 THEN vec_model END,
			content = $3,
			search = $3 || coalesce(E'\n' || array_to_string(tags, E'\n'), ''),
			importance = coalesce(nullif($4, ''), importance),
			updated = $5
		WHERE mind = $1 AND id = $2 RETURNING `+pgColumns, m.Key(), id, content, importance, now))
	return f, wrap("update in", m, err)
}

// Delete implements Backend.
func (p *Postgres) Delete(ctx context.Context, m Mind, id string) (Frame, error) {
	f, err := scanFrame(p.pool.QueryRow(ctx, `DELETE FROM memory_frames WHERE mind = $1 AND id = $2 RETURNING `+pgColumns, m.Key(), id))
	return f, wrap("delete from", m, err)
}

// Access implements Backend.
func (p *Postgres) Access(ctx context.Context, m Mind, id string) (Frame, error) {
	f, err := scanFrame(p.pool.QueryRow(ctx, `UPDATE memory_frames SET access_count = access_count + 1
		WHERE mind = $1 AND id = $2 RETURNING `+pgColumns, m.Key(), id))
	return f, wrap("count access in", m, err)
}

// Recent implements Backend.
func (p *Postgres) Recent(ctx context.Context, m Mind, opt ListOptions) ([]Frame, error) {
	fs, err := collect(p.pool.Query(ctx, `SELECT `+pgColumns+` FROM memory_frames
		WHERE mind = $1 AND ($2::bigint = 0 OR created_ms >= $2) AND ($3::bigint = 0 OR created_ms <= $3)
		ORDER BY created DESC, id DESC LIMIT $4`, m.Key(), opt.Since, opt.Until, opt.Limit))
	return fs, wrap("list", m, err)
}

// Search implements Backend.
func (p *Postgres) Search(ctx context.Context, m Mind, text string, vec []float32, model string, opt ListOptions) ([]Hit, error) {
	depth := max(mindindex.Depth, opt.Limit)
	var keyword []string
	if terms := mindindex.Tokens(text); len(terms) > 0 {
		// Terms are runs of letters and digits: no tsquery operators.
		rows, err := p.pool.Query(ctx, `SELECT id FROM memory_frames, to_tsquery('english', $2) q
			WHERE mind = $1 AND tsv @@ q AND ($3::bigint = 0 OR created_ms >= $3) AND ($4::bigint = 0 OR created_ms <= $4)
			ORDER BY ts_rank_cd(tsv, q) DESC, created DESC LIMIT $5`,
			m.Key(), strings.Join(terms, " | "), opt.Since, opt.Until, depth)
		if err != nil {
			return nil, wrap("search", m, err)
		}
		keyword, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, wrap("search", m, err)
		}
	}
	var vector []string
	if vec != nil && model != "" {
		idx, err := p.vectors(ctx, m, model)
		if err != nil {
			return nil, err
		}
		vector = mindindex.IDs(idx.Search(mindindex.Query{Vector: vec, Limit: depth, Since: opt.Since, Until: opt.Until}))
	}
	scores := mindindex.Fuse(keyword, vector)
	if len(scores) == 0 {
		return nil, nil
	}
	ids := make([]string, 0, len(scores))
	for id := range scores {
		ids = append(ids, id)
	}
	fs, err := collect(p.pool.Query(ctx, `SELECT `+pgColumns+` FROM memory_frames WHERE mind = $1 AND id = ANY($2)`, m.Key(), ids))
	if err != nil {
		return nil, wrap("search", m, err)
	}
	out := make([]Hit, 0, len(fs))
	for _, f := range fs {
		out = append(out, Hit{Frame: f, Score: scores[f.ID]})
	}
	slices.SortFunc(out, func(a, b Hit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return strings.Compare(b.Frame.Created, a.Frame.Created)
	})
	return out[:min(opt.Limit, len(out))], nil
}

// vectors returns the mind's vector index for model, refreshed from the
// rows written since it was last read.
func (p *Postgres) vectors(ctx context.Context, m Mind, model string) (*mindindex.Index, error) {
	p.mu.Lock()
	c := p.cache[m.Key()]
	if c == nil {
		c = &pgVectors{}
		p.cache[m.Key()] = c
	}
	p.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	var seq int64
	var count int
	if err := p.pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0), count(*) FROM memory_frames WHERE mind = $1`, m.Key()).Scan(&seq, &count); err != nil {
		return nil, wrap("read vectors of", m, err)
	}
	if c.index != nil && c.model == model && c.seq == seq && c.count == count {
		return c.index, nil
	}
	// Changed rows carry a new seq; deleted rows show as a count that
	// does not add up, and then the mind is read again.
	for range 2 {
		from := c.seq
		if c.index == nil || c.model != model || seq < c.seq {
			c.index, c.model, from = mindindex.New(), model, 0
		}
		rows, err := p.pool.Query(ctx, `SELECT id, created, vector, coalesce(vec_model, '') FROM memory_frames
			WHERE mind = $1 AND seq > $2`, m.Key(), from)
		if err != nil {
			return nil, wrap("read vectors of", m, err)
		}
		var id, created, vm string
		var v []float32
		_, err = pgx.ForEachRow(rows, []any{&id, &created, &v, &vm}, func() error {
			if vm != model {
				v = nil
			}
			c.index.Put(id, "", createdMillis(created), v)
			return nil
		})
		if err != nil {
			return nil, wrap("read vectors of", m, err)
		}
		c.seq, c.count = seq, count
		if c.index.Len() == count {
			break
		}
		c.index = nil
	}
	if c.index == nil {
		return mindindex.New(), nil
	}
	return c.index, nil
}

// SetVectors implements Backend.
func (p *Postgres) SetVectors(ctx context.Context, m Mind, model string, vecs map[string][]float32) error {
	b := &pgx.Batch{}
	for id, v := range vecs {
		b.Queue(`UPDATE memory_frames SET vector = $3, vec_model = $4, seq = nextval('memory_frames_seq') WHERE mind = $1 AND id = $2`,
			m.Key(), id, v, model)
	}
	if err := p.pool.SendBatch(ctx, b).Close(); err != nil {
		return wrap("store vectors of", m, err)
	}
	return nil
}

// Pending implements Backend.
func (p *Postgres) Pending(ctx context.Context, model string, n int) ([]Pending, error) {
	rows, err := p.pool.Query(ctx, `SELECT mind, id, content FROM memory_frames
		WHERE vector IS NULL OR vec_model IS DISTINCT FROM $1 ORDER BY seq LIMIT $2`, model, n)
	if err != nil {
		return nil, fmt.Errorf("frames: pending: %w", err)
	}
	var out []Pending
	var key, id, content string
	_, err = pgx.ForEachRow(rows, []any{&key, &id, &content}, func() error {
		kind, mid, _ := strings.Cut(key, ":")
		out = append(out, Pending{Mind: Mind{Kind: kind, ID: mid}, ID: id, Content: content})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("frames: pending: %w", err)
	}
	return out, nil
}

// Count implements Backend.
func (p *Postgres) Count(ctx context.Context, m Mind, model string) (int, int, error) {
	var n, e int
	err := p.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE vector IS NOT NULL AND vec_model = $2)
		FROM memory_frames WHERE mind = $1`, m.Key(), model).Scan(&n, &e)
	return n, e, wrap("count", m, err)
}

// Drop implements Backend.
func (p *Postgres) Drop(ctx context.Context, m Mind) error {
	if _, err := p.pool.Exec(ctx, `DELETE FROM memory_frames WHERE mind = $1`, m.Key()); err != nil {
		return wrap("drop", m, err)
	}
	p.mu.Lock()
	delete(p.cache, m.Key())
	p.mu.Unlock()
	return nil
}

// Close implements Backend (the pool is the caller's).
func (p *Postgres) Close() error { return nil }

// Minds implements Backend.
func (p *Postgres) Minds(ctx context.Context) ([]Mind, error) {
	rows, err := p.pool.Query(ctx, `SELECT DISTINCT mind FROM memory_frames`)
	if err != nil {
		return nil, fmt.Errorf("frames: list minds: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("frames: list minds: %w", err)
	}
	var out []Mind
	for _, k := range keys {
		if m, ok := ParseMindKey(k); ok {
			out = append(out, m)
		}
	}
	return out, nil
}

// SetImportance implements Backend.
func (p *Postgres) SetImportance(ctx context.Context, m Mind, id, importance string) (Frame, error) {
	f, err := scanFrame(p.pool.QueryRow(ctx, `UPDATE memory_frames SET importance = $3, seq = nextval('memory_frames_seq')
		WHERE mind = $1 AND id = $2 RETURNING `+pgColumns, m.Key(), id, importance))
	return f, wrap("set importance in", m, err)
}
