// Package commandapi serves the slash-command routes (contract §5) by
// asking the command service over NATS: running a command out of band and
// listing the catalogue for autocomplete.
package commandapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/httpx"
)

// commandSession is the session id the original used for commands run
// outside a chat (reference §3.3).
const commandSession = "command"

// Mount adds the routes to r (mounted at /api).
func Mount(r chi.Router, d httpx.Deps) {
	h := handlers{d: d}
	r.Post("/commands/execute", h.execute)
	r.Get("/commands", h.list)
}

type handlers struct{ d httpx.Deps }

// executeReply is {result, command}; command is echoed as sent.
type executeReply struct {
	Result  string `json:"result"`
	Command string `json:"command"`
}

// execute runs one command. Reroute results are returned raw (with the
// AGENT_LOOP_REROUTE:: prefix), as the original did and its tests assert;
// to have them run by the model, send the command through /api/chat.
func (h handlers) execute(w http.ResponseWriter, r *http.Request) {
	f, err := httpx.DecodeBody(w, r, h.d.BodyLimit)
	if err != nil {
		httpx.WriteError(w, h.d.Log, err)
		return
	}
	cmd, _, ok := f.Str("command")
	if !ok || cmd == "" {
		httpx.WriteJSON(w, http.StatusBadRequest, httpx.ErrorBody{Error: "command is required"})
		return
	}
	ws, present, err := f.OptString("workspaceId")
	if err != nil {
		httpx.WriteError(w, h.d.Log, err)
		return
	}
	if !present {
		ws = "default"
	}
	if err := httpx.CheckSegment("workspaceId", ws); err != nil {
		httpx.WriteError(w, h.d.Log, err)
		return
	}
	rep, ok := httpx.Call[protocol.CommandReply](h.d, w, r, protocol.SubjCommandExecute,
		protocol.CommandRequest{Command: cmd, Workspace: ws, Session: commandSession})
	if !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusOK, executeReply{Result: rep.Result, Command: cmd})
}

// list answers [{name, aliases, usage, description}]; ?q= narrows it to
// commands whose name or alias contains q.
func (h handlers) list(w http.ResponseWriter, r *http.Request) {
	rep, ok := httpx.Call[protocol.CommandList](h.d, w, r, protocol.SubjCommandList,
		protocol.CommandListRequest{Query: r.URL.Query().Get("q")})
	if !ok {
		return
	}
	if rep.Commands == nil {
		rep.Commands = []protocol.CommandInfo{}
	}
	httpx.WriteJSON(w, http.StatusOK, rep.Commands)
}
