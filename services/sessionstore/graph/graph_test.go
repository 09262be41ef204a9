package graph_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waggle-os/core/libs/pgtest"
	"github.com/waggle-os/core/services/sessionstore/frames"
	"github.com/waggle-os/core/services/sessionstore/graph"
)

var ctx = context.Background()

// each runs fn against every backend, each with fresh storage; open
// returns a backend over the same storage each time (a restart). The
// PostgreSQL run skips when no server can be had (libs/pgtest).
func each(t *testing.T, fn func(t *testing.T, open func() graph.Backend)) {
	t.Run("jsonl", func(t *testing.T) {
		dir := t.TempDir()
		fn(t, func() graph.Backend { return graph.NewJSONL(dir) })
	})
	t.Run("postgres", func(t *testing.T) {
		pool, err := pgxpool.New(ctx, pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		fn(t, func() graph.Backend {
			b, err := graph.OpenPostgres(ctx, pool)
			if err != nil {
				t.Fatal(err)
			}
			return b
		})
	})
}

var ws = graph.Mind{Kind: frames.KindWorkspace, ID: "ws1"}

const t0, t1, t2 = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z", "2026-01-03T00:00:00.000Z"

func apply(t *testing.T, b graph.Backend, m graph.Mind, batch graph.Batch, now string) graph.Result {
	t.Helper()
	if err := graph.Check(&batch); err != nil {
		t.Fatal(err)
	}
	res, err := b.Apply(ctx, m, batch, now)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func falcon() graph.Batch {
	return graph.Batch{
		Entities: []graph.EntityInput{
			{Name: "Ada Lovelace", Type: graph.TypePerson},
			{Name: "Project Falcon", Type: graph.TypeProject},
			{Name: "Acme Corp", Type: graph.TypeOrganisation, Properties: map[string]string{"industry": "rockets"}},
		},
		Relations: []graph.RelationInput{
			{From: "Ada Lovelace", To: "Project Falcon", Type: graph.RelLeads, Confidence: 0.9},
			{From: "Ada Lovelace", To: "Acme Corp", Type: graph.RelWorksAt, Confidence: 0.8},
		},
	}
}

func byName(s graph.Snapshot) map[string]graph.Entity {
	out := map[string]graph.Entity{}
	for _, e := range s.Entities {
		out[e.Key] = e
	}
	return out
}

func TestNormalizeMergesSpellings(t *testing.T) {
	for in, want := range map[string]string{
		"Acme": "acme", "ACME Corp.": "acme", "Acme Corporation": "acme", "  acme, inc. ": "acme",
		"The Guardian": "guardian", "Node.js": "nodejs", "Postgres": "postgresql", "Project Falcon": "project falcon",
		"Ada  Lovelace": "ada lovelace", "C++": "c++", "Corp": "corp",
	} {
		if got := graph.Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheckRefusesBadBatches(t *testing.T) {
	for name, b := range map[string]graph.Batch{
		"empty name":      {Entities: []graph.EntityInput{{Name: "  "}}},
		"dangling end":    {Entities: []graph.EntityInput{{Name: "A"}}, Relations: []graph.RelationInput{{From: "A", To: "B", Type: "knows"}}},
		"self link":       {Entities: []graph.EntityInput{{Name: "Acme"}, {Name: "ACME Corp."}}, Relations: []graph.RelationInput{{From: "Acme", To: "ACME Corp.", Type: "owns"}}},
		"bad type syntax": {Entities: []graph.EntityInput{{Name: "A"}, {Name: "B"}}, Relations: []graph.RelationInput{{From: "A", To: "B", Type: "DROP TABLE"}}},
	} {
		if err := graph.Check(&b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	b := graph.Batch{Entities: []graph.EntityInput{{Name: "Acme", Type: "Organization"}, {Name: "Zorg", Type: "alien"}}}
	if err := graph.Check(&b); err != nil || b.Entities[0].Type != graph.TypeOrganisation || b.Entities[1].Type != graph.TypeConcept {
		t.Fatalf("types not normalised: %+v %v", b.Entities, err)
	}
	// Markup in a name is cleaned in the entity and in the relation's ends
	// alike: the relation still links it (else the whole batch was lost).
	b = graph.Batch{Entities: []graph.EntityInput{{Name: "<img src=x onerror=alert(1)>"}, {Name: "Ada Lovelace"}},
		Relations: []graph.RelationInput{{From: "<img src=x onerror=alert(1)>", To: "Ada Lovelace", Type: "knows"}}}
	if err := graph.Check(&b); err != nil || b.Entities[0].Name != "<img src=x>" || b.Relations[0].From != "<img src=x>" {
		t.Fatalf("a cleaned name's relation: %+v %+v %v", b.Entities, b.Relations, err)
	}
}

func TestApplyMergesAndCounts(t *testing.T) {
	each(t, func(t *testing.T, open func() graph.Backend) {
		b := open()
		res := apply(t, b, ws, falcon(), t0)
		if res.CreatedEntities != 3 || res.CreatedRelations != 2 || len(res.Entities) != 3 || len(res.Relations) != 2 {
			t.Fatalf("first batch: %+v", res)
		}
		// The same facts in other spellings: no new entity, one more mention.
		again := graph.Batch{
			Entities:  []graph.EntityInput{{Name: "ada lovelace", Type: graph.TypeConcept}, {Name: "ACME Corporation", Type: graph.TypeConcept, Properties: map[string]string{"industry": "toys", "city": "Denver"}}},
			Relations: []graph.RelationInput{{From: "ada lovelace", To: "ACME Corporation", Type: graph.RelWorksAt, Confidence: 1}},
		}
		res = apply(t, b, ws, again, t1)
		if res.CreatedEntities != 0 || res.CreatedRelations != 0 {
			t.Fatalf("known facts made new ones: %+v", res)
		}
		n, r, err := b.Count(ctx, ws)
		if err != nil || n != 3 || r != 2 {
			t.Fatalf("count = %d, %d, %v; want 3, 2", n, r, err)
		}
		// Restart: the state is on disk.
		g, err := open().Graph(ctx, ws, graph.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		es := byName(g)
		acme := es["acme"]
		if acme.Name != "Acme Corp" || acme.Type != graph.TypeOrganisation || acme.Mentions != 2 ||
			acme.Properties["industry"] != "rockets" || acme.Properties["city"] != "Denver" {
			t.Fatalf("acme after merge: %+v", acme)
		}
		if es["ada lovelace"].Type != graph.TypePerson {
			t.Fatalf("a specific type was overwritten by a generic one: %+v", es["ada lovelace"])
		}
		for _, rel := range g.Relations {
			if rel.Type == graph.RelWorksAt && (rel.Confidence != 1 || rel.Mentions != 2 || rel.Source != es["ada lovelace"].ID || rel.Target != acme.ID) {
				t.Fatalf("works_at after merge: %+v", rel)
			}
		}
		// A generic first sighting takes the specific type seen later.
		apply(t, b, ws, graph.Batch{Entities: []graph.EntityInput{{Name: "Kestrel", Type: graph.TypeConcept}}}, t1)
		apply(t, b, ws, graph.Batch{Entities: []graph.EntityInput{{Name: "kestrel", Type: graph.TypeProject}}}, t2)
		if k := byName(mustGraph(t, b, ws, graph.Filter{Query: "kestrel"}))["kestrel"]; k.Type != graph.TypeProject {
			t.Fatalf("kestrel type = %q", k.Type)
		}
	})
}

func mustGraph(t *testing.T, b graph.Backend, m graph.Mind, f graph.Filter) graph.Snapshot {
	t.Helper()
	g, err := b.Graph(ctx, m, f)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestRetireKeepsTheFactOnRecord(t *testing.T) {
	each(t, func(t *testing.T, open func() graph.Backend) {
		b := open()
		res := apply(t, b, ws, falcon(), t0)
		var worksAt graph.Relation
		for _, r := range res.Relations {
			if r.Type == graph.RelWorksAt {
				worksAt = r
			}
		}
		// A wrong relation: retired, still on record with the reason.
		out, err := b.Retire(ctx, ws, worksAt.ID, "she left in 2025", t1)
		if err != nil || len(out.Relations) != 1 || out.Relations[0].ValidTo != t1 {
			t.Fatalf("retire relation: %+v %v", out, err)
		}
		if _, err := b.Retire(ctx, ws, worksAt.ID, "", t2); !errors.Is(err, graph.ErrNotFound) {
			t.Fatalf("retiring twice: %v, want not found", err)
		}
		if _, r, _ := b.Count(ctx, ws); r != 1 {
			t.Fatalf("relations after retiring one = %d, want 1", r)
		}
		// A wrong entity: retired with every relation it had.
		ada := byName(mustGraph(t, b, ws, graph.Filter{}))["ada lovelace"]
		out, err = b.Retire(ctx, ws, ada.ID, "", t2)
		if err != nil || len(out.Entities) != 1 || len(out.Relations) != 1 {
			t.Fatalf("retire entity: %+v %v", out, err)
		}
		b = open() // restart
		if n, r, _ := b.Count(ctx, ws); n != 2 || r != 0 {
			t.Fatalf("count after retiring ada = %d, %d; want 2, 0", n, r)
		}
		g := mustGraph(t, b, ws, graph.Filter{})
		if _, ok := byName(g)["ada lovelace"]; ok || len(g.Relations) != 0 {
			t.Fatalf("retired facts still in the graph: %+v", g)
		}
		all := mustGraph(t, b, ws, graph.Filter{Retired: true})
		if len(all.Entities) != 3 || len(all.Relations) != 2 {
			t.Fatalf("history lost: %d entities, %d relations", len(all.Entities), len(all.Relations))
		}
		for _, r := range all.Relations {
			if r.ID == worksAt.ID && (r.ValidTo != t1 || r.Properties["retiredBecause"] != "she left in 2025") {
				t.Fatalf("retired relation lost its record: %+v", r)
			}
		}
		// Named again later: a new entity, the old one stays retired.
		res = apply(t, b, ws, graph.Batch{Entities: []graph.EntityInput{{Name: "Ada Lovelace", Type: graph.TypePerson}}}, t2)
		if res.CreatedEntities != 1 || res.Entities[0].ID == ada.ID {
			t.Fatalf("a retired entity came back: %+v", res)
		}
		if _, err := b.Retire(ctx, ws, "ent-nope", "", t2); !errors.Is(err, graph.ErrNotFound) {
			t.Fatalf("unknown id: %v", err)
		}
	})
}

func TestMindsAreSeparate(t *testing.T) {
	each(t, func(t *testing.T, open func() graph.Backend) {
		b := open()
		other := graph.Mind{Kind: frames.KindWorkspace, ID: "ws2"}
		personal := graph.Mind{Kind: frames.KindPersonal}
		apply(t, b, ws, falcon(), t0)
		if n, r, _ := b.Count(ctx, other); n != 0 || r != 0 {
			t.Fatalf("another workspace sees %d entities", n)
		}
		if g := mustGraph(t, b, personal, graph.Filter{}); len(g.Entities) != 0 {
			t.Fatalf("personal mind sees %+v", g)
		}
		ada := byName(mustGraph(t, b, ws, graph.Filter{}))["ada lovelace"]
		if _, err := b.Retire(ctx, other, ada.ID, "", t1); !errors.Is(err, graph.ErrNotFound) {
			t.Fatalf("retired through another mind: %v", err)
		}
		if err := b.Drop(ctx, ws); err != nil {
			t.Fatal(err)
		}
		if n, _, _ := open().Count(ctx, ws); n != 0 {
			t.Fatalf("dropped mind keeps %d entities", n)
		}
	})
}

func TestFilterFindsNeighbours(t *testing.T) {
	each(t, func(t *testing.T, open func() graph.Backend) {
		b := open()
		apply(t, b, ws, falcon(), t0)
		apply(t, b, ws, graph.Batch{Entities: []graph.EntityInput{{Name: "Grace Hopper", Type: graph.TypePerson}}}, t1)
		g := mustGraph(t, b, ws, graph.Filter{Query: "falcon"})
		es := byName(g)
		if len(g.Entities) != 2 || es["project falcon"].ID == "" || es["ada lovelace"].ID == "" || len(g.Relations) != 1 || g.Relations[0].Type != graph.RelLeads {
			t.Fatalf("query falcon: %+v", g)
		}
		g = mustGraph(t, b, ws, graph.Filter{Type: graph.TypePerson})
		if len(g.Entities) != 2 || len(g.Relations) != 0 {
			t.Fatalf("people: %+v", g)
		}
		g = mustGraph(t, b, ws, graph.Filter{Limit: 1})
		if len(g.Entities) != 1 {
			t.Fatalf("limit 1: %+v", g)
		}
	})
}

func TestRelatedByKeys(t *testing.T) {
	each(t, func(t *testing.T, open func() graph.Backend) {
		b := open()
		apply(t, b, ws, falcon(), t0)
		apply(t, b, ws, graph.Batch{Entities: []graph.EntityInput{{Name: "Grace Hopper", Type: graph.TypePerson}}}, t1)
		keys := graph.Keys("Who works at ACME Corp. these days?")
		direct, neighbours, err := b.Related(ctx, ws, keys)
		if err != nil || len(direct) != 1 || direct[0].Key != "acme" || len(neighbours) != 1 || neighbours[0].Key != "ada lovelace" {
			t.Fatalf("related(%v) = %+v, %+v, %v", keys, direct, neighbours, err)
		}
		if d, n, err := b.Related(ctx, ws, graph.Keys("nothing known here")); err != nil || len(d) != 0 || len(n) != 0 {
			t.Fatalf("unrelated text: %v %v %v", d, n, err)
		}
	})
}

// Restoring undoes a retirement: an entity comes back in the shape it had
// (the relations retired with it, not one retired before), without its
// reason; a restore that would make two valid facts of one name or link,
// or a relation to a retired entity, is refused.
func TestRestoreUndoesARetirement(t *testing.T) {
	each(t, func(t *testing.T, open func() graph.Backend) {
		b := open()
		res := apply(t, b, ws, falcon(), t0)
		es := byName(graph.Snapshot{Entities: res.Entities})
		ada, acme := es["ada lovelace"], es["acme"]
		var worksAt, leads graph.Relation
		for _, r := range res.Relations {
			switch r.Type {
			case graph.RelWorksAt:
				worksAt = r
			case graph.RelLeads:
				leads = r
			}
		}
		if _, err := b.Restore(ctx, ws, ada.ID); !errors.Is(err, graph.ErrNotRetired) {
			t.Fatalf("restoring a valid entity: %v", err)
		}
		if _, err := b.Retire(ctx, ws, worksAt.ID, "wrong", t1); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Retire(ctx, ws, ada.ID, "not her", t2); err != nil {
			t.Fatal(err)
		}
		// The relation needs its entity back first.
		if _, err := b.Restore(ctx, ws, worksAt.ID); !errors.Is(err, graph.ErrRestoreEnds) {
			t.Fatalf("restoring a relation of a retired entity: %v", err)
		}
		out, err := b.Restore(ctx, ws, ada.ID)
		if err != nil || len(out.Entities) != 1 || len(out.Relations) != 1 || out.Relations[0].ID != leads.ID {
			t.Fatalf("restore ada = %+v %v; want her and leads (works_at was retired before)", out, err)
		}
		b = open() // restart
		g := mustGraph(t, b, ws, graph.Filter{})
		back := byName(g)["ada lovelace"]
		if back.ID != ada.ID || !back.Valid() || back.Properties["retiredBecause"] != "" || len(g.Relations) != 1 {
			t.Fatalf("after restoring ada: %+v", g)
		}
		out, err = b.Restore(ctx, ws, worksAt.ID)
		if err != nil || len(out.Relations) != 1 || out.Relations[0].Properties["retiredBecause"] != "" {
			t.Fatalf("restore works_at = %+v %v", out, err)
		}
		if n, r, _ := b.Count(ctx, ws); n != 3 || r != 2 {
			t.Fatalf("count after restoring = %d, %d; want 3, 2", n, r)
		}
		// Named again while retired: the new one holds the name.
		if _, err := b.Retire(ctx, ws, acme.ID, "", t2); err != nil {
			t.Fatal(err)
		}
		apply(t, b, ws, graph.Batch{Entities: []graph.EntityInput{{Name: "ACME Corporation", Type: graph.TypeOrganisation}}}, t2)
		if _, err := b.Restore(ctx, ws, acme.ID); !errors.Is(err, graph.ErrRestoreClash) {
			t.Fatalf("restoring over a valid namesake: %v", err)
		}
		if _, err := b.Restore(ctx, graph.Mind{Kind: frames.KindPersonal}, ada.ID); !errors.Is(err, graph.ErrNotFound) {
			t.Fatalf("restored through another mind: %v", err)
		}
	})
}

// A large graph is read a page at a time: pages of the most mentioned
// entities neither overlap nor skip, say whether more follow, and carry a
// bounded number of relations.
func TestGraphPages(t *testing.T) {
	each(t, func(t *testing.T, open func() graph.Backend) {
		b := open()
		var batch graph.Batch
		for i := range 30 {
			batch.Entities = append(batch.Entities, graph.EntityInput{Name: fmt.Sprintf("Entity%02d", i), Type: graph.TypeConcept})
			for j := range i { // a dense graph: every pair linked
				if len(batch.Relations) < graph.MaxBatch {
					batch.Relations = append(batch.Relations, graph.RelationInput{From: fmt.Sprintf("Entity%02d", j), To: fmt.Sprintf("Entity%02d", i), Type: graph.RelMentionedWith, Confidence: 0.3})
				}
			}
		}
		apply(t, b, ws, batch, t0)
		// Entity29 is the most mentioned: first on the first page.
		apply(t, b, ws, graph.Batch{Entities: []graph.EntityInput{{Name: "Entity29"}}}, t1)
		seen := map[string]bool{}
		for page, off := 0, 0; ; page, off = page+1, off+12 {
			g := mustGraph(t, b, ws, graph.Filter{Limit: 12, Offset: off})
			if page == 0 && !slices.ContainsFunc(g.Entities, func(e graph.Entity) bool { return e.Key == "entity29" }) {
				t.Errorf("the most mentioned entity is not on the first page: %v", g.Entities)
			}
			if len(g.Relations) > graph.RelationsPerEntity*12 {
				t.Errorf("page %d carries %d relations", page, len(g.Relations))
			}
			for _, e := range g.Entities {
				if seen[e.ID] {
					t.Errorf("page %d repeats %s", page, e.Name)
				}
				seen[e.ID] = true
			}
			if want := off+12 < 30; g.More != want {
				t.Errorf("page %d: more = %v, want %v", page, g.More, want)
			}
			if !g.More {
				break
			}
		}
		if len(seen) != 30 {
			t.Errorf("pages held %d entities, want 30", len(seen))
		}
		// With a query, the neighbours come along, bounded by the cap.
		g := mustGraph(t, b, ws, graph.Filter{Query: "entity00", Limit: 1})
		if len(g.Relations) == 0 || len(g.Relations) > graph.RelationsPerEntity || len(g.Entities) != len(g.Relations)+1 {
			t.Errorf("query page: %d entities, %d relations", len(g.Entities), len(g.Relations))
		}
	})
}
