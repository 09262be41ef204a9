package graph

import (
	"bufio"
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/frames"
	"github.com/waggle-os/core/services/sessionstore/jsonl"
)

// File is the name of a mind's graph file, beside its frames
// (frames.File): <data-dir>/workspaces/<ws>/File, <data-dir>/personal/File,
// <data-dir>/users/<user>/File.
const File = "knowledge.jsonl"

// Record kinds.
const (
	recEntity   = "entity"
	recRelation = "relation"
)

// record is one line of a graph file: the full state of one entity or
// relation. The file is a log; the last record of an id wins.
type record struct {
	Kind       string            `json:"kind"`
	ID         string            `json:"id"`
	Type       string            `json:"type"`
	Name       string            `json:"name,omitempty"`
	Key        string            `json:"key,omitempty"`
	Source     string            `json:"source,omitempty"`
	Target     string            `json:"target,omitempty"`
	Confidence float64           `json:"confidence,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
	Mentions   int               `json:"mentions,omitempty"`
	ValidFrom  string            `json:"validFrom"`
	ValidTo    string            `json:"validTo,omitempty"`
	Recorded   string            `json:"recorded"`
}

func entityRecord(e Entity) record {
	return record{Kind: recEntity, ID: e.ID, Type: e.Type, Name: e.Name, Key: e.Key, Properties: e.Properties,
		Mentions: e.Mentions, ValidFrom: e.ValidFrom, ValidTo: e.ValidTo, Recorded: e.Recorded}
}

func relationRecord(r Relation) record {
	return record{Kind: recRelation, ID: r.ID, Type: r.Type, Source: r.Source, Target: r.Target, Confidence: r.Confidence,
		Properties: r.Properties, Mentions: r.Mentions, ValidFrom: r.ValidFrom, ValidTo: r.ValidTo, Recorded: r.Recorded}
}

// JSONL keeps each mind's graph in one append-only file, fsynced per
// batch, and in memory once loaded. It is the only writer of its files.
type JSONL struct {
	dataDir string

	mu    sync.Mutex
	minds map[string]*fileGraph
}

type fileGraph struct {
	path string

	mu        sync.Mutex
	loaded    bool
	entities  map[string]*Entity
	relations map[string]*Relation
	byKey     map[string]string // key of a valid entity → id
	byLink    map[string]string // source|target|type of a valid relation → id
	// links lists, per entity id, the ids of the relations that ever
	// touched it (validity is checked when read).
	links map[string][]string
}

var _ Backend = (*JSONL)(nil)

// NewJSONL returns a backend rooted at dataDir.
func NewJSONL(dataDir string) *JSONL {
	return &JSONL{dataDir: dataDir, minds: map[string]*fileGraph{}}
}

func (j *JSONL) path(m Mind) string {
	switch m.Kind {
	case frames.KindWorkspace:
		return filepath.Join(j.dataDir, "workspaces", m.ID, File)
	case frames.KindUser:
		return filepath.Join(j.dataDir, "users", m.ID, File)
	}
	return filepath.Join(j.dataDir, "personal", File)
}

// graph returns the mind's graph, loaded and locked; the caller unlocks.
func (j *JSONL) graph(m Mind) (*fileGraph, error) {
	j.mu.Lock()
	g := j.minds[m.Key()]
	if g == nil {
		g = &fileGraph{path: j.path(m)}
		j.minds[m.Key()] = g
	}
	j.mu.Unlock()
	g.mu.Lock()
	if err := g.load(); err != nil {
		g.mu.Unlock()
		return nil, wrap("open", m, err)
	}
	return g, nil
}

func linkKey(source, target, typ string) string { return source + "|" + target + "|" + typ }

func (g *fileGraph) load() error {
	if g.loaded {
		return nil
	}
	g.entities, g.relations, g.byKey, g.byLink = map[string]*Entity{}, map[string]*Relation{}, map[string]string{}, map[string]string{}
	g.links = map[string][]string{}
	f, err := os.Open(g.path)
	if errors.Is(err, fs.ErrNotExist) {
		g.loaded = true
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var r record
		// A torn last line (crash mid-append) is skipped.
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.ID == "" {
			continue
		}
		g.apply(r)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	g.loaded = true
	return nil
}

// apply replays one record.
func (g *fileGraph) apply(r record) {
	switch r.Kind {
	case recEntity:
		if old := g.entities[r.ID]; old != nil && g.byKey[old.Key] == r.ID {
			delete(g.byKey, old.Key)
		}
		e := &Entity{ID: r.ID, Type: r.Type, Name: r.Name, Key: r.Key, Properties: r.Properties, Mentions: r.Mentions,
			ValidFrom: r.ValidFrom, ValidTo: r.ValidTo, Recorded: r.Recorded}
		g.entities[r.ID] = e
		if e.Valid() {
			g.byKey[e.Key] = e.ID
		}
	case recRelation:
		rel := &Relation{ID: r.ID, Source: r.Source, Target: r.Target, Type: r.Type, Confidence: r.Confidence,
			Properties: r.Properties, Mentions: r.Mentions, ValidFrom: r.ValidFrom, ValidTo: r.ValidTo, Recorded: r.Recorded}
		lk := linkKey(rel.Source, rel.Target, rel.Type)
		if g.byLink[lk] == r.ID {
			delete(g.byLink, lk)
		}
		if g.relations[r.ID] == nil {
			g.links[rel.Source] = append(g.links[rel.Source], rel.ID)
			g.links[rel.Target] = append(g.links[rel.Target], rel.ID)
		}
		g.relations[r.ID] = rel
		if rel.Valid() {
			g.byLink[lk] = rel.ID
		}
	}
}

// write appends records with one write and one fsync, then applies them.
func (g *fileGraph) write(rs []record) error {
	if len(rs) == 0 {
		return nil
	}
	var buf bytes.Buffer
	for _, r := range rs {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	if err := jsonl.AppendFile(g.path, buf.Bytes()); err != nil {
		g.loaded = false // read the file again: it may hold part of a line
		return err
	}
	for _, r := range rs {
		g.apply(r)
	}
	return nil
}

// Apply implements Backend.
func (j *JSONL) Apply(_ context.Context, m Mind, b Batch, now string) (Result, error) {
	g, err := j.graph(m)
	if err != nil {
		return Result{}, err
	}
	defer g.mu.Unlock()
	var res Result
	var rs []record
	staged := map[string]*Entity{} // key → entity as this batch leaves it
	for _, in := range b.Entities {
		key := Normalize(in.Name)
		e := staged[key]
		if e == nil {
			if id, ok := g.byKey[key]; ok {
				cp := *g.entities[id]
				e = &cp
			}
		}
		if e == nil {
			e = &Entity{ID: "ent-" + protocol.NewUUID(), Type: in.Type, Name: in.Name, Key: key, Properties: in.Properties,
				Mentions: 1, ValidFrom: now, Recorded: now}
			res.CreatedEntities++
		} else {
			if staged[key] == nil {
				e.Mentions++
			}
			if generic(e.Type) && !generic(in.Type) {
				e.Type = in.Type
			}
			e.Properties = mergeProps(e.Properties, in.Properties)
		}
		staged[key] = e
	}
	for _, e := range staged {
		rs = append(rs, entityRecord(*e))
	}
	var rels []*Relation
	for _, in := range b.Relations {
		src, dst := staged[Normalize(in.From)], staged[Normalize(in.To)]
		lk := linkKey(src.ID, dst.ID, in.Type)
		var rel *Relation
		for _, r := range rels {
			if linkKey(r.Source, r.Target, r.Type) == lk {
				rel = r
			}
		}
		if rel != nil {
			rel.Confidence = max(rel.Confidence, in.Confidence)
			continue
		}
		if id, ok := g.byLink[lk]; ok {
			cp := *g.relations[id]
			cp.Mentions++
			cp.Confidence = max(cp.Confidence, in.Confidence)
			rel = &cp
		} else {
			rel = &Relation{ID: "rel-" + protocol.NewUUID(), Source: src.ID, Target: dst.ID, Type: in.Type,
				Confidence: in.Confidence, Mentions: 1, ValidFrom: now, Recorded: now}
			res.CreatedRelations++
		}
		rels = append(rels, rel)
	}
	for _, r := range rels {
		rs = append(rs, relationRecord(*r))
	}
	if err := g.write(rs); err != nil {
		return Result{}, wrap("write", m, err)
	}
	for _, in := range b.Entities {
		if e := staged[Normalize(in.Name)]; e != nil {
			res.Entities = append(res.Entities, *g.entities[e.ID])
			delete(staged, e.Key)
		}
	}
	for _, r := range rels {
		res.Relations = append(res.Relations, *g.relations[r.ID])
	}
	return res, nil
}

// Retire implements Backend.
func (j *JSONL) Retire(_ context.Context, m Mind, id, reason, now string) (Snapshot, error) {
	g, err := j.graph(m)
	if err != nil {
		return Snapshot{}, err
	}
	defer g.mu.Unlock()
	var rs []record
	var out Snapshot
	note := func(p map[string]string) map[string]string {
		if reason == "" {
			return p
		}
		cp := make(map[string]string, len(p)+1)
		for k, v := range p {
			cp[k] = v
		}
		cp[reasonKey] = reason
		return cp
	}
	if e := g.entities[id]; e != nil && e.Valid() {
		cp := *e
		cp.ValidTo, cp.Properties = now, note(cp.Properties)
		rs = append(rs, entityRecord(cp))
		out.Entities = append(out.Entities, cp)
		for _, r := range g.relations {
			if r.Valid() && (r.Source == id || r.Target == id) {
				rc := *r
				rc.ValidTo = now
				rs = append(rs, relationRecord(rc))
				out.Relations = append(out.Relations, rc)
			}
		}
	} else if r := g.relations[id]; r != nil && r.Valid() {
		rc := *r
		rc.ValidTo, rc.Properties = now, note(rc.Properties)
		rs = append(rs, relationRecord(rc))
		out.Relations = append(out.Relations, rc)
	} else {
		return Snapshot{}, ErrNotFound
	}
	if err := g.write(rs); err != nil {
		return Snapshot{}, wrap("retire in", m, err)
	}
	sortRelations(out.Relations)
	return out, nil
}

// Restore implements Backend.
func (j *JSONL) Restore(_ context.Context, m Mind, id string) (Snapshot, error) {
	g, err := j.graph(m)
	if err != nil {
		return Snapshot{}, err
	}
	defer g.mu.Unlock()
	var out Snapshot
	if e := g.entities[id]; e != nil {
		if e.Valid() {
			return Snapshot{}, ErrNotRetired
		}
		if _, taken := g.byKey[e.Key]; taken {
			return Snapshot{}, ErrRestoreClash
		}
		cp := *e
		cp.ValidTo, cp.Properties = "", unnote(cp.Properties)
		out.Entities = append(out.Entities, cp)
		seen := map[string]bool{}
		for _, rid := range g.links[id] {
			r := g.relations[rid]
			if r.Valid() || r.ValidTo != e.ValidTo || seen[rid] {
				continue
			}
			seen[rid] = true
			other := r.Source
			if other == id {
				other = r.Target
			}
			if o := g.entities[other]; o == nil || !o.Valid() {
				continue
			}
			if _, taken := g.byLink[linkKey(r.Source, r.Target, r.Type)]; taken {
				continue
			}
			rc := *r
			rc.ValidTo, rc.Properties = "", unnote(rc.Properties)
			out.Relations = append(out.Relations, rc)
		}
	} else if r := g.relations[id]; r != nil {
		if r.Valid() {
			return Snapshot{}, ErrNotRetired
		}
		for _, end := range []string{r.Source, r.Target} {
			if e := g.entities[end]; e == nil || !e.Valid() {
				return Snapshot{}, ErrRestoreEnds
			}
		}
		if _, taken := g.byLink[linkKey(r.Source, r.Target, r.Type)]; taken {
			return Snapshot{}, ErrRestoreClash
		}
		rc := *r
		rc.ValidTo, rc.Properties = "", unnote(rc.Properties)
		out.Relations = append(out.Relations, rc)
	} else {
		return Snapshot{}, ErrNotFound
	}
	var rs []record
	for _, e := range out.Entities {
		rs = append(rs, entityRecord(e))
	}
	for _, r := range out.Relations {
		rs = append(rs, relationRecord(r))
	}
	if err := g.write(rs); err != nil {
		return Snapshot{}, wrap("restore in", m, err)
	}
	sortRelations(out.Relations)
	return out, nil
}

// Graph implements Backend.
func (j *JSONL) Graph(_ context.Context, m Mind, f Filter) (Snapshot, error) {
	g, err := j.graph(m)
	if err != nil {
		return Snapshot{}, err
	}
	defer g.mu.Unlock()
	if f.Limit > 0 {
		return g.page(f), nil
	}
	var all Snapshot
	for _, e := range g.entities {
		if f.Retired || e.Valid() {
			all.Entities = append(all.Entities, *e)
		}
	}
	for _, r := range g.relations {
		if f.Retired || r.Valid() {
			all.Relations = append(all.Relations, *r)
		}
	}
	sortEntities(all.Entities)
	sortRelations(all.Relations)
	return narrow(all, f), nil
}

// page is one page of the graph (f.Limit set), what narrow makes of the
// whole graph, without copying or sorting the whole: the first
// Offset+Limit matching entities by a bounded heap, then the relations of
// the page's entities by their adjacency lists.
func (g *fileGraph) page(f Filter) Snapshot {
	q := Normalize(f.Query)
	n := max(f.Offset, 0) + f.Limit
	h := &pageHeap{}
	matched := 0
	for _, e := range g.entities {
		if (!f.Retired && !e.Valid()) || !f.matches(*e, q) {
			continue
		}
		matched++
		if h.Len() < n {
			heap.Push(h, e)
		} else if pageOrder(*e, *h.es[0]) < 0 {
			h.es[0] = e
			heap.Fix(h, 0)
		}
	}
	slices.SortFunc(h.es, func(a, b *Entity) int { return pageOrder(*a, *b) })
	var out Snapshot
	out.More = matched > n
	ids := map[string]bool{}
	for _, e := range h.es[min(max(f.Offset, 0), len(h.es)):] {
		out.Entities = append(out.Entities, *e)
		ids[e.ID] = true
	}
	seen := map[string]bool{}
	var rels []Relation
	for _, e := range out.Entities {
		for _, rid := range g.links[e.ID] {
			r := g.relations[rid]
			if seen[rid] || (!f.Retired && !r.Valid()) {
				continue
			}
			seen[rid] = true
			if (q != "" && (ids[r.Source] || ids[r.Target])) || (ids[r.Source] && ids[r.Target]) {
				rels = append(rels, *r)
			}
		}
	}
	sortRelations(rels)
	out.Relations = strongest(rels, f.relationCap())
	if q != "" {
		for _, r := range out.Relations {
			for _, id := range []string{r.Source, r.Target} {
				if !ids[id] {
					ids[id] = true
					out.Entities = append(out.Entities, *g.entities[id])
				}
			}
		}
	}
	sortEntities(out.Entities)
	return out
}

// pageHeap keeps the first entities in page order, the last of them on
// top.
type pageHeap struct{ es []*Entity }

func (h *pageHeap) Len() int           { return len(h.es) }
func (h *pageHeap) Less(i, j int) bool { return pageOrder(*h.es[i], *h.es[j]) > 0 }
func (h *pageHeap) Swap(i, j int)      { h.es[i], h.es[j] = h.es[j], h.es[i] }
func (h *pageHeap) Push(x any)         { h.es = append(h.es, x.(*Entity)) }
func (h *pageHeap) Pop() any {
	e := h.es[len(h.es)-1]
	h.es = h.es[:len(h.es)-1]
	return e
}

// Count implements Backend.
func (j *JSONL) Count(_ context.Context, m Mind) (int, int, error) {
	g, err := j.graph(m)
	if err != nil {
		return 0, 0, err
	}
	defer g.mu.Unlock()
	return len(g.byKey), len(g.byLink), nil
}

// Drop implements Backend.
func (j *JSONL) Drop(_ context.Context, m Mind) error {
	j.mu.Lock()
	delete(j.minds, m.Key())
	j.mu.Unlock()
	if err := os.Remove(j.path(m)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("graph: drop %s: %w", m.Key(), err)
	}
	return nil
}

// Close implements Backend.
func (j *JSONL) Close() error { return nil }

// Related implements Backend.
func (j *JSONL) Related(_ context.Context, m Mind, keys []string) ([]Entity, []Entity, error) {
	g, err := j.graph(m)
	if err != nil {
		return nil, nil, err
	}
	defer g.mu.Unlock()
	var direct, neighbours []Entity
	hit := map[string]bool{}
	for _, k := range keys {
		if id, ok := g.byKey[k]; ok && !hit[id] {
			hit[id] = true
			direct = append(direct, *g.entities[id])
		}
	}
	if len(direct) == 0 {
		return nil, nil, nil
	}
	seen := map[string]bool{}
	for _, d := range direct {
		for _, rid := range g.links[d.ID] {
			r := g.relations[rid]
			if !r.Valid() {
				continue
			}
			other := r.Target
			if other == d.ID {
				other = r.Source
			}
			if hit[other] || seen[other] {
				continue
			}
			if e := g.entities[other]; e != nil && e.Valid() {
				seen[other] = true
				neighbours = append(neighbours, *e)
			}
		}
	}
	sortEntities(direct)
	sortEntities(neighbours)
	return direct, neighbours, nil
}
