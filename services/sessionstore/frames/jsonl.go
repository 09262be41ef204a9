package frames

import (
	"bufio"
	"bytes"
	"container/heap"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/jsonl"
	"github.com/waggle-os/core/services/sessionstore/mindindex"
)

// File is the name of a mind's file: <data-dir>/workspaces/<ws>/File for
// a workspace (where the keyword memories of earlier versions already
// live: their lines read as frames), <data-dir>/personal/File for the
// personal mind and <data-dir>/users/<user>/File for a team user's.
const File = "memories.jsonl"

// Record ops. A mind's file is a log: the last full record of an id is
// the frame, later ops adjust it.
const (
	opFrame  = ""
	opAccess = "access"
	opVector = "vector"
	opDelete = "delete"
	// opImportance sets the importance only (the lifecycle worker).
	opImportance = "importance"
)

// record is one line of a mind's file. A line of the earlier keyword
// memory ({id, content, tags, timestamp}) is a full record.
type record struct {
	Op          string   `json:"op,omitempty"`
	ID          string   `json:"id"`
	Content     string   `json:"content,omitempty"`
	Tags        []string `json:"tags,omitempty"`
	Timestamp   string   `json:"timestamp,omitempty"`
	Importance  string   `json:"importance,omitempty"`
	Source      string   `json:"source,omitempty"`
	Updated     string   `json:"updated,omitempty"`
	AccessCount int      `json:"accessCount,omitempty"`
	// Vec is the vector as base64 of little-endian float32s: exact and a
	// third of the size of a JSON number list.
	Vec      string `json:"vec,omitempty"`
	VecModel string `json:"vecModel,omitempty"`
}

// JSONL keeps each mind in one append-only JSONL file, fsynced per write,
// with the mind's frames and index in memory once loaded. It is the only
// writer of its files (the session store's JSONL singleton).
type JSONL struct {
	dataDir string

	mu    sync.Mutex
	minds map[string]*fileMind
	// stamps numbers the minds' changes (Version).
	stamps atomic.Uint64
}

type fileMind struct {
	mind Mind
	path string

	mu     sync.RWMutex
	loaded bool
	frames map[string]*Frame
	dupes  map[string]string // content → id
	index  *mindindex.Index
	// indexModel is the model whose vectors the index holds.
	indexModel string
	// changed is the stamp of the mind's last change (Version); stamps
	// is its backend's counter.
	changed uint64
	stamps  *atomic.Uint64
}

// NewJSONL returns a backend rooted at dataDir.
func NewJSONL(dataDir string) *JSONL {
	return &JSONL{dataDir: dataDir, minds: map[string]*fileMind{}}
}

var _ Backend = (*JSONL)(nil)

func (j *JSONL) path(m Mind) string {
	switch m.Kind {
	case KindWorkspace:
		return filepath.Join(j.dataDir, "workspaces", m.ID, File)
	case KindUser:
		return filepath.Join(j.dataDir, "users", m.ID, File)
	}
	return filepath.Join(j.dataDir, "personal", File)
}

// mind returns the loaded mind.
func (j *JSONL) mind(m Mind) (*fileMind, error) {
	j.mu.Lock()
	fm := j.minds[m.Key()]
	if fm == nil {
		// A mind dropped and read again gets a new stamp: a cache never
		// takes it for the one it knew.
		fm = &fileMind{mind: m, path: j.path(m), stamps: &j.stamps, changed: j.stamps.Add(1)}
		j.minds[m.Key()] = fm
	}
	j.mu.Unlock()
	fm.mu.Lock()
	defer fm.mu.Unlock()
	if err := fm.load(); err != nil {
		return nil, err
	}
	return fm, nil
}

func (fm *fileMind) load() error {
	if fm.loaded {
		return nil
	}
	fm.frames, fm.dupes, fm.index, fm.indexModel = map[string]*Frame{}, map[string]string{}, mindindex.New(), ""
	f, err := os.Open(fm.path)
	if errors.Is(err, fs.ErrNotExist) {
		fm.loaded = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("frames: open %s: %w", fm.mind.Key(), err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	records := 0
	for sc.Scan() {
		var r record
		// A torn last line (crash mid-append) or a foreign line is skipped.
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.ID == "" {
			continue
		}
		records++
		fm.apply(r)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("frames: read %s: %w", fm.mind.Key(), err)
	}
	// Index after replay: each frame once, in creation order.
	all := make([]*Frame, 0, len(fm.frames))
	for _, fr := range fm.frames {
		all = append(all, fr)
	}
	slices.SortFunc(all, func(a, b *Frame) int { return strings.Compare(a.Created, b.Created) })
	for _, fr := range all {
		fm.index.Put(fr.ID, indexText(*fr), createdMillis(fr.Created), nil)
	}
	fm.loaded = true
	if records > 2*len(all)+64 {
		// Mostly superseded records (accesses, re-embeddings, edits,
		// deletes): rewrite the log as one record per frame. A failure
		// leaves the old file, which is just as correct.
		_ = fm.compact(all)
	}
	return nil
}

// compact replaces the mind's file with one full record per frame,
// through a temp file, fsync and rename. fm.mu must be held for writing
// and the frames must still hold their vectors (right after a load).
func (fm *fileMind) compact(all []*Frame) error {
	tmp, err := os.CreateTemp(filepath.Dir(fm.path), ".memories-*.tmp")
	if err != nil {
		return err
	}
	w := bufio.NewWriter(tmp)
	enc := json.NewEncoder(w)
	for _, f := range all {
		if err = enc.Encode(fullRecord(*f)); err != nil {
			break
		}
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), fm.path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if d, err := os.Open(filepath.Dir(fm.path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// apply replays one record onto the frames (not the index).
func (fm *fileMind) apply(r record) {
	switch r.Op {
	case opFrame:
		if old := fm.frames[r.ID]; old != nil {
			delete(fm.dupes, old.Content)
		}
		f := &Frame{ID: r.ID, Content: r.Content, Tags: r.Tags, Importance: r.Importance, Source: r.Source,
			Created: r.Timestamp, Updated: r.Updated, AccessCount: r.AccessCount}
		if f.Importance == "" {
			f.Importance = protocol.ImportanceNormal
		}
		if f.Source == "" {
			f.Source = protocol.SourceUserStated
		}
		if f.Updated == "" {
			f.Updated = f.Created
		}
		if r.Vec != "" {
			f.Vector, f.VectorModel = decodeVec(r.Vec), r.VecModel
		}
		fm.frames[r.ID] = f
		fm.dupes[f.Content] = r.ID
	case opAccess:
		if f := fm.frames[r.ID]; f != nil {
			f.AccessCount = r.AccessCount
		}
	case opVector:
		if f := fm.frames[r.ID]; f != nil {
			f.Vector, f.VectorModel = decodeVec(r.Vec), r.VecModel
		}
	case opImportance:
		if f := fm.frames[r.ID]; f != nil {
			f.Importance = r.Importance
		}
	case opDelete:
		if f := fm.frames[r.ID]; f != nil {
			delete(fm.dupes, f.Content)
			delete(fm.frames, r.ID)
		}
	}
}

func indexText(f Frame) string {
	if len(f.Tags) == 0 {
		return f.Content
	}
	return f.Content + "\n" + strings.Join(f.Tags, "\n")
}

func fullRecord(f Frame) record {
	r := record{ID: f.ID, Content: f.Content, Tags: f.Tags, Timestamp: f.Created, Importance: f.Importance,
		Source: f.Source, Updated: f.Updated, AccessCount: f.AccessCount}
	if f.Vector != nil {
		r.Vec, r.VecModel = encodeVec(f.Vector), f.VectorModel
	}
	return r
}

// appendRecords writes records with one write and one fsync. fm.mu must
// be held for writing.
func (fm *fileMind) appendRecords(rs ...record) error {
	// Every change goes through here (under the write lock, before the
	// frames in memory change): a reader that saw the stamp reads frames
	// at least as new.
	fm.changed = fm.stamps.Add(1)
	var buf bytes.Buffer
	for _, r := range rs {
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("frames: encode %s: %w", fm.mind.Key(), err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	if err := jsonl.AppendFile(fm.path, buf.Bytes()); err != nil {
		fm.loaded = false // the file may hold part of a line: read it again
		return fmt.Errorf("frames: append %s: %w", fm.mind.Key(), err)
	}
	return nil
}

// Add implements Backend.
func (j *JSONL) Add(_ context.Context, m Mind, f Frame) (Frame, bool, error) {
	fm, err := j.mind(m)
	if err != nil {
		return Frame{}, false, err
	}
	fm.mu.Lock()
	defer fm.mu.Unlock()
	if id, ok := fm.dupes[f.Content]; ok {
		f, err := fm.access(id, fm.frames[id])
		return f, err == nil, err
	}
	if err := fm.appendRecords(fullRecord(f)); err != nil {
		return Frame{}, false, err
	}
	nf := f
	fm.frames[f.ID] = &nf
	fm.dupes[f.Content] = f.ID
	fm.index.Put(f.ID, indexText(f), createdMillis(f.Created), fm.vectorFor(nf))
	return nf, false, nil
}

// vectorFor is the frame's vector when it belongs to the indexed model.
func (fm *fileMind) vectorFor(f Frame) []float32 {
	if f.Vector != nil && f.VectorModel == fm.indexModel && f.VectorModel != "" {
		return f.Vector
	}
	return nil
}

// Get implements Backend.
func (j *JSONL) Get(_ context.Context, m Mind, id string) (Frame, error) {
	fm, err := j.mind(m)
	if err != nil {
		return Frame{}, err
	}
	fm.mu.RLock()
	defer fm.mu.RUnlock()
	f := fm.frames[id]
	if f == nil {
		return Frame{}, ErrNotFound
	}
	return *f, nil
}

// withFrame runs fn on frame id of mind m under the mind's write lock;
// ErrNotFound when the mind has no such frame.
func (j *JSONL) withFrame(m Mind, id string, fn func(fm *fileMind, f *Frame) (Frame, error)) (Frame, error) {
	fm, err := j.mind(m)
	if err != nil {
		return Frame{}, err
	}
	fm.mu.Lock()
	defer fm.mu.Unlock()
	f := fm.frames[id]
	if f == nil {
		return Frame{}, ErrNotFound
	}
	return fn(fm, f)
}

// Update implements Backend.
func (j *JSONL) Update(_ context.Context, m Mind, id, content, importance, now string) (Frame, error) {
	return j.withFrame(m, id, func(fm *fileMind, old *Frame) (Frame, error) {
		return fm.update(id, old, content, importance, now)
	})
}

// update replaces frame id's (old's) content and importance (fm.mu held).
func (fm *fileMind) update(id string, old *Frame, content, importance, now string) (Frame, error) {
	nf := *old
	if nf.Content != content {
		nf.Content, nf.Vector, nf.VectorModel = content, nil, ""
	}
	if importance != "" {
		nf.Importance = importance
	}
	nf.Updated = now
	if err := fm.appendRecords(fullRecord(nf)); err != nil {
		return Frame{}, err
	}
	delete(fm.dupes, old.Content)
	fm.frames[id] = &nf
	fm.dupes[nf.Content] = id
	if nf.Content != old.Content {
		// New text, no vector yet; an unchanged one keeps its indexed vector.
		fm.index.Put(id, indexText(nf), createdMillis(nf.Created), nil)
	}
	return nf, nil
}

// Delete implements Backend.
func (j *JSONL) Delete(_ context.Context, m Mind, id string) (Frame, error) {
	return j.withFrame(m, id, func(fm *fileMind, old *Frame) (Frame, error) {
		if err := fm.appendRecords(record{Op: opDelete, ID: id}); err != nil {
			return Frame{}, err
		}
		delete(fm.frames, id)
		delete(fm.dupes, old.Content)
		fm.index.Delete(id)
		return *old, nil
	})
}

// Access implements Backend.
func (j *JSONL) Access(_ context.Context, m Mind, id string) (Frame, error) {
	return j.withFrame(m, id, func(fm *fileMind, f *Frame) (Frame, error) {
		return fm.access(id, f)
	})
}

// access counts one more access of frame id, f (fm.mu held).
func (fm *fileMind) access(id string, f *Frame) (Frame, error) {
	if err := fm.appendRecords(record{Op: opAccess, ID: id, AccessCount: f.AccessCount + 1}); err != nil {
		return Frame{}, err
	}
	f.AccessCount++
	return *f, nil
}

// Version implements Versioned.
func (j *JSONL) Version(_ context.Context, m Mind) (uint64, bool) {
	fm, err := j.mind(m)
	if err != nil {
		return 0, false
	}
	fm.mu.RLock()
	defer fm.mu.RUnlock()
	return fm.changed, true
}

// Recent implements Backend.
func (j *JSONL) Recent(_ context.Context, m Mind, opt ListOptions) ([]Frame, error) {
	fm, err := j.mind(m)
	if err != nil {
		return nil, err
	}
	fm.mu.RLock()
	defer fm.mu.RUnlock()
	// The newest Limit frames by a bounded min-heap on creation: a large
	// mind is not sorted whole for a page of 50.
	h := &newest{}
	for _, f := range fm.frames {
		if !inRange(f.Created, opt) {
			continue
		}
		if h.Len() < opt.Limit {
			heap.Push(h, f)
		} else if h.Len() > 0 && older(h.fs[0], f) {
			h.fs[0] = f
			heap.Fix(h, 0)
		}
	}
	out := make([]Frame, len(h.fs))
	for i, f := range h.fs {
		out[i] = *f
	}
	sortNewest(out)
	return out, nil
}

// older orders frames by creation, then id.
func older(a, b *Frame) bool {
	if a.Created != b.Created {
		return a.Created < b.Created
	}
	return a.ID < b.ID
}

// newest is a min-heap of frames, the oldest on top.
type newest struct{ fs []*Frame }

func (h *newest) Len() int           { return len(h.fs) }
func (h *newest) Less(i, j int) bool { return older(h.fs[i], h.fs[j]) }
func (h *newest) Swap(i, j int)      { h.fs[i], h.fs[j] = h.fs[j], h.fs[i] }
func (h *newest) Push(x any)         { h.fs = append(h.fs, x.(*Frame)) }
func (h *newest) Pop() any {
	f := h.fs[len(h.fs)-1]
	h.fs = h.fs[:len(h.fs)-1]
	return f
}

func inRange(created string, opt ListOptions) bool {
	if opt.Since == 0 && opt.Until == 0 {
		return true
	}
	t := createdMillis(created)
	return (opt.Since == 0 || t >= opt.Since) && (opt.Until == 0 || t <= opt.Until)
}

func sortNewest(fs []Frame) {
	slices.SortFunc(fs, func(a, b Frame) int {
		if c := strings.Compare(b.Created, a.Created); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
}

// Search implements Backend.
func (j *JSONL) Search(_ context.Context, m Mind, text string, vec []float32, model string, opt ListOptions) ([]Hit, error) {
	fm, err := j.mind(m)
	if err != nil {
		return nil, err
	}
	fm.mu.RLock()
	if model != "" && fm.indexModel != model {
		fm.mu.RUnlock()
		fm.mu.Lock()
		fm.reindexVectors(model)
		fm.mu.Unlock()
		fm.mu.RLock()
	}
	defer fm.mu.RUnlock()
	hits := fm.index.Search(mindindex.Query{Text: text, Vector: vec, Limit: opt.Limit, Since: opt.Since, Until: opt.Until})
	out := make([]Hit, 0, len(hits))
	for _, h := range hits {
		if f := fm.frames[h.ID]; f != nil {
			out = append(out, Hit{Frame: *f, Score: h.Score})
		}
	}
	return out, nil
}

// reindexVectors makes the index hold the vectors of model. The frames'
// own float32 copies are dropped then (the index keeps int8 ones, a
// quarter of the memory); a frame of another model becomes pending, and
// is embedded again should that model come back. fm.mu must be held for
// writing.
func (fm *fileMind) reindexVectors(model string) {
	if fm.indexModel == model {
		return
	}
	fm.index.ClearVectors()
	fm.indexModel = model
	for _, f := range fm.frames {
		if f.VectorModel == model && f.Vector != nil {
			fm.index.SetVector(f.ID, f.Vector)
		} else {
			f.VectorModel = ""
		}
		f.Vector = nil
	}
}

// SetVectors implements Backend.
func (j *JSONL) SetVectors(_ context.Context, m Mind, model string, vecs map[string][]float32) error {
	fm, err := j.mind(m)
	if err != nil {
		return err
	}
	fm.mu.Lock()
	defer fm.mu.Unlock()
	var rs []record
	for id, v := range vecs {
		if fm.frames[id] != nil {
			rs = append(rs, record{Op: opVector, ID: id, Vec: encodeVec(v), VecModel: model})
		}
	}
	if len(rs) == 0 {
		return nil
	}
	if err := fm.appendRecords(rs...); err != nil {
		return err
	}
	for _, r := range rs {
		f := fm.frames[r.ID]
		f.VectorModel = model
		if model == fm.indexModel {
			fm.index.SetVector(r.ID, vecs[r.ID])
		} else {
			f.Vector = vecs[r.ID] // indexed when a search asks for model
		}
	}
	return nil
}

// Pending implements Backend: it loads every mind on disk the first time.
func (j *JSONL) Pending(_ context.Context, model string, n int) ([]Pending, error) {
	for _, m := range j.diskMinds() {
		if _, err := j.mind(m); err != nil {
			return nil, err
		}
	}
	j.mu.Lock()
	minds := make([]*fileMind, 0, len(j.minds))
	for _, fm := range j.minds {
		minds = append(minds, fm)
	}
	j.mu.Unlock()
	slices.SortFunc(minds, func(a, b *fileMind) int { return strings.Compare(a.mind.Key(), b.mind.Key()) })
	var out []Pending
	for _, fm := range minds {
		fm.mu.Lock()
		// A mind another request just added to the map may not be loaded
		// yet (mind loads it after releasing j.mu): load it here.
		if err := fm.load(); err != nil {
			fm.mu.Unlock()
			return nil, err
		}
		fm.reindexVectors(model)
		for _, f := range fm.frames {
			if len(out) == n {
				break
			}
			if f.VectorModel != model {
				out = append(out, Pending{Mind: fm.mind, ID: f.ID, Content: f.Content})
			}
		}
		fm.mu.Unlock()
	}
	return out, nil
}

// diskMinds lists the minds with a file.
func (j *JSONL) diskMinds() []Mind {
	var out []Mind
	if _, err := os.Stat(j.path(Mind{Kind: KindPersonal})); err == nil {
		out = append(out, Mind{Kind: KindPersonal})
	}
	for _, kind := range []string{KindWorkspace, KindUser} {
		dir := "workspaces"
		if kind == KindUser {
			dir = "users"
		}
		ents, _ := os.ReadDir(filepath.Join(j.dataDir, dir))
		for _, e := range ents {
			m := Mind{Kind: kind, ID: e.Name()}
			if !e.IsDir() || !protocol.ValidID(e.Name()) {
				continue
			}
			if _, err := os.Stat(j.path(m)); err == nil {
				out = append(out, m)
			}
		}
	}
	return out
}

// Count implements Backend.
func (j *JSONL) Count(_ context.Context, m Mind, model string) (int, int, error) {
	fm, err := j.mind(m)
	if err != nil {
		return 0, 0, err
	}
	fm.mu.RLock()
	defer fm.mu.RUnlock()
	embedded := 0
	for _, f := range fm.frames {
		if model != "" && f.VectorModel == model {
			embedded++
		}
	}
	return len(fm.frames), embedded, nil
}

// Drop implements Backend. A workspace mind's file goes with its
// workspace directory; Drop removes it too, and forgets the cache.
func (j *JSONL) Drop(_ context.Context, m Mind) error {
	j.mu.Lock()
	delete(j.minds, m.Key())
	j.mu.Unlock()
	if err := os.Remove(j.path(m)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("frames: drop %s: %w", m.Key(), err)
	}
	return nil
}

// Close implements Backend.
func (j *JSONL) Close() error { return nil }

func encodeVec(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}

func decodeVec(s string) []float32 {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b)%4 != 0 {
		return nil
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// Minds implements Backend.
func (j *JSONL) Minds(context.Context) ([]Mind, error) {
	return j.diskMinds(), nil
}

// SetImportance implements Backend.
func (j *JSONL) SetImportance(_ context.Context, m Mind, id, importance string) (Frame, error) {
	return j.withFrame(m, id, func(fm *fileMind, f *Frame) (Frame, error) {
		if err := fm.appendRecords(record{Op: opImportance, ID: id, Importance: importance}); err != nil {
			return Frame{}, err
		}
		f.Importance = importance
		return *f, nil
	})
}
