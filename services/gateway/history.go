package gateway

import (
	"net/http"
	"strconv"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/forward"
	"github.com/waggle-os/core/services/gateway/internal/input"
	"github.com/waggle-os/core/services/gateway/internal/respond"
	"github.com/waggle-os/core/services/gateway/internal/teamauth"
)

// sessionQuery reads ?workspace= (as the authorization step resolved it)
// and ?session= with the chat defaults (session defaults to the
// workspace, the workspace to "default"), both checked with the
// safe-segment rule.
func sessionQuery(_ http.ResponseWriter, r *http.Request) (protocol.SessionRef, error) {
	q := r.URL.Query()
	ref := protocol.SessionRef{Workspace: "default", Session: "default"}
	if sc, _ := teamauth.ScopeFrom(r.Context()); sc.Field != "" {
		ref.Workspace = sc.Workspace
		ref.Session = ref.Workspace
		if err := input.CheckSegment(sc.Field, ref.Workspace); err != nil {
			return ref, err
		}
	}
	if q.Has("session") {
		ref.Session = q.Get("session")
		if err := input.CheckSegment("session", ref.Session); err != nil {
			return ref, err
		}
	}
	return ref, nil
}

type historyMessage struct {
	ID        string `json:"id"`
	Role      string `json:"role"`
	Content   string `json:"content"`
	Timestamp string `json:"timestamp"`
	// TurnID and Error (a failed or stopped turn's reason) let a client
	// show a reloaded reply as it looked live; both are additions to the
	// contract's shape and absent when not stored.
	TurnID string `json:"turnId,omitempty"`
	Error  string `json:"error,omitempty"`
}

type historyResponse struct {
	SessionID string           `json:"sessionId"`
	Messages  []historyMessage `json:"messages"`
	Count     int              `json:"count"`
	// Tools are the session's stored tool events in file order (each with
	// its turnId), absent when there are none: the web chat draws a
	// reloaded turn's tool calls, denials and files from them.
	Tools []protocol.ToolEvent `json:"tools,omitempty"`
}

// history is GET /api/history: the session's messages with the timestamps
// they were stored with.
func (s *Service) history(w http.ResponseWriter, r *http.Request) {
	ref, err := sessionQuery(w, r)
	if err != nil {
		respond.Error(w, s.log, err)
		return
	}
	rep, ok := forward.Call(s.deps(), w, r, protocol.ReadHistory, protocol.HistoryRequest{SessionRef: ref, Tools: true})
	if !ok {
		return
	}
	out := historyResponse{SessionID: ref.Session, Messages: make([]historyMessage, 0, len(rep.Messages))}
	for _, m := range rep.Messages {
		out.Messages = append(out.Messages, historyMessage{
			ID: "hist-" + strconv.Itoa(len(out.Messages)), Role: m.Role, Content: m.Content, Timestamp: m.Timestamp,
			TurnID: m.TurnID, Error: m.Error,
		})
	}
	out.Count = len(out.Messages)
	out.Tools = rep.Tools
	respond.JSON(w, http.StatusOK, out)
}

// deps is what the route groups (and the routes here that only forward to
// an endpoint) need from the gateway.
func (s *Service) deps() forward.Deps {
	return forward.Deps{NC: s.nc, Log: s.log, BodyLimit: s.cfg.BodyLimit, Timeout: s.cfg.RequestTimeout, DataDir: s.cfg.DataDir}
}

// clearHistory is DELETE /api/chat/history: every cached copy of the
// session is dropped on every process; the file stays (contract §1).
func (s *Service) clearHistory(w http.ResponseWriter, r *http.Request) {
	forward.Serve(s.deps(), w, r, func(w http.ResponseWriter, r *http.Request) (protocol.ClearRequest, error) {
		ref, err := sessionQuery(w, r)
		return protocol.ClearRequest{SessionRef: ref}, err
	}, protocol.EvictSession, http.StatusOK, func(rep protocol.ClearReply) any {
		return struct {
			OK      bool   `json:"ok"`
			Cleared string `json:"cleared"`
		}{true, rep.Cleared}
	})
}
