package graph

import (
	"context"
	"embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/pgmigrate"
	"github.com/waggle-os/core/libs/protocol"
)

//go:embed migrations/*.sql
var migrations embed.FS

// SchemaTable is goose's version table for this package's migrations.
const SchemaTable = "waggle_schema_graph"

// migrationLockID is this package's advisory lock for migrating.
const migrationLockID int64 = 0x57616767477270 // "WaggGrp"

// Postgres keeps the graphs in PostgreSQL, shared by every store process
// of a team server: uniqueness of valid keys and links is the database's
// (partial unique indexes), so two processes extracting the same name at
// once make one entity.
type Postgres struct {
	pool *pgxpool.Pool
}

var _ Backend = (*Postgres)(nil)

// OpenPostgres migrates and returns the backend over pool (not owned).
func OpenPostgres(ctx context.Context, pool *pgxpool.Pool) (*Postgres, error) {
	if _, err := pgmigrate.Up(ctx, pool, pgmigrate.Set{FS: pgmigrate.Sub(migrations, "migrations"), Table: SchemaTable, LockID: migrationLockID}); err != nil {
		return nil, fmt.Errorf("graph: migrate: %w", err)
	}
	return &Postgres{pool: pool}, nil
}

const (
	entityCols   = `id, key, type, name, properties, mentions, valid_from, coalesce(valid_to, ''), recorded`
	relationCols = `id, source, target, type, confidence, properties, mentions, valid_from, coalesce(valid_to, ''), recorded`
)

func scanEntity(row pgx.Row) (Entity, error) {
	var e Entity
	err := row.Scan(&e.ID, &e.Key, &e.Type, &e.Name, &e.Properties, &e.Mentions, &e.ValidFrom, &e.ValidTo, &e.Recorded)
	if len(e.Properties) == 0 {
		e.Properties = nil
	}
	return e, err
}

func scanRelation(row pgx.Row) (Relation, error) {
	var r Relation
	err := row.Scan(&r.ID, &r.Source, &r.Target, &r.Type, &r.Confidence, &r.Properties, &r.Mentions, &r.ValidFrom, &r.ValidTo, &r.Recorded)
	if len(r.Properties) == 0 {
		r.Properties = nil
	}
	return r, err
}

func props(p map[string]string) map[string]string {
	if p == nil {
		return map[string]string{}
	}
	return p
}

// dedupe merges a batch's mentions of one key (the first name, a
// specific type over a generic one, properties merged) and of one link
// (the highest confidence), keeping the batch's order.
func dedupe(b Batch) ([]EntityInput, []RelationInput) {
	var es []EntityInput
	at := map[string]int{}
	for _, in := range b.Entities {
		k := Normalize(in.Name)
		i, ok := at[k]
		if !ok {
			at[k] = len(es)
			es = append(es, in)
			continue
		}
		if generic(es[i].Type) && !generic(in.Type) {
			es[i].Type = in.Type
		}
		es[i].Properties = mergeProps(es[i].Properties, in.Properties)
	}
	var rs []RelationInput
	seen := map[string]int{}
	for _, in := range b.Relations {
		k := linkKey(Normalize(in.From), Normalize(in.To), in.Type)
		if i, ok := seen[k]; ok {
			rs[i].Confidence = max(rs[i].Confidence, in.Confidence)
			continue
		}
		seen[k] = len(rs)
		rs = append(rs, in)
	}
	return es, rs
}

// Apply implements Backend.
func (p *Postgres) Apply(ctx context.Context, m Mind, b Batch, now string) (Result, error) {
	es, rs := dedupe(b)
	var res Result
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		res = Result{}
		ids := map[string]string{}
		for _, in := range es {
			var created bool
			row := tx.QueryRow(ctx, `INSERT INTO kg_entities (mind, id, key, type, name, properties, mentions, valid_from, recorded)
				VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $7)
				ON CONFLICT (mind, key) WHERE valid_to IS NULL DO UPDATE SET
					mentions = kg_entities.mentions + 1,
					type = CASE WHEN kg_entities.type = 'concept' THEN EXCLUDED.type ELSE kg_entities.type END,
					properties = EXCLUDED.properties || kg_entities.properties
				RETURNING `+entityCols+`, xmax = 0`,
				m.Key(), "ent-"+protocol.NewUUID(), Normalize(in.Name), in.Type, in.Name, props(in.Properties), now)
			var e Entity
			err := row.Scan(&e.ID, &e.Key, &e.Type, &e.Name, &e.Properties, &e.Mentions, &e.ValidFrom, &e.ValidTo, &e.Recorded, &created)
			if err != nil {
				return err
			}
			if len(e.Properties) == 0 {
				e.Properties = nil
			}
			if created {
				res.CreatedEntities++
			}
			ids[e.Key] = e.ID
			res.Entities = append(res.Entities, e)
		}
		for _, in := range rs {
			var created bool
			var r Relation
			err := tx.QueryRow(ctx, `INSERT INTO kg_relations (mind, id, source, target, type, confidence, mentions, valid_from, recorded)
				VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $7)
				ON CONFLICT (mind, source, target, type) WHERE valid_to IS NULL DO UPDATE SET
					mentions = kg_relations.mentions + 1,
					confidence = greatest(kg_relations.confidence, EXCLUDED.confidence)
				RETURNING `+relationCols+`, xmax = 0`,
				m.Key(), "rel-"+protocol.NewUUID(), ids[Normalize(in.From)], ids[Normalize(in.To)], in.Type, in.Confidence, now,
			).Scan(&r.ID, &r.Source, &r.Target, &r.Type, &r.Confidence, &r.Properties, &r.Mentions, &r.ValidFrom, &r.ValidTo, &r.Recorded, &created)
			if err != nil {
				return err
			}
			if len(r.Properties) == 0 {
				r.Properties = nil
			}
			if created {
				res.CreatedRelations++
			}
			res.Relations = append(res.Relations, r)
		}
		return nil
	})
	if err != nil {
		return Result{}, wrap("write", m, err)
	}
	return res, nil
}

// Retire implements Backend.
func (p *Postgres) Retire(ctx context.Context, m Mind, id, reason, now string) (Snapshot, error) {
	var out Snapshot
	note := map[string]string{}
	if reason != "" {
		note[reasonKey] = reason
	}
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		out = Snapshot{}
		e, err := scanEntity(tx.QueryRow(ctx, `UPDATE kg_entities SET valid_to = $3, properties = properties || $4
			WHERE mind = $1 AND id = $2 AND valid_to IS NULL RETURNING `+entityCols, m.Key(), id, now, note))
		switch {
		case err == nil:
			out.Entities = append(out.Entities, e)
			rows, err := tx.Query(ctx, `UPDATE kg_relations SET valid_to = $3
				WHERE mind = $1 AND valid_to IS NULL AND (source = $2 OR target = $2) RETURNING `+relationCols, m.Key(), id, now)
			if err != nil {
				return err
			}
			out.Relations, err = collectRelations(rows)
			return err
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		r, err := scanRelation(tx.QueryRow(ctx, `UPDATE kg_relations SET valid_to = $3, properties = properties || $4
			WHERE mind = $1 AND id = $2 AND valid_to IS NULL RETURNING `+relationCols, m.Key(), id, now, note))
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		out.Relations = append(out.Relations, r)
		return err
	})
	if err != nil {
		return Snapshot{}, wrap("retire in", m, err)
	}
	sortRelations(out.Relations)
	return out, nil
}

// Restore implements Backend.
func (p *Postgres) Restore(ctx context.Context, m Mind, id string) (Snapshot, error) {
	var out Snapshot
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		out = Snapshot{}
		e, err := scanEntity(tx.QueryRow(ctx, `SELECT `+entityCols+` FROM kg_entities WHERE mind = $1 AND id = $2 FOR UPDATE`, m.Key(), id))
		switch {
		case err == nil:
			if e.Valid() {
				return ErrNotRetired
			}
			retired := e.ValidTo
			e, err = scanEntity(tx.QueryRow(ctx, `UPDATE kg_entities SET valid_to = NULL, properties = properties - $3
				WHERE mind = $1 AND id = $2 RETURNING `+entityCols, m.Key(), id, reasonKey))
			if err != nil {
				return err
			}
			out.Entities = append(out.Entities, e)
			// The relations retired with it, whose other end is valid and
			// whose link no valid relation holds now.
			rows, err := tx.Query(ctx, `UPDATE kg_relations r SET valid_to = NULL, properties = r.properties - $4
				WHERE r.mind = $1 AND (r.source = $2 OR r.target = $2) AND r.valid_to = $3
				AND EXISTS (SELECT 1 FROM kg_entities o WHERE o.mind = $1 AND o.valid_to IS NULL
					AND o.id = CASE WHEN r.source = $2 THEN r.target ELSE r.source END)
				AND NOT EXISTS (SELECT 1 FROM kg_relations v WHERE v.mind = $1 AND v.valid_to IS NULL
					AND v.source = r.source AND v.target = r.target AND v.type = r.type)
				RETURNING `+relationCols, m.Key(), id, retired, reasonKey)
			if err != nil {
				return err
			}
			out.Relations, err = collectRelations(rows)
			return err
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		r, err := scanRelation(tx.QueryRow(ctx, `SELECT `+relationCols+` FROM kg_relations WHERE mind = $1 AND id = $2 FOR UPDATE`, m.Key(), id))
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if r.Valid() {
			return ErrNotRetired
		}
		var ends int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM kg_entities WHERE mind = $1 AND valid_to IS NULL AND id IN ($2, $3)`,
			m.Key(), r.Source, r.Target).Scan(&ends); err != nil {
			return err
		}
		if ends != 2 {
			return ErrRestoreEnds
		}
		r, err = scanRelation(tx.QueryRow(ctx, `UPDATE kg_relations SET valid_to = NULL, properties = properties - $3
			WHERE mind = $1 AND id = $2 RETURNING `+relationCols, m.Key(), id, reasonKey))
		out.Relations = append(out.Relations, r)
		return err
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" { // a valid key or link holds the place
		err = ErrRestoreClash
	}
	if err != nil {
		return Snapshot{}, wrap("restore in", m, err)
	}
	sortRelations(out.Relations)
	return out, nil
}

func collectRelations(rows pgx.Rows) ([]Relation, error) {
	defer rows.Close()
	var out []Relation
	for rows.Next() {
		r, err := scanRelation(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Graph implements Backend.
func (p *Postgres) Graph(ctx context.Context, m Mind, f Filter) (Snapshot, error) {
	valid := ` AND valid_to IS NULL`
	if f.Retired {
		valid = ""
	}
	if f.Limit > 0 {
		return p.page(ctx, m, f, valid)
	}
	var all Snapshot
	rows, err := p.pool.Query(ctx, `SELECT `+entityCols+` FROM kg_entities WHERE mind = $1`+valid, m.Key())
	if err != nil {
		return Snapshot{}, wrap("read", m, err)
	}
	for rows.Next() {
		e, err := scanEntity(rows)
		if err != nil {
			rows.Close()
			return Snapshot{}, wrap("read", m, err)
		}
		all.Entities = append(all.Entities, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Snapshot{}, wrap("read", m, err)
	}
	rows, err = p.pool.Query(ctx, `SELECT `+relationCols+` FROM kg_relations WHERE mind = $1`+valid, m.Key())
	if err != nil {
		return Snapshot{}, wrap("read", m, err)
	}
	if all.Relations, err = collectRelations(rows); err != nil {
		return Snapshot{}, wrap("read", m, err)
	}
	sortEntities(all.Entities)
	sortRelations(all.Relations)
	return narrow(all, f), nil
}

// page reads one page of a graph (f.Limit set) without reading the rest:
// the entities by the index of pages, then the strongest relations
// touching them, then (with a query) the neighbours those name — what
// narrow does over a whole graph.
func (p *Postgres) page(ctx context.Context, m Mind, f Filter, valid string) (Snapshot, error) {
	q := Normalize(f.Query)
	args := []any{m.Key()}
	where := `mind = $1` + valid
	if f.Type != "" {
		args = append(args, f.Type)
		where += fmt.Sprintf(` AND type = $%d`, len(args))
	}
	if q != "" {
		// A normalised query holds no LIKE metacharacter (Normalize keeps
		// letters, digits and . - + # & only).
		args = append(args, "%"+q+"%")
		where += fmt.Sprintf(` AND (key LIKE $%[1]d OR lower(name) LIKE $%[1]d)`, len(args))
	}
	args = append(args, f.Limit+1, max(f.Offset, 0))
	rows, err := p.pool.Query(ctx, `SELECT `+entityCols+` FROM kg_entities WHERE `+where+
		fmt.Sprintf(` ORDER BY mentions DESC, key, id LIMIT $%d OFFSET $%d`, len(args)-1, len(args)), args...)
	if err != nil {
		return Snapshot{}, wrap("read", m, err)
	}
	kept, err := collectEntities(rows)
	if err != nil {
		return Snapshot{}, wrap("read", m, err)
	}
	var out Snapshot
	if len(kept) > f.Limit {
		kept, out.More = kept[:f.Limit], true
	}
	ids := make([]string, len(kept))
	in := map[string]bool{}
	for i, e := range kept {
		ids[i], in[e.ID] = e.ID, true
	}
	ends := `source = ANY($2) AND target = ANY($2)`
	if q != "" {
		ends = `(source = ANY($2) OR target = ANY($2))`
	}
	rows, err = p.pool.Query(ctx, `SELECT `+relationCols+` FROM kg_relations WHERE mind = $1`+valid+` AND `+ends+
		` ORDER BY confidence DESC, mentions DESC, recorded, id LIMIT $3`, m.Key(), ids, f.relationCap())
	if err != nil {
		return Snapshot{}, wrap("read", m, err)
	}
	if out.Relations, err = collectRelations(rows); err != nil {
		return Snapshot{}, wrap("read", m, err)
	}
	var extra []string
	for _, r := range out.Relations {
		for _, id := range []string{r.Source, r.Target} {
			if !in[id] {
				in[id] = true
				extra = append(extra, id)
			}
		}
	}
	if len(extra) > 0 {
		rows, err = p.pool.Query(ctx, `SELECT `+entityCols+` FROM kg_entities WHERE mind = $1 AND id = ANY($2)`, m.Key(), extra)
		if err != nil {
			return Snapshot{}, wrap("read", m, err)
		}
		more, err := collectEntities(rows)
		if err != nil {
			return Snapshot{}, wrap("read", m, err)
		}
		kept = append(kept, more...)
	}
	out.Entities = kept
	sortEntities(out.Entities)
	sortRelations(out.Relations)
	return out, nil
}

// Count implements Backend.
func (p *Postgres) Count(ctx context.Context, m Mind) (int, int, error) {
	var e, r int
	err := p.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM kg_entities WHERE mind = $1 AND valid_to IS NULL),
		(SELECT count(*) FROM kg_relations WHERE mind = $1 AND valid_to IS NULL)`, m.Key()).Scan(&e, &r)
	return e, r, wrap("count", m, err)
}

// Drop implements Backend.
func (p *Postgres) Drop(ctx context.Context, m Mind) error {
	_, err := p.pool.Exec(ctx, `WITH r AS (DELETE FROM kg_relations WHERE mind = $1) DELETE FROM kg_entities WHERE mind = $1`, m.Key())
	return wrap("drop", m, err)
}

// Close implements Backend.
func (p *Postgres) Close() error { return nil }

// Related implements Backend.
func (p *Postgres) Related(ctx context.Context, m Mind, keys []string) ([]Entity, []Entity, error) {
	if len(keys) == 0 {
		return nil, nil, nil
	}
	rows, err := p.pool.Query(ctx, `SELECT `+entityCols+` FROM kg_entities WHERE mind = $1 AND valid_to IS NULL AND key = ANY($2)`, m.Key(), keys)
	if err != nil {
		return nil, nil, wrap("read", m, err)
	}
	direct, err := collectEntities(rows)
	if err != nil || len(direct) == 0 {
		return nil, nil, wrap("read", m, err)
	}
	ids := make([]string, len(direct))
	for i, e := range direct {
		ids[i] = e.ID
	}
	rows, err = p.pool.Query(ctx, `SELECT DISTINCT e.id, e.key, e.type, e.name, e.properties, e.mentions, e.valid_from, coalesce(e.valid_to, ''), e.recorded FROM kg_relations r
		JOIN kg_entities e ON e.mind = r.mind AND e.id = CASE WHEN r.source = ANY($2) THEN r.target ELSE r.source END
		WHERE r.mind = $1 AND r.valid_to IS NULL AND (r.source = ANY($2) OR r.target = ANY($2))
			AND e.valid_to IS NULL AND NOT e.id = ANY($2)`, m.Key(), ids)
	if err != nil {
		return nil, nil, wrap("read", m, err)
	}
	neighbours, err := collectEntities(rows)
	if err != nil {
		return nil, nil, wrap("read", m, err)
	}
	sortEntities(direct)
	sortEntities(neighbours)
	return direct, neighbours, nil
}

func collectEntities(rows pgx.Rows) ([]Entity, error) {
	defer rows.Close()
	var out []Entity
	for rows.Next() {
		e, err := scanEntity(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
