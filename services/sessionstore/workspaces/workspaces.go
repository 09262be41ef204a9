// Package workspaces stores workspace configs, one JSON object per
// workspace in <data-dir>/workspaces/<id>/workspace.json. A workspace
// exists exactly when that file exists. Unknown fields are kept as they
// were written, so clients can store settings this package does not know.
package workspaces

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/jsonl"
)

// Default workspace: chats that name no workspace land in it, so it must
// exist for their sessions to be listed.
const (
	DefaultID   = "default"
	DefaultName = "Default Workspace"
)

// maxSlugLength bounds the slug part of an id, leaving room for "-<n>".
const maxSlugLength = 100

// Errors with their HTTP kind.
var (
	ErrNotFound     = &protocol.Error{Kind: protocol.NotFound, Message: "Workspace not found"}
	ErrNameRequired = &protocol.Error{Kind: protocol.Invalid, Message: "name is required"}
	// ErrDamaged is a workspace whose workspace.json exists but is not a
	// JSON object (cut short, overwritten): it is reported, skipped by
	// listings and never rewritten; other workspaces are not affected.
	ErrDamaged = (&protocol.Error{Kind: protocol.Internal,
		Message: "This workspace's configuration file (workspace.json) is damaged. Restore or remove it; other workspaces are not affected."}).WithCode("WORKSPACE_DAMAGED")
)

// Doc is a workspace's stored JSON object, unknown fields included.
type Doc map[string]json.RawMessage

// ID returns the doc's id field.
func (d Doc) ID() string { return d.str("id") }

func (d Doc) str(key string) string {
	var s string
	_ = json.Unmarshal(d[key], &s)
	return s
}

// Workspace decodes the fields other services read.
func (d Doc) Workspace() protocol.Workspace {
	w := protocol.Workspace{
		// The original's workspaces store personaId; ours once wrote
		// persona. personaId wins when both are set.
		ID: d.ID(), Name: d.str("name"), Model: d.str("model"), Persona: cmp.Or(d.str("personaId"), d.str("persona")), Tone: d.str("tone"),
		TeamID: d.str("teamId"), Directory: d.str("directory"), Group: d.str("group"), Created: d.str("created"),
	}
	_ = json.Unmarshal(d["budget"], &w.Budget)
	return w
}

// Registry is the registry of workspaces: it reads and writes each
// workspace's config (workspace.json) and knows its directory.
type Registry struct {
	dataDir string
	now     func() time.Time

	// mu serialises writers so two creates cannot pick the same id and a
	// patch never loses a concurrent patch's fields.
	mu sync.Mutex

	// Logger reports damaged configs (set before use; nil: slog.Default()).
	Logger *slog.Logger
	// reported remembers the damaged files already logged (by id, with
	// their size and mtime), so a listing polled every second logs a
	// damaged file once, not every time.
	reported sync.Map
}

// damaged logs a damaged workspace.json once per version of the file and
// returns the error for callers.
func (s *Registry) damaged(id string, data []byte, cause error) error {
	key := fmt.Sprint(len(data))
	if st, err := os.Stat(s.file(id)); err == nil {
		key += st.ModTime().String()
	}
	if prev, ok := s.reported.Swap(id, key); !ok || prev != key {
		log := s.Logger
		if log == nil {
			log = slog.Default()
		}
		log.Error("workspace config is damaged: the workspace is skipped until workspace.json is restored or removed",
			"workspace", id, "path", s.file(id), "err", cause)
	}
	return fmt.Errorf("workspaces: decode %s: %v: %w", id, cause, ErrDamaged)
}

// New returns a store rooted at dataDir.
func New(dataDir string) *Registry {
	return &Registry{dataDir: dataDir, now: time.Now}
}

// Root is the directory holding every workspace.
func (s *Registry) Root() string { return filepath.Join(s.dataDir, "workspaces") }

// Dir is a workspace's directory.
func (s *Registry) Dir(id string) string { return filepath.Join(s.Root(), id) }

func (s *Registry) file(id string) string { return filepath.Join(s.Dir(id), "workspace.json") }

// Exists reports whether workspace id exists.
func (s *Registry) Exists(id string) bool {
	if !protocol.ValidID(id) {
		return false
	}
	_, err := os.Stat(s.file(id))
	return err == nil
}

// DefaultDoc is the default workspace's doc, created now.
func DefaultDoc(now time.Time) Doc {
	return Doc{"id": jsonValue(DefaultID), "name": jsonValue(DefaultName), "created": jsonValue(protocol.Timestamp(now))}
}

// EnsureDefault creates the default workspace when it does not exist.
func (s *Registry) EnsureDefault() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Exists(DefaultID) {
		return nil
	}
	return s.write(DefaultID, DefaultDoc(s.now()))
}

// Get reads workspace id; ErrNotFound when it does not exist.
func (s *Registry) Get(id string) (Doc, error) {
	if !protocol.ValidID(id) {
		return nil, ErrNotFound
	}
	data, err := os.ReadFile(s.file(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("workspaces: read %s: %w", id, err)
	}
	var doc Doc
	if err := json.Unmarshal(data, &doc); err != nil || doc == nil {
		if err == nil {
			err = errors.New("not a JSON object")
		}
		return nil, s.damaged(id, data, err)
	}
	s.reported.Delete(id)
	// The file is indented for people; values travel compact.
	for k, v := range doc {
		var buf bytes.Buffer
		if json.Compact(&buf, v) == nil {
			doc[k] = buf.Bytes()
		}
	}
	// The directory name is the id, whatever the file says.
	doc["id"] = jsonValue(id)
	return doc, nil
}

// List returns every workspace, oldest first (ties by id). Unreadable or
// damaged configs are skipped (and logged).
func (s *Registry) List() ([]Doc, error) {
	ents, err := os.ReadDir(s.Root())
	if errors.Is(err, fs.ErrNotExist) {
		return []Doc{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("workspaces: list: %w", err)
	}
	out := []Doc{}
	for _, e := range ents {
		if !e.IsDir() || !protocol.ValidID(e.Name()) {
			continue
		}
		doc, err := s.Get(e.Name())
		if err != nil {
			continue
		}
		out = append(out, doc)
	}
	SortDocs(out)
	return out, nil
}

// Create adds a workspace from the given fields. Its id is the slug of the
// name, with "-2", "-3"… on collision with a workspace here or one taken
// reports (another store's; nil: none); id and created are set here.
func (s *Registry) Create(fields Doc, taken func(id string) (bool, error)) (Doc, error) {
	if err := Validate(fields, true); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	base := Slug(fields.str("name"))
	id := base
	for n := 2; ; n++ {
		if !s.Exists(id) {
			if taken == nil {
				break
			}
			t, err := taken(id)
			if err != nil {
				return nil, fmt.Errorf("workspaces: create %s: %w", id, err)
			}
			if !t {
				break
			}
		}
		id = CandidateID(base, n)
	}
	doc := NewDoc(id, fields, s.now())
	if err := s.write(id, doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// CandidateID is the n-th id tried for a name slugged to base: base itself
// for n < 2, else base-n.
func CandidateID(base string, n int) string {
	if n < 2 {
		return base
	}
	return base + "-" + strconv.Itoa(n)
}

// NewDoc builds a new workspace's doc from validated create fields: null
// fields are dropped, id and created are set.
func NewDoc(id string, fields Doc, now time.Time) Doc {
	doc := Doc{}
	for k, v := range fields {
		if !isNull(v) {
			doc[k] = v
		}
	}
	doc["id"] = jsonValue(id)
	doc["created"] = jsonValue(protocol.Timestamp(now))
	return doc
}

// Merge applies validated patch fields to doc in place: a null value
// removes the field, id and created never change, other fields are kept.
func Merge(doc, fields Doc) {
	for k, v := range fields {
		switch {
		case k == "id" || k == "created":
		case isNull(v):
			delete(doc, k)
		default:
			doc[k] = v
		}
	}
}

// Created returns the doc's created field.
func (d Doc) Created() string { return d.str("created") }

// SortDocs orders docs oldest first, ties by id: the listing order.
func SortDocs(docs []Doc) {
	slices.SortStableFunc(docs, func(a, b Doc) int {
		if c := strings.Compare(a.str("created"), b.str("created")); c != 0 {
			return c
		}
		return strings.Compare(a.ID(), b.ID())
	})
}

// Update merges fields into workspace id: a null value removes the field,
// id and created never change, other fields are kept.
func (s *Registry) Update(id string, fields Doc) (Doc, error) {
	if err := Validate(fields, false); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	doc, err := s.Get(id)
	if err != nil {
		return nil, err
	}
	Merge(doc, fields)
	if err := s.write(id, doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// Delete removes workspace id and everything in its directory (sessions
// and memories included). It returns the ids of the sessions it removed.
func (s *Registry) Delete(id string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.Exists(id) {
		return nil, ErrNotFound
	}
	var sessions []string
	if ents, err := os.ReadDir(filepath.Join(s.Dir(id), "sessions")); err == nil {
		for _, e := range ents {
			if name, ok := strings.CutSuffix(e.Name(), ".jsonl"); ok && protocol.ValidID(name) {
				sessions = append(sessions, name)
			}
		}
	}
	// Remove the config first: a crash midway leaves no half-listed workspace.
	if err := os.Remove(s.file(id)); err != nil {
		return nil, fmt.Errorf("workspaces: delete %s: %w", id, err)
	}
	if err := os.RemoveAll(s.Dir(id)); err != nil {
		return sessions, fmt.Errorf("workspaces: delete %s: %w", id, err)
	}
	return sessions, nil
}

func (s *Registry) write(id string, doc Doc) error {
	if err := os.MkdirAll(s.Dir(id), 0o700); err != nil {
		return fmt.Errorf("workspaces: create %s: %w", id, err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("workspaces: encode %s: %w", id, err)
	}
	if err := jsonl.WriteFileAtomic(s.file(id), buf.Bytes()); err != nil {
		return fmt.Errorf("workspaces: write %s: %w", id, err)
	}
	return nil
}

// stringFields must be strings when present (null clears them).
var stringFields = []string{"name", "group", "model", "persona", "personaId", "tone", "teamId", "directory"}

// Validate checks create (create true) or patch fields: a non-blank name
// (required on create), string-typed known fields, a non-negative budget.
func Validate(fields Doc, create bool) error {
	name, present := fields["name"]
	if create || present {
		var s string
		if json.Unmarshal(name, &s) != nil || strings.TrimSpace(s) == "" {
			return ErrNameRequired
		}
	}
	for _, k := range stringFields {
		if v, ok := fields[k]; ok && !isNull(v) {
			var s string
			if json.Unmarshal(v, &s) != nil {
				return protocol.Errorf(protocol.Invalid, "%s must be a string", k)
			}
		}
	}
	if v, ok := fields["budget"]; ok && !isNull(v) {
		var f float64
		if json.Unmarshal(v, &f) != nil || f < 0 {
			return protocol.Errorf(protocol.Invalid, "budget must be a non-negative number")
		}
	}
	return nil
}

// Slug turns a name into an id: lower-case ASCII letters and digits, every
// other run of characters becoming one '-', no leading or trailing '-'. A
// name with nothing usable gives "workspace".
func Slug(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			if b.Len() >= maxSlugLength {
				break
			}
			continue
		}
		dash = true
	}
	if b.Len() == 0 {
		return "workspace"
	}
	return b.String()
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

func jsonValue(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}
