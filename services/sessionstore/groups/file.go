package groups

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/sessionstore/jsonl"
)

// fileBackend is agent-groups.json: the whole array rewritten atomically
// by one writer at a time.
type fileBackend struct {
	cfg  Config
	log  *slog.Logger
	path string
	mu   sync.Mutex
}

func (f *fileBackend) list(context.Context) ([]protocol.AgentGroup, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	gs, _, err := f.read()
	return gs, err
}

func (f *fileBackend) insert(_ context.Context, g protocol.AgentGroup) error {
	return f.modify(func(gs []protocol.AgentGroup) ([]protocol.AgentGroup, error) {
		return append(gs, g), nil
	})
}

func (f *fileBackend) update(_ context.Context, id string, fn func(protocol.AgentGroup) (protocol.AgentGroup, error)) (protocol.AgentGroup, error) {
	var out protocol.AgentGroup
	err := f.modify(func(gs []protocol.AgentGroup) ([]protocol.AgentGroup, error) {
		i := index(gs, id)
		if i < 0 {
			return nil, ErrNotFound
		}
		g, err := fn(gs[i])
		if err != nil {
			return nil, err
		}
		gs[i], out = g, g
		return gs, nil
	})
	return out, err
}

func (f *fileBackend) remove(_ context.Context, id string) error {
	return f.modify(func(gs []protocol.AgentGroup) ([]protocol.AgentGroup, error) {
		i := index(gs, id)
		if i < 0 {
			return nil, ErrNotFound
		}
		return append(gs[:i], gs[i+1:]...), nil
	})
}

// modify runs fn on the current groups and writes its result atomically,
// all under the writer lock so concurrent requests never lose an update.
func (f *fileBackend) modify(fn func([]protocol.AgentGroup) ([]protocol.AgentGroup, error)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	gs, corrupt, err := f.read()
	if err != nil {
		return err
	}
	gs, err = fn(gs)
	if err != nil {
		return err
	}
	if corrupt {
		// Keep the unreadable file for a human instead of overwriting it.
		backup := fmt.Sprintf("%s.corrupt-%d", f.path, f.cfg.Now().UnixNano())
		if err := os.Rename(f.path, backup); err != nil {
			return fmt.Errorf("groups: back up unreadable %s: %w", FileName, err)
		}
		f.log.Warn("groups: unreadable file moved aside", "backup", backup)
	}
	data, err := json.MarshalIndent(gs, "", "  ")
	if err != nil {
		return fmt.Errorf("groups: encode: %w", err)
	}
	if err := jsonl.WriteFileAtomic(f.path, append(data, '\n')); err != nil {
		return fmt.Errorf("groups: write %s: %w", FileName, err)
	}
	return nil
}

// read loads the file. A missing file is no groups; an unreadable one is
// also no groups (as in the original), reported as corrupt so the next
// write keeps a copy of it.
func (f *fileBackend) read() (gs []protocol.AgentGroup, corrupt bool, err error) {
	data, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return []protocol.AgentGroup{}, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("groups: read %s: %w", FileName, err)
	}
	if err := json.Unmarshal(data, &gs); err != nil {
		f.log.Warn("groups: unreadable file treated as empty", "file", f.path, "err", err)
		return []protocol.AgentGroup{}, true, nil
	}
	if gs == nil {
		gs = []protocol.AgentGroup{}
	}
	for i := range gs {
		if gs[i].Members == nil {
			gs[i].Members = []protocol.AgentGroupMember{}
		}
	}
	return gs, false, nil
}
