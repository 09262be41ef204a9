package turnrunner

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/waggle-os/core/libs/llmprobe"
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
	if err := mc.WebSearch.Check(); err != nil {
		// The rest of the file is good: only web_search is left out.
		c.log.Warn("web search configuration unusable; web_search is not offered", "path", c.path, "err", err)
	}
	c.cfg = mc
	return c.cfg
}

// fallbackModel is the model of a turn that nothing names (neither the
// request, the workspace nor config.json): --model, else agent's
// DefaultModel — unless the model server lists models and not that one
// (Ollama serves no claude-sonnet-4-6), then the first it lists.
func (s *Service) fallbackModel() string {
	if s.cfg.Model != "" {
		return s.cfg.Model
	}
	if st := s.probe.Last(); !st.Lists(agent.DefaultModel) {
		return st.Models[0]
	}
	return agent.DefaultModel
}

// reportModelServer logs each new outcome of the model-server probe: at
// start and whenever reachability or the model list changes. A configured
// model the server does not list is a warning naming it (every turn that
// uses it would fail).
func (s *Service) reportModelServer(st llmprobe.Status) {
	if !st.Reachable {
		s.log.Warn("the model server did not answer: turns run in echo mode until it does (set --llm-url / WAGGLE_LLM_URL)",
			"url", s.cfg.LLMURL, "detail", st.Detail)
		return
	}
	s.log.Info("the model server answered", "url", s.cfg.LLMURL, "models", len(st.Models))
	configured, source := s.models.Get().DefaultModel, "config.json defaultModel"
	if configured == "" {
		configured, source = s.cfg.Model, "--model"
	}
	switch {
	case configured != "" && !st.Lists(configured):
		s.log.Warn("the configured model is not served by the model server: turns that use it will fail",
			"model", configured, "from", source, "served", firstModels(st.Models))
	case configured == "" && !st.Lists(agent.DefaultModel):
		s.log.Info("no model configured and the model server does not serve the default: using its first model",
			"default", agent.DefaultModel, "model", st.Models[0])
	}
}

// firstModels is a short list of model ids for a log line.
func firstModels(ids []string) []string { return ids[:min(len(ids), 10)] }
