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
	"github.com/waggle-os/core/services/gateway/internal/respond"
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
}

func (a api) fail(w http.ResponseWriter, err error) { respond.Error(w, a.d.Log, err) }

// owner is the minds a request reaches: ?workspace= (or ?workspaceId=,
// as the original accepts) and, on a team server, the user's own personal
// mind.
func owner(r *http.Request, workspace string) (protocol.MemoryOwner, error) {
	o := protocol.MemoryOwner{Workspace: workspace}
	if u, ok := teamauth.UserFrom(r.Context()); ok {
		o.User = u.ID
	}
	if o.Workspace != "" {
		if err := input.CheckSegment("workspace", o.Workspace); err != nil {
			return o, err
		}
	}
	return o, nil
}

func queryWorkspace(r *http.Request) string {
	q := r.URL.Query()
	if q.Has("workspace") {
		return q.Get("workspace")
	}
	return q.Get("workspaceId")
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
	o, err := owner(r, queryWorkspace(r))
	if err != nil {
		a.fail(w, err)
		return
	}
	q := r.URL.Query()
	req := protocol.MemoryFramesRequest{MemoryOwner: o, Limit: parseLimit(q.Get("limit"), defaultFrames), Since: q.Get("since"), Until: q.Get("until")}
	rep, ok := forward.Call(a.d, w, r, protocol.ListFrames, req)
	if ok {
		respond.JSON(w, http.StatusOK, list(rep.Frames, false))
	}
}

// POST /api/memory/frames {content, workspace|workspaceId, importance?, source?}
func (a api) add(w http.ResponseWriter, r *http.Request) {
	f, err := input.Decode(w, r, a.d.BodyLimit)
	if err != nil {
		a.fail(w, err)
		return
	}
	content, _, ok := f.Str("content")
	if !ok || strings.TrimSpace(content) == "" {
		a.fail(w, protocol.Errorf(protocol.Invalid, "content is required"))
		return
	}
	ws, _, _ := f.Str("workspace")
	if ws == "" {
		ws, _, _ = f.Str("workspaceId")
	}
	o, err := owner(r, ws)
	if err != nil {
		a.fail(w, err)
		return
	}
	importance, err := importanceField(f)
	if err != nil {
		a.fail(w, err)
		return
	}
	source, present, ok := f.Str("source")
	if !ok {
		a.fail(w, protocol.Errorf(protocol.Invalid, "Invalid source. Valid values: %s", strings.Join(protocol.Sources, ", ")))
		return
	}
	if !present {
		source = protocol.SourceImport // the original's default for this route
	}
	req := protocol.MemoryAddRequest{MemoryOwner: o, Content: content, Importance: importance, Source: source}
	rep, ok := forward.Call(a.d, w, r, protocol.AddFrame, req)
	if !ok {
		return
	}
	if rep.Duplicate {
		respond.JSON(w, http.StatusOK, struct {
			Saved     bool   `json:"saved"`
			Duplicate bool   `json:"duplicate"`
			FrameID   string `json:"frameId"`
			Mind      string `json:"mind"`
			Message   string `json:"message"`
		}{false, true, rep.Frame.ID, rep.Frame.Mind, "Identical content already exists. Access count updated."})
		return
	}
	respond.JSON(w, http.StatusOK, struct {
		Saved      bool   `json:"saved"`
		FrameID    string `json:"frameId"`
		Mind       string `json:"mind"`
		Importance string `json:"importance"`
		Source     string `json:"source"`
	}{true, rep.Frame.ID, rep.Frame.Mind, rep.Frame.Importance, rep.Frame.Source})
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
func (a api) frameRequest(r *http.Request) (protocol.MemoryFrameRequest, error) {
	id := chi.URLParam(r, "id")
	if !protocol.ValidID(id) {
		return protocol.MemoryFrameRequest{}, protocol.Errorf(protocol.Invalid, "Invalid frame ID")
	}
	o, err := owner(r, queryWorkspace(r))
	return protocol.MemoryFrameRequest{MemoryOwner: o, ID: id}, err
}

// PUT /api/memory/frames/:id {content, importance?}
func (a api) update(w http.ResponseWriter, r *http.Request) {
	fr, err := a.frameRequest(r)
	if err != nil {
		a.fail(w, err)
		return
	}
	f, err := input.Decode(w, r, a.d.BodyLimit)
	if err != nil {
		a.fail(w, err)
		return
	}
	content, _, ok := f.Str("content")
	if !ok || strings.TrimSpace(content) == "" {
		a.fail(w, protocol.Errorf(protocol.Invalid, "content is required"))
		return
	}
	importance, err := importanceField(f)
	if err != nil {
		a.fail(w, err)
		return
	}
	rep, ok := forward.Call(a.d, w, r, protocol.UpdateFrame,
		protocol.MemoryUpdateRequest{MemoryFrameRequest: fr, Content: content, Importance: importance})
	if ok {
		respond.JSON(w, http.StatusOK, struct {
			frame
			Updated bool `json:"updated"`
		}{shape(rep.Frame, false), true})
	}
}

// DELETE /api/memory/frames/:id
func (a api) remove(w http.ResponseWriter, r *http.Request) {
	fr, err := a.frameRequest(r)
	if err != nil {
		a.fail(w, err)
		return
	}
	rep, ok := forward.Call(a.d, w, r, protocol.DeleteFrame, fr)
	if ok {
		respond.JSON(w, http.StatusOK, struct {
			Deleted bool   `json:"deleted"`
			FrameID string `json:"frameId"`
		}{true, rep.Frame.ID})
	}
}

// PATCH /api/memory/frames/:id/access
func (a api) access(w http.ResponseWriter, r *http.Request) {
	fr, err := a.frameRequest(r)
	if err != nil {
		a.fail(w, err)
		return
	}
	rep, ok := forward.Call(a.d, w, r, protocol.AccessFrame, fr)
	if ok {
		respond.JSON(w, http.StatusOK, struct {
			AccessCount int `json:"accessCount"`
		}{rep.Frame.AccessCount})
	}
}

// GET /api/memory/search?q=&scope=&workspace=&limit=&since=&until=
func (a api) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("q") == "" {
		a.fail(w, protocol.Errorf(protocol.Invalid, "q (query) parameter is required"))
		return
	}
	o, err := owner(r, queryWorkspace(r))
	if err != nil {
		a.fail(w, err)
		return
	}
	scope := q.Get("scope")
	if scope != protocol.MindPersonal && scope != protocol.MindWorkspace {
		scope = "all" // "global" and anything else, as the original
	}
	req := protocol.MemoryQueryRequest{MemoryOwner: o, Query: q.Get("q"), Scope: scope,
		Limit: parseLimit(q.Get("limit"), defaultSearch), Since: q.Get("since"), Until: q.Get("until")}
	rep, ok := forward.Call(a.d, w, r, protocol.QueryMemory, req)
	if ok {
		respond.JSON(w, http.StatusOK, list(rep.Frames, true))
	}
}

// GET /api/memory/stats?workspace=
func (a api) stats(w http.ResponseWriter, r *http.Request) {
	o, err := owner(r, queryWorkspace(r))
	if err != nil {
		a.fail(w, err)
		return
	}
	rep, ok := forward.Call(a.d, w, r, protocol.CountFrames, protocol.MemoryStatsRequest{MemoryOwner: o})
	if ok {
		respond.JSON(w, http.StatusOK, rep)
	}
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
