// Package memory keeps each workspace's long-term memories: one JSON line
// per memory in <data-dir>/workspaces/<ws>/memories.jsonl, appended with
// fsync, and a keyword search over them.
//
// Search is deliberately simple and deterministic: the query is split into
// lower-cased terms (runs of letters and digits) and a memory scores one
// point for every distinct term found as a substring of its content or
// tags, case-insensitively. Results are the memories with a score above
// zero, best score first, most recent first among equals. A query without
// any term returns the most recent memories.
package memory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/jsonl"
)

// Search result bounds.
const (
	// DefaultLimit is the number of results when a search names none.
	DefaultLimit = 5
	// MaxLimit caps the results of one search.
	MaxLimit = 100
)

// Store reads and writes workspace memories. It caches each workspace's
// memories after the first read and keeps the cache current with its own
// appends; a file changed behind its back (size or mtime differs) is read
// again.
type Store struct {
	dataDir string
	now     func() time.Time

	mu  sync.Mutex
	wss map[string]*workspace
}

type workspace struct {
	mu      sync.Mutex
	loaded  bool
	size    int64
	mtime   time.Time
	entries []entry
}

// entry is one memory with its search text lower-cased once.
type entry struct {
	mem   protocol.Memory
	lower string
}

// New returns a store rooted at dataDir.
func New(dataDir string) *Store {
	return &Store{dataDir: dataDir, now: time.Now, wss: map[string]*workspace{}}
}

func (s *Store) path(ws string) string {
	return filepath.Join(s.dataDir, "workspaces", ws, "memories.jsonl")
}

func (s *Store) workspace(ws string) *workspace {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.wss[ws]
	if w == nil {
		w = &workspace{}
		s.wss[ws] = w
	}
	return w
}

// Forget drops the cache of a workspace (its directory was removed).
func (s *Store) Forget(ws string) {
	s.mu.Lock()
	delete(s.wss, ws)
	s.mu.Unlock()
}

// Save stores one memory durably and returns it with its new id.
func (s *Store) Save(ws, content string, tags []string) (protocol.Memory, error) {
	m, err := NewMemory(ws, content, tags, s.now())
	if err != nil {
		return protocol.Memory{}, err
	}
	line, err := json.Marshal(m)
	if err != nil {
		return protocol.Memory{}, fmt.Errorf("memory: encode %s: %w", ws, err)
	}
	line = append(line, '\n')

	w := s.workspace(ws)
	w.mu.Lock()
	defer w.mu.Unlock()
	// Load first so the cache and the file stay in step after the append.
	if err := s.load(ws, w); err != nil {
		return protocol.Memory{}, err
	}
	path := s.path(ws)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return protocol.Memory{}, fmt.Errorf("memory: create dir of %s: %w", ws, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return protocol.Memory{}, fmt.Errorf("memory: open %s: %w", ws, err)
	}
	// A torn last line (crash mid-append) must not swallow this one.
	if st, err := f.Stat(); err == nil && st.Size() > 0 && !endsWithNewline(path, st.Size()) {
		line = append([]byte{'\n'}, line...)
	}
	_, werr := f.Write(line)
	serr := f.Sync()
	st, sterr := f.Stat()
	cerr := f.Close()
	if err := errors.Join(werr, serr, sterr, cerr); err != nil {
		w.loaded = false // the file may hold part of the line; read it again next time
		return protocol.Memory{}, fmt.Errorf("memory: append %s: %w", ws, err)
	}
	w.entries = append(w.entries, newEntry(m))
	w.size, w.mtime = st.Size(), st.ModTime()
	return m, nil
}

// NewMemory checks a memory to save in ws and gives it an id and time.
func NewMemory(ws, content string, tags []string, now time.Time) (protocol.Memory, error) {
	if !protocol.ValidID(ws) {
		return protocol.Memory{}, protocol.Errorf(400, "invalid workspace id")
	}
	if strings.TrimSpace(content) == "" {
		return protocol.Memory{}, protocol.Errorf(400, "content is required")
	}
	return protocol.Memory{
		ID:        "mem-" + protocol.NewUUID(),
		Content:   content,
		Tags:      tags,
		Timestamp: jsonl.Timestamp(now),
	}, nil
}

// Limit applies the default and the cap to a requested result count.
func Limit(limit int) int {
	if limit <= 0 {
		limit = DefaultLimit
	}
	return min(limit, MaxLimit)
}

// SearchText is what a memory's search terms are matched against: its
// content and tags, lower-cased.
func SearchText(m protocol.Memory) string {
	text := m.Content
	if len(m.Tags) > 0 {
		text += "\n" + strings.Join(m.Tags, "\n")
	}
	return strings.ToLower(text)
}

// Search returns the memories of ws matching query, best first (see the
// package doc). limit <= 0 means DefaultLimit; it is capped at MaxLimit.
func (s *Store) Search(ws, query string, limit int) ([]protocol.Memory, error) {
	if !protocol.ValidID(ws) {
		return nil, protocol.Errorf(400, "invalid workspace id")
	}
	limit = Limit(limit)
	terms := Terms(query)

	w := s.workspace(ws)
	w.mu.Lock()
	if err := s.load(ws, w); err != nil {
		w.mu.Unlock()
		return nil, err
	}
	type hit struct {
		idx   int
		score int
	}
	var hits []hit
	for i, e := range w.entries {
		score := 0
		for _, t := range terms {
			if strings.Contains(e.lower, t) {
				score++
			}
		}
		if score > 0 || len(terms) == 0 {
			hits = append(hits, hit{i, score})
		}
	}
	// Entries are in file (= save) order, so a higher index is more recent.
	slices.SortFunc(hits, func(a, b hit) int {
		if a.score != b.score {
			return b.score - a.score
		}
		return b.idx - a.idx
	})
	out := make([]protocol.Memory, 0, min(limit, len(hits)))
	for _, h := range hits[:min(limit, len(hits))] {
		out = append(out, w.entries[h.idx].mem)
	}
	w.mu.Unlock()
	return out, nil
}

// load (re)reads the file when the cache is cold or the file changed.
// w.mu must be held.
func (s *Store) load(ws string, w *workspace) error {
	path := s.path(ws)
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		w.loaded, w.entries, w.size, w.mtime = true, nil, 0, time.Time{}
		return nil
	}
	if err != nil {
		return fmt.Errorf("memory: stat %s: %w", ws, err)
	}
	if w.loaded && st.Size() == w.size && st.ModTime().Equal(w.mtime) {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("memory: read %s: %w", ws, err)
	}
	var entries []entry
	for line := range bytes.SplitSeq(data, []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var m protocol.Memory
		// A torn last line (crash mid-append) or a foreign line is skipped.
		if json.Unmarshal(line, &m) != nil || m.ID == "" {
			continue
		}
		entries = append(entries, newEntry(m))
	}
	w.loaded, w.entries, w.size, w.mtime = true, entries, int64(len(data)), st.ModTime()
	return nil
}

func endsWithNewline(path string, size int64) bool {
	f, err := os.Open(path)
	if err != nil {
		return true
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], size-1); err != nil {
		return true
	}
	return b[0] == '\n'
}

func newEntry(m protocol.Memory) entry {
	return entry{mem: m, lower: SearchText(m)}
}

// Terms splits a query into its distinct lower-cased search terms: runs of
// letters and digits.
func Terms(query string) []string {
	var terms []string
	for _, f := range strings.FieldsFunc(strings.ToLower(query), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if !slices.Contains(terms, f) {
			terms = append(terms, f)
		}
	}
	return terms
}
