package command

import (
	"context"
	"errors"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
)

// listWorkflows names the workflow patterns the session store captured
// from the workspace's turns (oldest first), which /skills lists as the
// workspace's skills. A store that cannot answer lists none.
func (s *Service) listWorkflows(ctx context.Context, ws string) []string {
	rep, err := bus.Call(ctx, s.nc, protocol.ListWorkflows, protocol.WorkspaceRequest{Workspace: ws}, bus.Within(s.cfg.RequestTimeout))
	if err != nil {
		if !errors.Is(err, protocol.ErrUnavailable) {
			s.log.Warn("workflow list failed", "workspace", ws, "err", err)
		}
		return []string{}
	}
	names := make([]string, 0, len(rep.Workflows))
	for _, w := range rep.Workflows {
		names = append(names, w.Name)
	}
	return names
}
