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
	f, err := input.Decode(w, r, h.d.BodyLimit)
	if err != nil {
		respond.Error(w, h.d.Log, err)
		return
	}
	cmd, _, ok := f.Str("command")
	if !ok || cmd == "" {
		respond.Fail(w, protocol.Invalid, "", "command is required")
		return
	}
	ws, present, err := f.OptString("workspaceId")
	if err != nil {
		respond.Error(w, h.d.Log, err)
		return
	}
	if !present {
		ws = "default"
	}
	if err := input.CheckSegment("workspaceId", ws); err != nil {
		respond.Error(w, h.d.Log, err)
		return
	}
	rep, ok := forward.Call(h.d, w, r, protocol.ExecuteCommand,
		protocol.CommandRequest{Command: cmd, Workspace: ws, Session: commandSession})
	if !ok {
		return
	}
	respond.JSON(w, http.StatusOK, executeReply{Result: rep.Result, Command: cmd})
}

// list answers [{name, aliases, usage, description}]; ?q= narrows it to
// commands whose name or alias contains q.
func (h handlers) list(w http.ResponseWriter, r *http.Request) {
	rep, ok := forward.Call(h.d, w, r, protocol.ListCommands,
		protocol.CommandListRequest{Query: r.URL.Query().Get("q")})
	if !ok {
		return
	}
	if rep.Commands == nil {
		rep.Commands = []protocol.CommandInfo{}
	}
	respond.JSON(w, http.StatusOK, rep.Commands)
}
