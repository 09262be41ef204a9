package sessionstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/workspaces"
)

// workspaceGet is the typed read other services use (model, persona…).
func (s *Service) workspaceGet(ctx context.Context, req protocol.WorkspaceRequest) (protocol.Workspace, error) {
	doc, err := s.getWorkspace(ctx, req.Workspace)
	if err != nil {
		return protocol.Workspace{}, err
	}
	return doc.Workspace(), nil
}

func (s *Service) workspaceList(ctx context.Context, _ protocol.Empty) (protocol.WorkspaceListReply, error) {
	docs, err := s.store.ListWorkspaces(ctx)
	if err != nil {
		return protocol.WorkspaceListReply{}, err
	}
	out := protocol.WorkspaceListReply{Workspaces: make([]json.RawMessage, 0, len(docs))}
	for _, d := range docs {
		b, err := json.Marshal(d)
		if err != nil {
			return protocol.WorkspaceListReply{}, fmt.Errorf("sessionstore: encode workspace: %w", err)
		}
		out.Workspaces = append(out.Workspaces, b)
	}
	return out, nil
}

func (s *Service) workspaceDoc(ctx context.Context, req protocol.WorkspaceRequest) (protocol.WorkspaceDocReply, error) {
	return docReply(s.getWorkspace(ctx, req.Workspace))
}

// createTeamWorkspace creates a new team's first workspace, named after
// the team (its id is the slug of that name, made unique by the store).
func (s *Service) createTeamWorkspace(ctx context.Context, team protocol.Team) error {
	name, err := json.Marshal(team.Name)
	if err != nil {
		return err
	}
	id, err := json.Marshal(team.ID)
	if err != nil {
		return err
	}
	_, err = s.store.CreateWorkspace(ctx, workspaces.Doc{"name": name, "teamId": id}, nil)
	return err
}

// getWorkspace is the store's read with unsafe ids answered as missing.
func (s *Service) getWorkspace(ctx context.Context, id string) (workspaces.Doc, error) {
	if !protocol.ValidID(id) {
		return nil, workspaces.ErrNotFound
	}
	return s.store.GetWorkspace(ctx, id)
}

func (s *Service) workspaceCreate(ctx context.Context, req protocol.WorkspaceCreateRequest) (protocol.WorkspaceDocReply, error) {
	fields, err := decodeFields(req.Fields)
	if err == nil {
		err = refuseReserved(fields)
	}
	if err != nil {
		return protocol.WorkspaceDocReply{}, err
	}
	return docReply(s.store.CreateWorkspace(ctx, fields, nil))
}

func (s *Service) workspaceUpdate(ctx context.Context, req protocol.WorkspaceUpdateRequest) (protocol.WorkspaceDocReply, error) {
	fields, err := decodeFields(req.Fields)
	if err == nil {
		err = refuseReserved(fields)
	}
	if err != nil {
		return protocol.WorkspaceDocReply{}, err
	}
	if !protocol.ValidID(req.Workspace) {
		return protocol.WorkspaceDocReply{}, workspaces.ErrNotFound
	}
	return docReply(s.store.UpdateWorkspace(ctx, req.Workspace, fields))
}

func (s *Service) workspaceDelete(ctx context.Context, req protocol.WorkspaceRequest) (protocol.DeletedReply, error) {
	if !protocol.ValidID(req.Workspace) {
		return protocol.DeletedReply{}, workspaces.ErrNotFound
	}
	sessions, err := s.store.DeleteWorkspace(ctx, req.Workspace)
	s.startsCache.forget(req.Workspace)
	s.nows.forget(req.Workspace)
	// Every runner drops what it caches of the removed sessions, even when
	// the removal failed halfway.
	for _, id := range sessions {
		s.publishEvicted(protocol.SessionRef{Workspace: req.Workspace, Session: id})
	}
	if err != nil {
		return protocol.DeletedReply{}, err
	}
	// Its MCP servers stop at once on every runner (the config is gone).
	s.publishMCPChange(protocol.MCPConfigChanged{Workspace: req.Workspace, Deleted: true})
	// The workspace's mind goes with it.
	if err := s.minds.DropWorkspace(ctx, req.Workspace); err != nil {
		return protocol.DeletedReply{}, err
	}
	if err := s.knowledge.DropWorkspace(ctx, req.Workspace); err != nil {
		return protocol.DeletedReply{}, err
	}
	// So do its mind's identity and awareness (kept with the profiles,
	// in PostgreSQL on a team server): a workspace created later under
	// the same id, by any team, starts without them.
	if err := s.dropMindDocs(ctx, req.Workspace); err != nil {
		return protocol.DeletedReply{}, err
	}
	return protocol.DeletedReply{Deleted: true}, nil
}

// ErrMCPServersField refuses mcpServers in a workspace create or update
// body: servers run code (or are URLs the server calls), so they are set
// only through their own route, which has its own authorization.
var ErrMCPServersField = protocol.Errorf(protocol.Invalid,
	"mcpServers cannot be set here; use %s", protocol.MCPServersRoute).WithCode("MCP_SERVERS_ROUTE")

// refuseReserved refuses the fields only dedicated routes write.
func refuseReserved(fields workspaces.Doc) error {
	if _, ok := fields[protocol.MCPServersField]; ok {
		return ErrMCPServersField
	}
	return nil
}

// workspaceMCPSet replaces a workspace's MCP servers (validated again here:
// the store keeps nothing a runner could not read) and tells every runner.
func (s *Service) workspaceMCPSet(ctx context.Context, req protocol.WorkspaceMCPServers) (protocol.WorkspaceMCPServers, error) {
	if !protocol.ValidID(req.Workspace) {
		return protocol.WorkspaceMCPServers{}, workspaces.ErrNotFound
	}
	servers, err := protocol.ParseMCPServers(req.Servers)
	if err != nil {
		return protocol.WorkspaceMCPServers{}, err
	}
	value := json.RawMessage("null") // null removes the field
	if len(servers) > 0 {
		if value, err = json.Marshal(servers); err != nil {
			return protocol.WorkspaceMCPServers{}, fmt.Errorf("sessionstore: encode mcpServers: %w", err)
		}
	}
	if _, err := s.store.UpdateWorkspace(ctx, req.Workspace, workspaces.Doc{protocol.MCPServersField: value}); err != nil {
		return protocol.WorkspaceMCPServers{}, err
	}
	s.publishMCPChange(protocol.MCPConfigChanged{Workspace: req.Workspace})
	if len(servers) == 0 {
		value = json.RawMessage("{}")
	}
	return protocol.WorkspaceMCPServers{Workspace: req.Workspace, Servers: value}, nil
}

func (s *Service) publishMCPChange(ev protocol.MCPConfigChanged) {
	if err := bus.Publish(s.nc, protocol.MCPConfigChanges, ev); err != nil {
		s.log.Warn("publish MCP config change failed", "workspace", ev.Workspace, "err", err)
	}
}

func decodeFields(raw json.RawMessage) (workspaces.Doc, error) {
	fields := workspaces.Doc{}
	if len(raw) == 0 || string(raw) == "null" {
		return fields, nil
	}
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, protocol.Errorf(protocol.Invalid, "body must be a JSON object")
	}
	return fields, nil
}

func docReply(doc workspaces.Doc, err error) (protocol.WorkspaceDocReply, error) {
	if err != nil {
		return protocol.WorkspaceDocReply{}, err
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return protocol.WorkspaceDocReply{}, fmt.Errorf("sessionstore: encode workspace: %w", err)
	}
	return protocol.WorkspaceDocReply{Workspace: b}, nil
}
