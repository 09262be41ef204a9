// Package frames keeps the minds: the personal mind and one per workspace,
// each a set of memory frames with a hybrid (BM25 + vector) search index.
// A Backend stores them (JSONL files, or PostgreSQL for team servers);
// Minds adds validation, embeddings (requested from the model server in
// the background) and the bus endpoints. See docs/memory.md.
package frames

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

// Mind kinds.
const (
	// KindPersonal is the local personal mind (ID empty).
	KindPersonal = "personal"
	// KindUser is the personal mind of a team-server user (ID the user).
	KindUser = "user"
	// KindWorkspace is a workspace's mind (ID the workspace).
	KindWorkspace = "workspace"
)

// Mind names one mind.
type Mind struct {
	Kind string
	ID   string
}

// Key is the mind's stable name, unique across kinds.
func (m Mind) Key() string {
	if m.ID == "" {
		return m.Kind
	}
	return m.Kind + ":" + m.ID
}

// Label is the mind label the API reports: personal or workspace.
func (m Mind) Label() string {
	if m.Kind == KindWorkspace {
		return protocol.MindWorkspace
	}
	return protocol.MindPersonal
}

// Frame is one stored frame.
type Frame struct {
	ID          string
	Content     string
	Tags        []string
	Importance  string
	Source      string
	Created     string // protocol.TimestampLayout: lexical order is time order
	Updated     string
	AccessCount int
	// Vector is the embedding of Content by VectorModel (nil: none yet).
	Vector      []float32
	VectorModel string
}

// Public is the frame as the bus reports it.
func (f Frame) Public(m Mind, score float64) protocol.MemoryFrame {
	out := protocol.MemoryFrame{
		ID: f.ID, Content: f.Content, Tags: f.Tags, Importance: f.Importance, Source: f.Source,
		Mind: m.Label(), Created: f.Created, Updated: f.Updated, AccessCount: f.AccessCount, Score: score,
	}
	if m.Kind == KindWorkspace {
		out.Workspace = m.ID
	}
	return out
}

// Hit is a frame found by a search with its fused score.
type Hit struct {
	Frame Frame
	Score float64
}

// ListOptions bound a listing or search by creation time (Unix ms; 0:
// unbounded) and count.
type ListOptions struct {
	Limit        int
	Since, Until int64
}

// Pending is a frame waiting for a vector of the current model.
type Pending struct {
	Mind    Mind
	ID      string
	Content string
}

// Backend stores minds. Implementations: JSONL (files) and Postgres; both
// pass the conformance suite in frames_test.go. Frames reach a Backend
// validated and sanitised; ids of minds passed protocol.ValidID.
type Backend interface {
	// Add stores f unless the mind already holds identical content; then
	// it counts one access of that frame and returns it with dup true.
	Add(ctx context.Context, m Mind, f Frame) (saved Frame, dup bool, err error)
	// Get reads one frame (ErrNotFound when the mind has no such id).
	Get(ctx context.Context, m Mind, id string) (Frame, error)
	// Update sets content (clearing the vector) and, when not empty,
	// importance.
	Update(ctx context.Context, m Mind, id, content, importance, now string) (Frame, error)
	// Delete removes a frame.
	Delete(ctx context.Context, m Mind, id string) (Frame, error)
	// Access counts one access.
	Access(ctx context.Context, m Mind, id string) (Frame, error)
	// Recent lists frames newest first.
	Recent(ctx context.Context, m Mind, opt ListOptions) ([]Frame, error)
	// Search ranks frames against text and vec (nil: keyword only), using
	// only vectors of model.
	Search(ctx context.Context, m Mind, text string, vec []float32, model string, opt ListOptions) ([]Hit, error)
	// SetVectors stores vectors of model for frames (ids missing by now
	// are skipped).
	SetVectors(ctx context.Context, m Mind, model string, vecs map[string][]float32) error
	// Pending lists up to n frames of any mind without a vector of model.
	Pending(ctx context.Context, model string, n int) ([]Pending, error)
	// Count counts a mind's frames and those with a vector of model.
	Count(ctx context.Context, m Mind, model string) (frames, embedded int, err error)
	// Drop removes a mind (its workspace was deleted).
	Drop(ctx context.Context, m Mind) error
	// Minds lists the minds that hold frames (the lifecycle worker walks
	// them).
	Minds(ctx context.Context) ([]Mind, error)
	// SetImportance changes a frame's importance only: not its update
	// time, content or vector (the lifecycle worker's decay and
	// strengthening, and their undo).
	SetImportance(ctx context.Context, m Mind, id, importance string) (Frame, error)
	// Close releases the backend.
	Close() error
}

// ErrNotFound is the API's 404 for an unknown frame.
var ErrNotFound = protocol.Errorf(protocol.NotFound, "Frame not found")

// CheckImportance validates an importance; empty is allowed (the caller's
// default).
func CheckImportance(v string) error {
	if v != "" && !slices.Contains(protocol.Importances, v) {
		return protocol.Errorf(protocol.Invalid, "Invalid importance %q. Valid values: %s", v, strings.Join(protocol.Importances, ", "))
	}
	return nil
}

// CheckSource validates a source; empty is allowed.
func CheckSource(v string) error {
	if v != "" && !slices.Contains(protocol.Sources, v) {
		return protocol.Errorf(protocol.Invalid, "Invalid source %q. Valid values: %s", v, strings.Join(protocol.Sources, ", "))
	}
	return nil
}

// ParseTime reads a since/until bound: RFC 3339 (with or without
// fraction or zone) or a date. Empty is 0 (unbounded).
func ParseTime(name, v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UnixMilli(), nil
		}
	}
	return 0, protocol.Errorf(protocol.Invalid, "Invalid %s: expected an ISO date", name)
}

// createdMillis is a frame's creation time in Unix ms (0 when unreadable).
func createdMillis(created string) int64 {
	t, err := time.Parse(time.RFC3339Nano, created)
	if err != nil {
		return 0
	}
	return t.UnixMilli()
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
	return fmt.Errorf("frames: %s %s: %w", op, m.Key(), err)
}

// ParseMindKey reads Mind.Key back ("personal", "user:<id>",
// "workspace:<id>"); ok false for anything else.
func ParseMindKey(key string) (Mind, bool) {
	if key == KindPersonal {
		return Mind{Kind: KindPersonal}, true
	}
	kind, id, found := strings.Cut(key, ":")
	if !found || (kind != KindUser && kind != KindWorkspace) || !protocol.ValidID(id) {
		return Mind{}, false
	}
	return Mind{Kind: kind, ID: id}, true
}
