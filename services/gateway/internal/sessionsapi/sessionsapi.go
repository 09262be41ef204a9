// Package sessionsapi serves the workspaces and sessions routes (contract
// §6) by asking the session store over NATS. Handlers only check what the
// HTTP layer owns (path segments, body and query types) and pass the rest
// on; the store owns existence checks and their order.
package sessionsapi

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

// Search limit of the contract: default 20, at most 50.
const (
	defaultSearchLimit = 20
	maxSearchLimit     = 50
)

type api struct{ d forward.Deps }

// Mount adds the routes to r (mounted at /api).
func Mount(r chi.Router, d forward.Deps) {
	a := api{d}
	// chi needs one parameter name per path position, so the workspace
	// segment is {id} everywhere; errors still name it as the original did.
	r.Get("/workspaces", a.listWorkspaces)
	r.Post("/workspaces", a.createWorkspace)
	r.Get("/workspaces/{id}", a.getWorkspace)
	r.Patch("/workspaces/{id}", a.updateWorkspace)
	r.Delete("/workspaces/{id}", a.deleteWorkspace)

	r.Get("/workspaces/{id}/sessions", a.listSessions)
	r.Post("/workspaces/{id}/sessions", a.createSession)
	r.Get("/workspaces/{id}/sessions/search", a.searchSessions)
	r.Get("/workspaces/{id}/sessions/{sessionId}/export", a.exportSession)
	r.Get("/workspaces/{id}/sessions/{sessionId}/timeline", a.timeline)
	r.Post("/workspaces/{id}/sessions/{sessionId}/branch", a.branchSession)

	r.Patch("/sessions/{sessionId}", a.renameSession)
	r.Delete("/sessions/{sessionId}", a.deleteSession)
	r.Get("/sessions/{sessionId}/summary", a.sessionSummary)
}

// segment reads a path parameter and applies the safe-segment rule under
// the given name.
func segment(r *http.Request, param, name string) (string, error) {
	v := chi.URLParam(r, param)
	return v, input.CheckSegment(name, v)
}

func (a api) fail(w http.ResponseWriter, err error) { respond.Error(w, a.d.Log, err) }

// ---- workspaces ----

func (a api) listWorkspaces(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, forward.NoInput, protocol.ListWorkspaces, http.StatusOK,
		func(rep protocol.WorkspaceListReply) any {
			for i, doc := range rep.Workspaces {
				rep.Workspaces[i] = withoutMCPServers(doc)
			}
			return forward.OrEmpty(rep.Workspaces)
		})
}

func (a api) createWorkspace(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, a.workspaceCreation, protocol.CreateWorkspace, http.StatusCreated, workspaceDoc)
}

func (a api) getWorkspace(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, workspaceRef, protocol.GetWorkspaceDoc, http.StatusOK, workspaceDoc)
}

func (a api) updateWorkspace(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, a.workspaceUpdate, protocol.UpdateWorkspace, http.StatusOK, workspaceDoc)
}

func (a api) deleteWorkspace(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, workspaceRef, protocol.DeleteWorkspace, http.StatusOK, nil)
}

// workspaceDoc is the reply of the workspace routes: the document itself,
// without its MCP servers.
func workspaceDoc(rep protocol.WorkspaceDocReply) any { return withoutMCPServers(rep.Workspace) }

// withoutMCPServers drops mcpServers from a workspace doc: its entries
// hold secrets (env, headers) and are read only through their own route
// (mcpapi), which only a trusted caller (a team's admin) may use; anyone
// who may read the workspace reads the rest.
func withoutMCPServers(doc json.RawMessage) json.RawMessage {
	var fields map[string]json.RawMessage
	if json.Unmarshal(doc, &fields) != nil {
		return doc
	}
	if _, ok := fields[protocol.MCPServersField]; !ok {
		return doc
	}
	delete(fields, protocol.MCPServersField)
	out, err := json.Marshal(fields)
	if err != nil {
		return doc
	}
	return out
}

func workspaceRef(_ http.ResponseWriter, r *http.Request) (protocol.WorkspaceRequest, error) {
	id, err := segment(r, "id", "id")
	return protocol.WorkspaceRequest{Workspace: id}, err
}

func (a api) workspaceCreation(w http.ResponseWriter, r *http.Request) (protocol.WorkspaceCreateRequest, error) {
	fields, err := a.bodyObject(w, r)
	return protocol.WorkspaceCreateRequest{Fields: fields}, err
}

func (a api) workspaceUpdate(w http.ResponseWriter, r *http.Request) (protocol.WorkspaceUpdateRequest, error) {
	ref, err := workspaceRef(w, r)
	if err != nil {
		return protocol.WorkspaceUpdateRequest{}, err
	}
	fields, err := a.bodyObject(w, r)
	return protocol.WorkspaceUpdateRequest{Workspace: ref.Workspace, Fields: fields}, err
}

// bodyObject decodes the body (empty is {}) and re-encodes it for the store.
func (a api) bodyObject(w http.ResponseWriter, r *http.Request) (json.RawMessage, error) {
	f, err := input.Decode(w, r, a.d.BodyLimit)
	if err != nil {
		return nil, err
	}
	return json.Marshal(f)
}

// ---- sessions of a workspace ----

func (a api) listSessions(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, sessionListing, protocol.ListSessions, http.StatusOK,
		func(rep protocol.SessionListReply) any { return forward.OrEmpty(rep.Sessions) })
}

func (a api) createSession(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, a.sessionCreation, protocol.CreateSession, http.StatusCreated, nil)
}

func (a api) searchSessions(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, sessionSearch, protocol.SearchSessions, http.StatusOK,
		func(rep protocol.SessionSearchReply) any { return forward.OrEmpty(rep.Results) })
}

func sessionListing(_ http.ResponseWriter, r *http.Request) (protocol.SessionListRequest, error) {
	ws, err := segment(r, "id", "workspaceId")
	return protocol.SessionListRequest{Workspace: ws, HideEmpty: r.URL.Query().Get("hideEmpty") == "true"}, err
}

func (a api) sessionCreation(w http.ResponseWriter, r *http.Request) (protocol.SessionCreateRequest, error) {
	ws, err := segment(r, "id", "workspaceId")
	if err != nil {
		return protocol.SessionCreateRequest{}, err
	}
	f, err := input.Decode(w, r, a.d.BodyLimit)
	return protocol.SessionCreateRequest{Workspace: ws, Title: f["title"]}, err
}

func sessionSearch(_ http.ResponseWriter, r *http.Request) (protocol.SessionSearchRequest, error) {
	ws, err := segment(r, "id", "workspaceId")
	q := r.URL.Query()
	return protocol.SessionSearchRequest{Workspace: ws, Query: q.Get("q"), Limit: parseLimit(q.Get("limit"))}, err
}

// parseLimit reads the search limit like JavaScript's parseInt (leading
// digits count: "10abc" is 10); anything unusable or below 1 is the
// default, and it is capped at 50.
func parseLimit(s string) int {
	s = strings.TrimSpace(s)
	end := 0
	if end < len(s) && (s[end] == '+' || s[end] == '-') {
		end++
	}
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	n, err := strconv.Atoi(s[:end])
	if err != nil || n < 1 {
		// Strings of digits too long for an int are far above the cap.
		if err != nil && end > 1 && s[0] != '-' {
			return maxSearchLimit
		}
		return defaultSearchLimit
	}
	return min(n, maxSearchLimit)
}

func sessionRef(_ http.ResponseWriter, r *http.Request) (protocol.SessionRef, error) {
	ws, err := segment(r, "id", "workspaceId")
	if err != nil {
		return protocol.SessionRef{}, err
	}
	s, err := segment(r, "sessionId", "sessionId")
	return protocol.SessionRef{Workspace: ws, Session: s}, err
}

func (a api) exportSession(w http.ResponseWriter, r *http.Request) {
	ref, err := sessionRef(w, r)
	if err != nil {
		a.fail(w, err)
		return
	}
	rep, ok := forward.Call(a.d, w, r, protocol.ExportSession, ref)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(rep.Markdown))
}

func (a api) timeline(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, sessionRef, protocol.GetTimeline, http.StatusOK, func(rep protocol.SessionTimelineReply) any {
		if len(rep.Events) == 0 {
			return json.RawMessage("[]")
		}
		return rep.Events
	})
}

// branchSession is POST …/sessions/{sessionId}/branch {"at": n}: a new
// session holding the first n messages, where the user's edit of message
// n is sent next (docs/sessions.md#branches). 201 with the new session's
// listing entry (its branchOf says where it came from).
func (a api) branchSession(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, a.branching, protocol.BranchSession, http.StatusCreated, nil)
}

func (a api) branching(w http.ResponseWriter, r *http.Request) (protocol.SessionBranchRequest, error) {
	ref, err := sessionRef(w, r)
	if err != nil {
		return protocol.SessionBranchRequest{}, err
	}
	f, err := input.Decode(w, r, a.d.BodyLimit)
	if err != nil {
		return protocol.SessionBranchRequest{}, err
	}
	for k := range f {
		if k != "at" {
			return protocol.SessionBranchRequest{}, protocol.Errorf(protocol.Invalid, "unknown field %s", k)
		}
	}
	var at int
	if raw, ok := f["at"]; !ok || json.Unmarshal(raw, &at) != nil || at < 0 {
		return protocol.SessionBranchRequest{}, protocol.Errorf(protocol.Invalid, "at must be the index of the user message being edited (a whole number from 0)")
	}
	return protocol.SessionBranchRequest{SessionRef: ref, At: at}, nil
}

// ---- sessions by id ----

// locator reads :sessionId and the optional ?workspace= (as the
// authorization step resolved it), both checked.
func locator(_ http.ResponseWriter, r *http.Request) (protocol.SessionLocator, error) {
	s, err := segment(r, "sessionId", "sessionId")
	if err != nil {
		return protocol.SessionLocator{}, err
	}
	loc := protocol.SessionLocator{Session: s}
	if sc, _ := teamauth.ScopeFrom(r.Context()); sc.Field != "" {
		loc.Workspace = sc.Workspace
		if err := input.CheckSegment(sc.Field, loc.Workspace); err != nil {
			return loc, err
		}
	}
	return loc, nil
}

func (a api) renameSession(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, a.renaming, protocol.RenameSession, http.StatusOK, nil)
}

func (a api) renaming(w http.ResponseWriter, r *http.Request) (protocol.SessionRenameRequest, error) {
	loc, err := locator(w, r)
	if err != nil {
		return protocol.SessionRenameRequest{}, err
	}
	f, err := input.Decode(w, r, a.d.BodyLimit)
	if err != nil {
		return protocol.SessionRenameRequest{}, err
	}
	title, _, err := f.OptString("title")
	if err == nil && title == "" {
		err = protocol.Errorf(protocol.Invalid, "title is required")
	}
	return protocol.SessionRenameRequest{SessionLocator: loc, Title: title}, err
}

func (a api) deleteSession(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, locator, protocol.DeleteSession, http.StatusOK, nil)
}

func (a api) sessionSummary(w http.ResponseWriter, r *http.Request) {
	forward.Serve(a.d, w, r, locator, protocol.SummarizeSession, http.StatusOK, nil)
}
