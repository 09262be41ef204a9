// Package approvalapi serves the tool-approval routes (contract §4) by
// asking the approval service over NATS. Any gateway can resolve any
// approval: the pending ones live in a JetStream KV bucket, not in the
// process that streams the turn.
package approvalapi

import (
	"encoding/json"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/forward"
	"github.com/waggle-os/core/services/gateway/internal/input"
	"github.com/waggle-os/core/services/gateway/internal/respond"
)

// Mount adds the routes to r (mounted at /api).
func Mount(r chi.Router, d forward.Deps) {
	h := handlers{d}
	r.Get("/approval/pending", h.pending)
	r.Get("/approval/grants", h.grants)
	r.Delete("/approval/grants/{id}", h.revoke)
	r.Post("/approval/grants/clear", h.clear)
	r.Post("/approval/{requestId}", h.decide)
}

type handlers struct{ d forward.Deps }

type decideResponse struct {
	OK        bool   `json:"ok"`
	RequestID string `json:"requestId"`
	Approved  bool   `json:"approved"`
	Always    bool   `json:"always"`
}

// decide is POST /approval/:requestId {approved, always?, reason?,
// sourceWorkspaceId?}. Unlike the original, approved must be a real
// boolean (DESIGN §9): "false" or 1 must not approve anything.
func (h handlers) decide(w http.ResponseWriter, r *http.Request) {
	forward.Serve(h.d, w, r, h.decision, protocol.DecideApproval, http.StatusOK, func(rep protocol.ApprovalDecideReply) any {
		return decideResponse{OK: true, RequestID: rep.RequestID, Approved: rep.Approved, Always: rep.Always}
	})
}

// errNoPending answers an approval id that is not pending (or that the
// caller may not see).
var errNoPending = &protocol.Error{Kind: protocol.NotFound, Message: "No pending approval with that ID"}

// decision reads a decision: the body's fields, the id, and on a team
// server the caller's right to decide it.
func (h handlers) decision(w http.ResponseWriter, r *http.Request) (protocol.ApprovalDecideRequest, error) {
	var none protocol.ApprovalDecideRequest
	f, err := input.Decode(w, r, h.d.BodyLimit)
	if err != nil {
		return none, err
	}
	approved, ok := boolField(f, "approved", false)
	if !ok {
		return none, protocol.Errorf(protocol.Invalid, "approved must be a boolean")
	}
	always, ok := boolField(f, "always", true)
	if !ok {
		return none, protocol.Errorf(protocol.Invalid, "always must be a boolean")
	}
	source, present, err := f.OptString("sourceWorkspaceId")
	if err != nil {
		return none, err
	}
	var sourcePtr *string
	if present {
		sourcePtr = &source
	}
	id := chi.URLParam(r, "requestId")
	if !protocol.ValidID(id) {
		return none, errNoPending // such an id can never have been issued
	}
	if sc := h.scope(r); sc.user != "" {
		// Team server: only a member who may write in the approval's
		// workspace decides it, and an "always" grant stays scoped to that
		// workspace (a null scope would apply in every team's workspaces).
		p, err := h.findPending(r, id)
		if err != nil {
			return none, err
		}
		if p == nil || !sc.visible(p.Workspace) {
			return none, errNoPending
		}
		if err := sc.check(p.Workspace, protocol.ActionWrite); err != nil {
			return none, err
		}
		ws := p.Workspace
		sourcePtr = &ws
	}
	return protocol.ApprovalDecideRequest{RequestID: id, Approved: approved, Always: always, SourceWorkspaceID: sourcePtr}, nil
}

// boolField reads a boolean field. A missing (or, when optional, null)
// field is false; optional=false makes missing and null invalid too.
func boolField(f input.Fields, key string, optional bool) (v, ok bool) {
	raw, found := f[key]
	if !found || string(raw) == "null" {
		return false, optional
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return false, false
	}
	return v, true
}

type pendingItem struct {
	RequestID string          `json:"requestId"`
	ToolName  string          `json:"toolName"`
	Input     json.RawMessage `json:"input"`
	Timestamp int64           `json:"timestamp"`
}

// pending is GET /approval/pending: every runner's waiting approvals.
func (h handlers) pending(w http.ResponseWriter, r *http.Request) {
	rep, ok := forward.Call(h.d, w, r, protocol.ListPendingApprovals, protocol.Empty{})
	if !ok {
		return
	}
	sc := h.scope(r)
	items := make([]pendingItem, 0, len(rep.Pending))
	for _, p := range rep.Pending {
		if sc.visible(p.Workspace) {
			items = append(items, pendingItem{RequestID: p.RequestID, ToolName: p.ToolName, Input: p.Input, Timestamp: p.Timestamp})
		}
	}
	respond.JSON(w, http.StatusOK, struct {
		Pending []pendingItem `json:"pending"`
		Count   int           `json:"count"`
	}{items, len(items)})
}

// grants is GET /approval/grants.
func (h handlers) grants(w http.ResponseWriter, r *http.Request) {
	rep, ok := forward.Call(h.d, w, r, protocol.ListGrants, protocol.Empty{})
	if !ok {
		return
	}
	rep.Grants = h.visibleGrants(r, rep.Grants)
	respond.JSON(w, http.StatusOK, struct {
		Grants []protocol.ApprovalGrant `json:"grants"`
		Count  int                      `json:"count"`
	}{rep.Grants, len(rep.Grants)})
}

// visibleGrants keeps the grants the user may see: on a team server those
// scoped to a workspace the user can read (grants for every workspace are
// an operator's matter); locally all of them.
func (h handlers) visibleGrants(r *http.Request, gs []protocol.ApprovalGrant) []protocol.ApprovalGrant {
	sc := h.scope(r)
	out := make([]protocol.ApprovalGrant, 0, len(gs))
	for _, g := range gs {
		if sc.user == "" || g.SourceWorkspaceID != nil && sc.visible(*g.SourceWorkspaceID) {
			out = append(out, g)
		}
	}
	return out
}

// writableGrant answers 404 (or the teams service's 403) unless the user
// may change grant id; locally every grant is writable.
func (h handlers) writableGrant(w http.ResponseWriter, r *http.Request, id string) bool {
	sc := h.scope(r)
	if sc.user == "" {
		return true
	}
	rep, ok := forward.Call(h.d, w, r, protocol.ListGrants, protocol.Empty{})
	if !ok {
		return false
	}
	for _, g := range rep.Grants {
		if g.ID == id && g.SourceWorkspaceID != nil && sc.visible(*g.SourceWorkspaceID) {
			if err := sc.check(*g.SourceWorkspaceID, protocol.ActionWrite); err != nil {
				respond.Error(w, h.d.Log, err)
				return false
			}
			return true
		}
	}
	respond.Error(w, h.d.Log, &protocol.Error{Kind: protocol.NotFound, Message: "Grant not found"})
	return false
}

// revoke is DELETE /approval/grants/:id.
func (h handlers) revoke(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if !h.writableGrant(w, r, id) {
		return
	}
	if _, ok := forward.Call(h.d, w, r, protocol.RevokeGrant, protocol.ApprovalRevokeRequest{ID: id}); !ok {
		return
	}
	respond.JSON(w, http.StatusOK, struct {
		OK bool   `json:"ok"`
		ID string `json:"id"`
	}{true, id})
}

// clear is POST /approval/grants/clear.
func (h handlers) clear(w http.ResponseWriter, r *http.Request) {
	if sc := h.scope(r); sc.user != "" {
		// Team server: clear only the grants this user may change.
		rep, ok := forward.Call(h.d, w, r, protocol.ListGrants, protocol.Empty{})
		if !ok {
			return
		}
		for _, g := range h.visibleGrants(r, rep.Grants) {
			if sc.check(*g.SourceWorkspaceID, protocol.ActionWrite) != nil {
				continue
			}
			if _, ok := forward.Call(h.d, w, r, protocol.RevokeGrant, protocol.ApprovalRevokeRequest{ID: g.ID}); !ok {
				return
			}
		}
	} else if _, ok := forward.Call(h.d, w, r, protocol.ClearGrants, protocol.Empty{}); !ok {
		return
	}
	respond.JSON(w, http.StatusOK, struct {
		OK bool `json:"ok"`
	}{true})
}
