// Package commandapi serves the slash-command routes (contract §5) by
// asking the command service over NATS: running a command out of band and
// listing the catalogue for autocomplete.
package commandapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/forward"
	"github.com/waggle-os/core/services/gateway/internal/input"
	"github.com/waggle-os/core/services/gateway/internal/respond"
	"github.com/waggle-os/core/services/gateway/internal/teamauth"
)

// commandSession is the session id the original used for commands run
// outside a chat (reference §3.3).
const commandSession = "command"

// Mount adds the routes to r (mounted at /api).
func Mount(r chi.Router, d forward.Deps) {
	h := handlers{d: d}
	r.Post("/commands/execute", h.execute)
	r.Get("/commands", h.list)
}

type handlers struct{ d forward.Deps }

// executeReply is {result, command}; command is echoed as sent.
type executeReply struct {
	Result  string `json:"result"`
	Command string `json:"command"`
}

// execute runs one command. Reroute results are returned raw (with the
// AGENT_LOOP_REROUTE:: prefix), as the original did and its tests assert;
// to have them run by the model, send the command through /api/chat.
func (h handlers) execute(w http.ResponseWriter, r *http.Request) {
	req, err := h.command(w, r)
	if err != nil {
		respond.Error(w, h.d.Log, err)
		return
	}
	if rep, ok := forward.Call(h.d, w, r, protocol.ExecuteCommand, req); ok {
		respond.JSON(w, http.StatusOK, executeReply{Result: rep.Result, Command: req.Command})
	}
}

// command reads {command, workspaceId?}; workspaceId comes resolved.
func (h handlers) command(w http.ResponseWriter, r *http.Request) (protocol.CommandRequest, error) {
	f, err := input.Decode(w, r, h.d.BodyLimit)
	if err != nil {
		return protocol.CommandRequest{}, err
	}
	cmd, _, ok := f.Str("command")
	if !ok || cmd == "" {
		return protocol.CommandRequest{}, protocol.Errorf(protocol.Invalid, "command is required")
	}
	// The workspace the authorization step resolved (default "default").
	sc, _ := teamauth.ScopeFrom(r.Context())
	if err := input.CheckSegment("workspaceId", sc.Workspace); err != nil {
		return protocol.CommandRequest{}, err
	}
	return protocol.CommandRequest{Command: cmd, Workspace: sc.Workspace, Session: commandSession, User: sc.User}, nil
}

// list answers [{name, aliases, usage, description}]; ?q= narrows it to
// commands whose name or alias contains q.
func (h handlers) list(w http.ResponseWriter, r *http.Request) {
	forward.Serve(h.d, w, r, func(_ http.ResponseWriter, r *http.Request) (protocol.CommandListRequest, error) {
		return protocol.CommandListRequest{Query: r.URL.Query().Get("q")}, nil
	}, protocol.ListCommands, http.StatusOK, func(rep protocol.CommandList) any { return forward.OrEmpty(rep.Commands) })
}
