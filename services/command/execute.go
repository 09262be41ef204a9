package command

import (
	"context"
	"fmt"
	"strings"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/command/slash"
)

// memoryResults is how many recalled memories a command shows (reference §3.3).
const memoryResults = 5

// execute runs one slash command. The result is returned as the registry
// produced it, reroute prefix included: the turn runner decides between
// the agent loop and the "requires AI" text, and the HTTP route returns
// the raw text as the original did.
func (s *Service) execute(ctx context.Context, req protocol.CommandRequest) (protocol.CommandReply, error) {
	ws := req.Workspace
	if ws == "" {
		ws = "default"
	}
	if !protocol.ValidID(ws) {
		return protocol.CommandReply{}, protocol.Errorf(protocol.Invalid, "Invalid workspaceId: contains illegal characters")
	}
	return protocol.CommandReply{Result: s.reg.Execute(ctx, req.Command, s.env(ws, req.Session))}, nil
}

// env is what commands may use in this service. Workflows and sub-agents
// are left out (nil) as in the original's command contexts: those commands
// reroute to the agent loop instead.
func (s *Service) env(ws, session string) slash.Env {
	return slash.Env{
		Workspace:      ws,
		Session:        session,
		SearchMemory:   func(ctx context.Context, q string) string { return s.searchMemory(ctx, ws, q) },
		WorkspaceState: func(context.Context) string { return slash.NoWorkspaceState },
		// The workspace's skills are the workflows captured from its turns.
		ListSkills: func(ctx context.Context) []string { return s.listWorkflows(ctx, ws) },
		WebSearch:  func() bool { return webSearchConfigured(s.cfg.DataDir) },
	}
}

// searchMemory asks the session store and formats the first results as a
// numbered list; any failure reads as "Memory search unavailable.".
func (s *Service) searchMemory(ctx context.Context, ws, query string) string {
	rep, err := bus.Call(ctx, s.nc, protocol.SearchMemory,
		protocol.MemorySearchRequest{Workspace: ws, Query: query, Limit: memoryResults}, bus.Within(s.cfg.RequestTimeout))
	if err != nil {
		s.log.Warn("memory search failed", "workspace", ws, "err", err)
		return slash.MemoryUnavailable
	}
	if len(rep.Memories) == 0 {
		return slash.NoMemories
	}
	var b strings.Builder
	for i, m := range rep.Memories {
		if i == memoryResults {
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%d. %s", i+1, m.Content)
	}
	return b.String()
}

// list returns the catalogue for autocomplete. Aliases nobody can type
// (such as "?": "/?" is not a command) are left out.
func (s *Service) list(_ context.Context, req protocol.CommandListRequest) (protocol.CommandList, error) {
	infos := s.reg.Search(req.Query)
	out := protocol.CommandList{Commands: make([]protocol.CommandInfo, 0, len(infos))}
	for _, in := range infos {
		aliases := make([]string, 0, len(in.Aliases))
		for _, a := range in.Aliases {
			if slash.IsCommand("/" + a) {
				aliases = append(aliases, a)
			}
		}
		out.Commands = append(out.Commands, protocol.CommandInfo{Name: in.Name, Aliases: aliases, Usage: in.Usage, Description: in.Description})
	}
	return out, nil
}
