package turnrunner

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/tools"
)

// workspaceFiles serves the workspace file routes on the directory the
// file tools use (<data-dir>/workspaces/<ws>/files), under their rules
// (tools.Files). The gateway has authorized the workspace (viewers may
// only list and read).
func (s *Service) workspaceFiles(_ context.Context, req protocol.FilesRequest) (protocol.FilesReply, error) {
	if !protocol.ValidID(req.Workspace) {
		return protocol.FilesReply{}, protocol.Errorf(protocol.Invalid, "invalid workspace id")
	}
	dir, err := filepath.Abs(filepath.Join(s.cfg.DataDir, "workspaces", req.Workspace, "files"))
	if err != nil {
		return protocol.FilesReply{}, fmt.Errorf("turnrunner: files dir: %w", err)
	}
	return tools.Files{Dir: dir}.Do(req)
}
