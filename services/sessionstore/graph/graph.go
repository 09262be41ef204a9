// Package graph keeps each mind's knowledge graph: typed entities and the
// typed relations between them, with validity (a wrong fact is retired,
// never deleted), stored in JSONL files or PostgreSQL behind one Backend
// that both pass the same conformance suite. See docs/memory.md.
package graph

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/frames"
)

// Mind names one mind: the graph is kept per mind, as the frames are.
type Mind = frames.Mind

// Entity types. An extractor that cannot tell uses TypeConcept.
const (
	TypePerson       = "person"
	TypeOrganisation = "organisation"
	TypeProject      = "project"
	TypeTechnology   = "technology"
	TypePlace        = "place"
	TypeConcept      = "concept"
	TypeEvent        = "event"
	TypeDocument     = "document"
)

// Types lists the entity types.
var Types = []string{TypePerson, TypeOrganisation, TypeProject, TypeTechnology, TypePlace, TypeConcept, TypeEvent, TypeDocument}

// Relation types the extractors produce. Others are allowed (a model may
// name its own), as lower_snake_case.
const (
	RelMentionedWith = "mentioned_with" // co-occurrence in one text
	RelWorksAt       = "works_at"
	RelLeads         = "leads"
	RelDependsOn     = "depends_on"
	RelUses          = "uses"
	RelPartOf        = "part_of"
	RelLocatedIn     = "located_in"
)

// Bounds on what a batch may carry.
const (
	MaxNameLen    = 120
	MaxProperties = 16
	MaxPropLen    = 500
	MaxBatch      = 64
)

// Entity is one thing the mind knows of.
type Entity struct {
	ID   string
	Type string
	// Name is the first spelling seen; Key its normalised form (Normalize),
	// which identifies the entity among the mind's valid ones.
	Name       string
	Key        string
	Properties map[string]string
	// Mentions counts the extractions and saves that named it.
	Mentions int
	// ValidFrom and ValidTo bound when the fact held (protocol timestamps;
	// ValidTo empty while it holds). Recorded is when it was stored.
	ValidFrom, ValidTo, Recorded string
}

// Valid reports whether the entity has not been retired.
func (e Entity) Valid() bool { return e.ValidTo == "" }

// Relation is one typed, directed link between two entities.
type Relation struct {
	ID             string
	Source, Target string // entity ids
	Type           string
	// Confidence is in (0, 1]: 1 for a stated fact, lower for inferred
	// ones (co-occurrence).
	Confidence                   float64
	Properties                   map[string]string
	Mentions                     int
	ValidFrom, ValidTo, Recorded string
}

// Valid reports whether the relation has not been retired.
func (r Relation) Valid() bool { return r.ValidTo == "" }

// EntityInput is an entity an extractor found, by name.
type EntityInput struct {
	Name       string
	Type       string
	Properties map[string]string
}

// RelationInput is a relation an extractor found, between entities named
// in the same batch.
type RelationInput struct {
	From, To   string // names, as in EntityInput
	Type       string
	Confidence float64
}

// Batch is what one extraction adds to a mind.
type Batch struct {
	Entities  []EntityInput
	Relations []RelationInput
}

// Result is what a batch changed.
type Result struct {
	// Entities and Relations are the batch's, as stored now.
	Entities  []Entity
	Relations []Relation
	// Created counts the entities and relations that are new.
	CreatedEntities, CreatedRelations int
}

// Snapshot is a mind's graph.
type Snapshot struct {
	Entities  []Entity // by key (normalised name)
	Relations []Relation
	// More: the filter's Limit left matching entities out (the next page
	// starts at Offset+Limit).
	More bool
}

// Filter narrows a snapshot.
type Filter struct {
	// Query keeps entities whose key or name contains its normalised form
	// and the relations between kept entities and their neighbours
	// (empty: every entity).
	Query string
	// Type keeps entities of one type (empty: all).
	Type string
	// Retired includes retired entities and relations.
	Retired bool
	// Limit bounds the entities (0: no bound); the most mentioned first
	// (then by key), from the Offset-th on. The relations are bounded too:
	// at most RelationsPerEntity×Limit, the most confident first.
	Limit, Offset int
}

// RelationsPerEntity bounds a page's relations per entity of its Limit.
const RelationsPerEntity = 4

// relationCap is the most relations a page of f carries (0: no bound).
func (f Filter) relationCap() int { return RelationsPerEntity * f.Limit }

// pageOrder orders entities for paging: the most mentioned first, then by
// key and id (a total order, so pages neither overlap nor skip).
func pageOrder(a, b Entity) int {
	if a.Mentions != b.Mentions {
		return b.Mentions - a.Mentions
	}
	if c := strings.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// strongest keeps the n most confident (then most mentioned) relations,
// in recorded order; n 0 keeps all.
func strongest(rs []Relation, n int) []Relation {
	if n <= 0 || len(rs) <= n {
		return rs
	}
	slices.SortStableFunc(rs, func(a, b Relation) int {
		if a.Confidence != b.Confidence {
			if a.Confidence > b.Confidence {
				return -1
			}
			return 1
		}
		return b.Mentions - a.Mentions
	})
	rs = rs[:n]
	sortRelations(rs)
	return rs
}

// Backend stores the graphs. Implementations: JSONL (files) and Postgres;
// both pass the conformance suite in graph_test.go. Batches reach a
// Backend checked (Check) with keys set.
type Backend interface {
	// Apply adds a batch: an entity whose key a valid entity already has
	// is that entity (one more mention; a generic type becomes the
	// batch's specific one; new properties are added); a relation already
	// valid between the same entities with the same type is that relation
	// (one more mention; the higher confidence).
	Apply(ctx context.Context, m Mind, b Batch, now string) (Result, error)
	// Retire ends the validity of an entity (and of its valid relations)
	// or of a relation, by id, at now. ErrNotFound for an unknown id or
	// one already retired.
	Retire(ctx context.Context, m Mind, id, reason, now string) (Snapshot, error)
	// Restore undoes a retirement, by id: a relation becomes valid again
	// (ErrRestoreEnds while one of its entities is retired), an entity
	// too with the relations retired with it (the same valid_to) whose
	// other end is valid — the shape it had. The reason it kept goes.
	// ErrNotFound for an unknown id, ErrNotRetired for a valid one,
	// ErrRestoreClash when a valid entity has its name (or a valid
	// relation its link) now.
	Restore(ctx context.Context, m Mind, id string) (Snapshot, error)
	// Graph reads the mind's graph.
	Graph(ctx context.Context, m Mind, f Filter) (Snapshot, error)
	// Count counts the valid entities and relations.
	Count(ctx context.Context, m Mind) (entities, relations int, err error)
	// Related finds the valid entities whose key is one of keys (direct)
	// and the valid entities a valid relation links them to (neighbours),
	// without reading the whole graph.
	Related(ctx context.Context, m Mind, keys []string) (direct, neighbours []Entity, err error)
	// Drop removes a mind's graph (its workspace was deleted).
	Drop(ctx context.Context, m Mind) error
	// Close releases the backend.
	Close() error
}

// ErrNotFound is the API's 404 for an unknown entity or relation.
var ErrNotFound = protocol.Errorf(protocol.NotFound, "No such entity or relation")

// Restore's refusals (409).
var (
	ErrNotRetired   = protocol.Errorf(protocol.Conflict, "This entity or relation is not retired")
	ErrRestoreClash = protocol.Errorf(protocol.Conflict, "A valid entity has this name now (or a valid relation this link): retire it first")
	ErrRestoreEnds  = protocol.Errorf(protocol.Conflict, "An entity of this relation is retired: restore it first")
)

// reasonKey is the property that keeps why a fact was retired.
const reasonKey = "retiredBecause"

// unnote drops the retirement's reason from a copy of p.
func unnote(p map[string]string) map[string]string {
	if _, ok := p[reasonKey]; !ok {
		return p
	}
	cp := make(map[string]string, len(p))
	for k, v := range p {
		if k != reasonKey {
			cp[k] = v
		}
	}
	if len(cp) == 0 {
		return nil
	}
	return cp
}

// corporate suffixes dropped from a name's key: "ACME Corp." is "acme".
var corporate = map[string]bool{
	"inc": true, "incorporated": true, "corp": true, "corporation": true, "co": true, "company": true,
	"ltd": true, "limited": true, "llc": true, "plc": true, "gmbh": true, "ag": true, "sa": true,
	"bv": true, "nv": true, "srl": true, "doo": true, "group": true, "holdings": true,
}

// aliases map common short names onto one key.
var aliases = map[string]string{
	"postgres": "postgresql", "pg": "postgresql", "js": "javascript", "ts": "typescript",
	"k8s": "kubernetes", "nyc": "new york city", "node": "nodejs", "node.js": "nodejs",
	"react.js": "react", "reactjs": "react", "vue.js": "vue", "vuejs": "vue", "golang": "go",
	"mongo": "mongodb", "py": "python",
}

var spaces = regexp.MustCompile(`\s+`)

// Normalize is a name's key: lower case, punctuation at the ends and
// between words dropped, a leading "the" and corporate suffixes removed,
// known aliases merged. "Acme", "ACME Corp." and "Acme Corporation" are
// all "acme".
func Normalize(name string) string {
	s := strings.ToLower(strings.TrimSpace(name))
	if a, ok := aliases[s]; ok {
		return a
	}
	// Commas, quotes and brackets separate; dots inside a word (node.js)
	// stay, trailing ones go.
	s = strings.Map(func(r rune) rune {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '.', r == '-', r == '+', r == '#', r == '&':
			return r
		}
		return ' '
	}, s)
	words := strings.Fields(s)
	for i, w := range words {
		words[i] = strings.Trim(w, ".-")
	}
	words = slices.DeleteFunc(words, func(w string) bool { return w == "" })
	if len(words) > 1 && words[0] == "the" {
		words = words[1:]
	}
	for len(words) > 1 && corporate[strings.ReplaceAll(words[len(words)-1], ".", "")] {
		words = words[:len(words)-1]
	}
	key := spaces.ReplaceAllString(strings.Join(words, " "), " ")
	if a, ok := aliases[key]; ok {
		return a
	}
	return key
}

var relType = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)

// Check validates and trims a batch in place: names and types present and
// bounded, relation ends named by the batch. Unknown entity types become
// concept (an extractor's guess is not worth refusing a batch for).
func Check(b *Batch) error {
	if len(b.Entities) > MaxBatch || len(b.Relations) > MaxBatch {
		return protocol.Errorf(protocol.Invalid, "at most %d entities and %d relations at a time", MaxBatch, MaxBatch)
	}
	names := map[string]bool{}
	for i := range b.Entities {
		e := &b.Entities[i]
		e.Name = strings.TrimSpace(frames.Sanitise(e.Name))
		if e.Name == "" || len(e.Name) > MaxNameLen || Normalize(e.Name) == "" {
			return protocol.Errorf(protocol.Invalid, "an entity name must have 1 to %d characters", MaxNameLen)
		}
		e.Type = strings.ToLower(strings.TrimSpace(e.Type))
		if e.Type == "organization" {
			e.Type = TypeOrganisation
		}
		if !slices.Contains(Types, e.Type) {
			e.Type = TypeConcept
		}
		if len(e.Properties) > MaxProperties {
			return protocol.Errorf(protocol.Invalid, "at most %d properties per entity", MaxProperties)
		}
		for k, v := range e.Properties {
			if k == "" || len(k) > 40 || len(v) > MaxPropLen {
				return protocol.Errorf(protocol.Invalid, "property names have 1 to 40 characters, values at most %d", MaxPropLen)
			}
		}
		names[Normalize(e.Name)] = true
	}
	for i := range b.Relations {
		r := &b.Relations[i]
		r.Type = strings.ToLower(strings.TrimSpace(r.Type))
		if !relType.MatchString(r.Type) {
			return protocol.Errorf(protocol.Invalid, "invalid relation type %q", r.Type)
		}
		// The ends name entities as the batch wrote them: cleaned the same
		// way, so a name that lost an event attribute still links.
		r.From, r.To = strings.TrimSpace(frames.Sanitise(r.From)), strings.TrimSpace(frames.Sanitise(r.To))
		from, to := Normalize(r.From), Normalize(r.To)
		if !names[from] || !names[to] {
			return protocol.Errorf(protocol.Invalid, "a relation's ends must be entities of the same batch")
		}
		if from == to {
			return protocol.Errorf(protocol.Invalid, "a relation links two different entities")
		}
		if r.Confidence <= 0 || r.Confidence > 1 {
			r.Confidence = 1
		}
	}
	return nil
}

// generic types give way to a specific one when an entity is seen again.
func generic(t string) bool { return t == TypeConcept || t == "" }

// merge adds the properties of in that e lacks.
func mergeProps(dst, in map[string]string) map[string]string {
	if len(in) == 0 {
		return dst
	}
	out := make(map[string]string, len(dst)+len(in))
	for k, v := range in {
		out[k] = v
	}
	for k, v := range dst { // the first value seen stays
		out[k] = v
	}
	return out
}

// matches reports whether an entity passes f (Query and Type only).
func (f Filter) matches(e Entity, q string) bool {
	if f.Type != "" && e.Type != f.Type {
		return false
	}
	if q == "" {
		return true
	}
	return strings.Contains(e.Key, q) || strings.Contains(strings.ToLower(e.Name), q)
}

// narrow applies f to a whole graph: the entities matching it (the most
// mentioned first, up to Limit), the relations touching them and the
// entities at their other ends. Retired items are expected filtered out
// already when f.Retired is false.
func narrow(all Snapshot, f Filter) Snapshot {
	q := Normalize(f.Query)
	var kept []Entity
	for _, e := range all.Entities {
		if f.matches(e, q) {
			kept = append(kept, e)
		}
	}
	if q == "" && f.Type == "" && f.Limit <= 0 && f.Offset <= 0 {
		return all
	}
	more := false
	if f.Limit > 0 || f.Offset > 0 {
		slices.SortFunc(kept, pageOrder)
		kept = kept[min(max(f.Offset, 0), len(kept)):]
		if f.Limit > 0 && len(kept) > f.Limit {
			kept, more = kept[:f.Limit], true
		}
	}
	ids := map[string]bool{}
	for _, e := range kept {
		ids[e.ID] = true
	}
	// Relations touching the page (with a query: leading to a neighbour
	// too; else between its entities), the strongest up to the cap; then
	// the neighbours those name.
	var rels []Relation
	for _, r := range all.Relations {
		if (q != "" && (ids[r.Source] || ids[r.Target])) || (ids[r.Source] && ids[r.Target]) {
			rels = append(rels, r)
		}
	}
	rels = strongest(rels, f.relationCap())
	if q != "" {
		extra := map[string]bool{}
		for _, r := range rels {
			extra[r.Source], extra[r.Target] = true, true
		}
		for _, e := range all.Entities {
			if extra[e.ID] && !ids[e.ID] {
				kept = append(kept, e)
				ids[e.ID] = true
			}
		}
	}
	sortEntities(kept)
	return Snapshot{Entities: kept, Relations: rels, More: more}
}

// sortEntities orders entities by key (their normalised name: no
// allocation per comparison on a large graph), then id.
func sortEntities(es []Entity) {
	slices.SortFunc(es, func(a, b Entity) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

func wrap(op string, m Mind, err error) error {
	if err == nil || isNotFound(err) {
		return err
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return err
	}
	return fmt.Errorf("graph: %s %s: %w", op, m.Key(), err)
}

// sortRelations orders relations as they were recorded.
func sortRelations(rs []Relation) {
	slices.SortFunc(rs, func(a, b Relation) int {
		if c := strings.Compare(a.Recorded, b.Recorded); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// maxGram is the longest name, in words, Keys looks for in a text.
const maxGram = 4

// Keys lists the keys a text may name: the Normalize of every run of one
// to four of its words, each once.
func Keys(text string) []string {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '.' && r != '-' && r != '+' && r != '#' && r != '&'
	})
	seen := map[string]bool{}
	var out []string
	for i := range words {
		for n := 1; n <= maxGram && i+n <= len(words); n++ {
			k := Normalize(strings.Join(words[i:i+n], " "))
			if k != "" && !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out
}
