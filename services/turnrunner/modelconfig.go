package turnrunner

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/waggle-os/core/services/turnrunner/agent"
)

// modelConfigCache keeps `<dataDir>/config.json` parsed between turns. The
// file is stat'ed at most once per check interval and re-read only when its
// size or modification time changed, so a turn costs no file read, yet an
// edit is picked up within the interval without a restart.
type modelConfigCache struct {
	dataDir string
	path    string
	every   time.Duration
	log     *slog.Logger

	mu      sync.Mutex
	checked time.Time
	mod     time.Time
	size    int64
	exists  bool
	cfg     agent.ModelConfig
}

func newModelConfigCache(dataDir string, every time.Duration, log *slog.Logger) *modelConfigCache {
	return &modelConfigCache{dataDir: dataDir, path: filepath.Join(dataDir, "config.json"), every: every, log: log}
}

// Get returns the current model config. A file that cannot be read or
// parsed keeps the last good config (a half-saved edit must not drop the
// fallback model) and is reported once per change.
func (c *modelConfigCache) Get() agent.ModelConfig {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if !c.checked.IsZero() && now.Sub(c.checked) < c.every {
		return c.cfg
	}
	c.checked = now
	fi, err := os.Stat(c.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.exists, c.cfg = false, agent.ModelConfig{}
		return c.cfg
	case err != nil:
		c.log.Warn("model config unreadable; keeping the last one", "path", c.path, "err", err)
		return c.cfg
	}
	if c.exists && fi.ModTime().Equal(c.mod) && fi.Size() == c.size {
		return c.cfg
	}
	c.exists, c.mod, c.size = true, fi.ModTime(), fi.Size()
	mc, err := agent.LoadModelConfig(c.dataDir)
	if err != nil {
		c.log.Warn("model config invalid; keeping the last one", "path", c.path, "err", err)
		return c.cfg
	}
	c.cfg = mc
	return c.cfg
}
