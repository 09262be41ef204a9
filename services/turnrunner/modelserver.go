package turnrunner

import (
	"context"

	"github.com/waggle-os/core/libs/llmprobe"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/turnrunner/agent"
)

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

// onSettingsChanged drops the cached settings (or vault keys) so the next
// turn asks the store; a vault change also re-probes the model server,
// which may have refused the old key.
func (s *Service) onSettingsChanged(ev protocol.SettingsChanged) {
	s.models.Invalidate(ev)
	if ev.Vault {
		s.probe.Forget()
	}
}

// checkModelServer is the runner's probe for a gateway that has no key of
// its own: with no key configured, the local vault's is looked up first
// (as a turn does), so the answer is the one turns get.
func (s *Service) checkModelServer(ctx context.Context, _ protocol.Empty) (protocol.ModelServerStatus, error) {
	if s.cfg.LLMAPIKey == "" && !s.probe.Last().Reachable {
		s.models.ModelKey(ctx, "", "")
	}
	return protocol.ModelServerStatus(s.probe.Check(ctx)), nil
}
