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
	"github.com/waggle-os/core/services/gateway/internal/httpx"
)

// Mount adds the routes to r (mounted at /api).
func Mount(r chi.Router, d httpx.Deps) {
	h := handlers{d}
	r.Get("/approval/pending", h.pending)
	r.Get("/approval/grants", h.grants)
	r.Delete("/approval/grants/{id}", h.revoke)
	r.Post("/approval/grants/clear", h.clear)
	r.Post("/approval/{requestId}", h.decide)
}

type handlers struct{ d httpx.Deps }

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
	f, err := httpx.DecodeBody(w, r, h.d.BodyLimit)
	if err != nil {
		httpx.WriteError(w, h.d.Log, err)
		return
	}
	approved, ok := boolField(f, "approved", false)
	if !ok {
		httpx.WriteError(w, h.d.Log, protocol.Errorf(http.StatusBadRequest, "approved must be a boolean"))
		return
	}
	always, ok := boolField(f, "always", true)
	if !ok {
		httpx.WriteError(w, h.d.Log, protocol.Errorf(http.StatusBadRequest, "always must be a boolean"))
		return
	}
	source, present, err := f.OptString("sourceWorkspaceId")
	if err != nil {
		httpx.WriteError(w, h.d.Log, err)
		return
	}
	var sourcePtr *string
	if present {
		sourcePtr = &source
	}
	id := chi.URLParam(r, "requestId")
	if !protocol.ValidID(id) {
		// Such an id can never have been issued.
		httpx.WriteError(w, h.d.Log, &protocol.Error{Status: http.StatusNotFound, Message: "No pending approval with that ID"})
		return
	}
	rep, ok := httpx.Call[protocol.ApprovalDecideReply](h.d, w, r, protocol.SubjApprovalDecide, protocol.ApprovalDecideRequest{
		RequestID: id, Approved: approved, Always: always, SourceWorkspaceID: sourcePtr,
	})
	if !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusOK, decideResponse{OK: true, RequestID: rep.RequestID, Approved: rep.Approved, Always: rep.Always})
}

// boolField reads a boolean field. A missing (or, when optional, null)
// field is false; optional=false makes missing and null invalid too.
func boolField(f httpx.Fields, key string, optional bool) (v, ok bool) {
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
	rep, ok := httpx.Call[protocol.ApprovalPendingReply](h.d, w, r, protocol.SubjApprovalPending, protocol.Empty{})
	if !ok {
		return
	}
	items := make([]pendingItem, len(rep.Pending))
	for i, p := range rep.Pending {
		items[i] = pendingItem{RequestID: p.RequestID, ToolName: p.ToolName, Input: p.Input, Timestamp: p.Timestamp}
	}
	httpx.WriteJSON(w, http.StatusOK, struct {
		Pending []pendingItem `json:"pending"`
		Count   int           `json:"count"`
	}{items, len(items)})
}

// grants is GET /approval/grants.
func (h handlers) grants(w http.ResponseWriter, r *http.Request) {
	rep, ok := httpx.Call[protocol.ApprovalGrantsReply](h.d, w, r, protocol.SubjApprovalGrants, protocol.Empty{})
	if !ok {
		return
	}
	if rep.Grants == nil {
		rep.Grants = []protocol.ApprovalGrant{}
	}
	httpx.WriteJSON(w, http.StatusOK, struct {
		Grants []protocol.ApprovalGrant `json:"grants"`
		Count  int                      `json:"count"`
	}{rep.Grants, len(rep.Grants)})
}

// revoke is DELETE /approval/grants/:id.
func (h handlers) revoke(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if _, ok := httpx.Call[protocol.Empty](h.d, w, r, protocol.SubjApprovalRevoke, protocol.ApprovalRevokeRequest{ID: id}); !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusOK, struct {
		OK bool   `json:"ok"`
		ID string `json:"id"`
	}{true, id})
}

// clear is POST /approval/grants/clear.
func (h handlers) clear(w http.ResponseWriter, r *http.Request) {
	if _, ok := httpx.Call[protocol.Empty](h.d, w, r, protocol.SubjApprovalClear, protocol.Empty{}); !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusOK, struct {
		OK bool `json:"ok"`
	}{true})
}
