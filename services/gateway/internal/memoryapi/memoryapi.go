// Package memoryapi serves /api/memory/* (docs/memory.md) with the shapes
// of the original server, so its web client works unchanged, by asking the
// session store's minds over NATS. Handlers check what HTTP owns (query
// and body types, path segments) and shape the replies; the store owns
// validation of content, importance and source.
package memoryapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/forward"
	"github.com/waggle-os/core/services/gateway/internal/input"
	"github.com/waggle-os/core/services/gateway/internal/teamauth"
)

// Default result counts of the original's routes.
const (
	defaultFrames = 50
	defaultSearch = 20
)

type api struct{ d forward.Deps }

// Mount adds the routes to r (mounted at /api).
func Mount(r chi.Router, d forward.Deps) {
	a := api{d}
	r.Get("/memory/frames", a.frames)
	r.Post("/memory/frames", a.add)
	r.Put("/memory/frames/{id}", a.update)
	r.Delete("/memory/frames/{id}", a.remove)
	r.Patch("/memory/frames/{id}/access", a.access)
	r.Get("/memory/search", a.search)
	r.Get("/memory/stats", a.stats)
	r.Get("/memory/graph", a.graph)
	r.Post("/memory/graph/{id}/retire", a.retire)
	r.Post("/memory/graph/{id}/restore", a.restore)
}

// owner is the minds a request reaches: the workspace the authorization
// step resolved (from ?workspace=, ?workspaceId= or the body's workspace
// or workspaceId, which must agree) and, on a team server, the user's own
// personal mind.
func owner(r *http.Request) (protocol.MemoryOwner, error) {
	sc, _ := teamauth.ScopeFrom(r.Context())
	o := protocol.MemoryOwner{Workspace: sc.Workspace, User: sc.User}
	if o.Workspace != "" {
		if err := input.CheckSegment("workspace", o.Workspace); err != nil {
			return o, err
		}
	}
	return o, nil
}

// frame is one frame as the original's normalizeFrame shapes it, with
// created_at and workspaceId beside it.
type frame struct {
	ID          string   `json:"id"`
	Content     string   `json:"content"`
	Source      string   `json:"source"`
	SourceMind  string   `json:"source_mind"`
	Mind        string   `json:"mind"`
	WorkspaceID string   `json:"workspaceId,omitempty"`
	FrameType   string   `json:"frameType"`
	Importance  string   `json:"importance"`
	Timestamp   string   `json:"timestamp"`
	CreatedAt   string   `json:"created_at"`
	UpdatedAt   string   `json:"updated_at"`
	Score       *float64 `json:"score,omitempty"`
	AccessCount int      `json:"accessCount"`
	Tags        []string `json:"tags,omitempty"`
}

func shape(f protocol.MemoryFrame, scored bool) frame {
	out := frame{ID: f.ID, Content: f.Content, Source: f.Source, SourceMind: f.Mind, Mind: f.Mind, WorkspaceID: f.Workspace,
		FrameType: "I", Importance: f.Importance, Timestamp: f.Created, CreatedAt: f.Created, UpdatedAt: f.Updated,
		AccessCount: f.AccessCount, Tags: f.Tags}
	if scored {
		s := f.Score
		out.Score = &s
	}
	return out
}

type results struct {
	Results []frame `json:"results"`
	Count   int     `json:"count"`
}

func list(fs []protocol.MemoryFrame, scored bool) results {
	out := results{Results: make([]frame, 0, len(fs))}
	for _, f := range fs {
		out.Results = append(out.Results, shape(f, scored))
	}
	out.Count = len(out.Results)
	return out
}

// GET /api/memory/frames?workspace=&limit=&since=&until=
func (a api) frames(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, framesQuery, protocol.ListFrames, http.StatusOK,
		func(rep protocol.MemoryFramesReply) any { return list(rep.Frames, false) })
}

func framesQuery(_ http.ResponseWriter, r *http.Request) (protocol.MemoryFramesRequest, error) {
	o, err := owner(r)
	q := r.URL.Query()
	return protocol.MemoryFramesRequest{MemoryOwner: o, Limit: parseLimit(q.Get("limit"), defaultFrames), Since: q.Get("since"), Until: q.Get("until")}, err
}

// POST /api/memory/frames {content, workspace|workspaceId, importance?, source?}
func (a api) add(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, a.addition, protocol.AddFrame, http.StatusOK, func(rep protocol.MemoryAddReply) any {
		if rep.Duplicate {
			return struct {
				Saved     bool   `json:"saved"`
				Duplicate bool   `json:"duplicate"`
				FrameID   string `json:"frameId"`
				Mind      string `json:"mind"`
				Message   string `json:"message"`
			}{false, true, rep.Frame.ID, rep.Frame.Mind, "Identical content already exists. Access count updated."}
		}
		return struct {
			Saved      bool   `json:"saved"`
			FrameID    string `json:"frameId"`
			Mind       string `json:"mind"`
			Importance string `json:"importance"`
			Source     string `json:"source"`
		}{true, rep.Frame.ID, rep.Frame.Mind, rep.Frame.Importance, rep.Frame.Source}
	})
}

func (a api) addition(w http.ResponseWriter, r *http.Request) (protocol.MemoryAddRequest, error) {
	var none protocol.MemoryAddRequest
	f, err := input.Decode(w, r, a.d.BodyLimit)
	if err != nil {
		return none, err
	}
	content, err := contentField(f)
	if err != nil {
		return none, err
	}
	o, err := owner(r)
	if err != nil {
		return none, err
	}
	importance, err := importanceField(f)
	if err != nil {
		return none, err
	}
	source, present, ok := f.Str("source")
	if !ok {
		return none, protocol.Errorf(protocol.Invalid, "Invalid source. Valid values: %s", strings.Join(protocol.Sources, ", "))
	}
	if !present {
		source = protocol.SourceImport // the original's default for this route
	}
	return protocol.MemoryAddRequest{MemoryOwner: o, Content: content, Importance: importance, Source: source}, nil
}

// contentField is the required, non-blank content of a frame.
func contentField(f input.Fields) (string, error) {
	content, _, ok := f.Str("content")
	if !ok || strings.TrimSpace(content) == "" {
		return "", protocol.Errorf(protocol.Invalid, "content is required")
	}
	return content, nil
}

// numericImportance maps the web client's numeric importance (1-4) onto
// the server's names of the same rank.
var numericImportance = map[int]string{
	1: protocol.ImportanceTemporary, 2: protocol.ImportanceNormal, 3: protocol.ImportanceImportant, 4: protocol.ImportanceCritical,
}

func importanceField(f input.Fields) (string, error) {
	raw, found := f["importance"]
	if !found || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil // the store validates the name
	}
	var n int
	if json.Unmarshal(raw, &n) == nil {
		if v, ok := numericImportance[n]; ok {
			return v, nil
		}
	}
	return "", protocol.Errorf(protocol.Invalid, "Invalid importance %s. Valid values: %s", raw, strings.Join(protocol.Importances, ", "))
}

// frameRequest reads the {id} segment and the workspace query.
func frameRequest(_ http.ResponseWriter, r *http.Request) (protocol.MemoryFrameRequest, error) {
	id := chi.URLParam(r, "id")
	if !protocol.ValidID(id) {
		return protocol.MemoryFrameRequest{}, protocol.Errorf(protocol.Invalid, "Invalid frame ID")
	}
	o, err := owner(r)
	return protocol.MemoryFrameRequest{MemoryOwner: o, ID: id}, err
}

// PUT /api/memory/frames/:id {content, importance?}
func (a api) update(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, a.edit, protocol.UpdateFrame, http.StatusOK, func(rep protocol.MemoryFrameReply) any {
		return struct {
			frame
			Updated bool `json:"updated"`
		}{shape(rep.Frame, false), true}
	})
}

func (a api) edit(w http.ResponseWriter, r *http.Request) (protocol.MemoryUpdateRequest, error) {
	var none protocol.MemoryUpdateRequest
	fr, err := frameRequest(w, r)
	if err != nil {
		return none, err
	}
	f, err := input.Decode(w, r, a.d.BodyLimit)
	if err != nil {
		return none, err
	}
	content, err := contentField(f)
	if err != nil {
		return none, err
	}
	importance, err := importanceField(f)
	if err != nil {
		return none, err
	}
	return protocol.MemoryUpdateRequest{MemoryFrameRequest: fr, Content: content, Importance: importance}, nil
}

// DELETE /api/memory/frames/:id
func (a api) remove(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, frameRequest, protocol.DeleteFrame, http.StatusOK, func(rep protocol.MemoryFrameReply) any {
		return struct {
			Deleted bool   `json:"deleted"`
			FrameID string `json:"frameId"`
		}{true, rep.Frame.ID}
	})
}

// PATCH /api/memory/frames/:id/access
func (a api) access(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, frameRequest, protocol.AccessFrame, http.StatusOK, func(rep protocol.MemoryFrameReply) any {
		return struct {
			AccessCount int `json:"accessCount"`
		}{rep.Frame.AccessCount}
	})
}

// GET /api/memory/search?q=&scope=&workspace=&limit=&since=&until=&profile=
func (a api) search(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, searchQuery, protocol.QueryMemory, http.StatusOK,
		func(rep protocol.MemoryFramesReply) any { return list(rep.Frames, true) })
}

func searchQuery(_ http.ResponseWriter, r *http.Request) (protocol.MemoryQueryRequest, error) {
	q := r.URL.Query()
	if q.Get("q") == "" {
		return protocol.MemoryQueryRequest{}, protocol.Errorf(protocol.Invalid, "q (query) parameter is required")
	}
	o, err := owner(r)
	if err != nil {
		return protocol.MemoryQueryRequest{}, err
	}
	scope := q.Get("scope")
	if scope != protocol.MindPersonal && scope != protocol.MindWorkspace {
		scope = "all" // "global" and anything else, as the original
	}
	return protocol.MemoryQueryRequest{MemoryOwner: o, Query: q.Get("q"), Scope: scope, Profile: q.Get("profile"),
		Limit: parseLimit(q.Get("limit"), defaultSearch), Since: q.Get("since"), Until: q.Get("until")}, nil
}

// GET /api/memory/stats?workspace=
func (a api) stats(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, func(_ http.ResponseWriter, r *http.Request) (protocol.MemoryStatsRequest, error) {
		o, err := owner(r)
		return protocol.MemoryStatsRequest{MemoryOwner: o}, err
	}, protocol.CountFrames, http.StatusOK, nil)
}

// parseLimit reads a limit like JavaScript's parseInt (leading digits
// count: "10abc" is 10); anything unusable or below 1 is def.
func parseLimit(s string, def int) int {
	s = strings.TrimSpace(s)
	end := 0
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	n, err := strconv.Atoi(s[:end])
	if err != nil || n < 1 {
		return def
	}
	return n
}
