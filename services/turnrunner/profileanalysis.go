package turnrunner

import (
	"cmp"
	"context"
	"time"

	"github.com/waggle-os/core/libs/protocol"
)

// analysisTimeout bounds one profile analysis (one model call).
const analysisTimeout = 90 * time.Second

// maxAnalyses bounds the analyses a runner makes at once: they share the
// bus service's handler slots with turn starts, which must not wait
// behind slow model calls.
const maxAnalyses = 4

// errAnalysesBusy refuses an analysis while maxAnalyses run.
var errAnalysesBusy = protocol.Errorf(protocol.RateLimited, "Too many profile analyses at once; try again shortly")

// analyzeProfile answers AnalyzeProfile: one call to the budget model
// (else the default), as the original used its small model for these. It
// reads only what the request carries and writes nothing: the gateway
// saves the checked result to the caller's own profile.
func (s *Service) analyzeProfile(ctx context.Context, req protocol.ProfileAnalysisRequest) (protocol.ProfileAnalysis, error) {
	select {
	case s.analyses <- struct{}{}:
		defer func() { <-s.analyses }()
	default:
		return protocol.ProfileAnalysis{}, errAnalysesBusy
	}
	ctx, cancel := context.WithTimeout(ctx, analysisTimeout)
	defer cancel()
	mc := s.models.Get()
	model := cmp.Or(mc.BudgetModel, mc.DefaultModel, s.fallbackModel())
	out, err := s.profileAI.Analyze(ctx, model, req)
	if err != nil && protocol.KindOf(err) != protocol.Invalid {
		s.log.Warn("profile analysis failed", "kind", req.Kind, "model", model, "err", err)
	}
	return out, err
}
