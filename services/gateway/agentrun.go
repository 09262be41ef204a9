package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/input"
	"github.com/waggle-os/core/services/gateway/internal/respond"
	"github.com/waggle-os/core/services/gateway/internal/teamauth"
)

// agentRun is POST /api/agent/run (contract §8): a one-shot retrieval run
// streamed as SSE with its own event names; done always comes last.
func (s *Service) agentRun(w http.ResponseWriter, r *http.Request) {
	f, err := input.Decode(w, r, s.cfg.BodyLimit)
	if err != nil {
		respond.Error(w, s.log, err)
		return
	}
	sc, _ := teamauth.ScopeFrom(r.Context())
	req, err := parseAgentRun(f, sc)
	if err != nil {
		respond.Error(w, s.log, err)
		return
	}
	// The original needs its memory and embedding provider; ours needs a
	// model to run the loop at all.
	if !s.probe.Available(r.Context()) {
		respond.Error(w, s.log, protocol.Errorf(protocol.Unavailable, "multi-mind or embedding provider not initialized"))
		return
	}
	req.TurnID = protocol.NewUUID()
	live := s.hub.follow(req.TurnID)
	// Sent again when unanswered, as a chat's start: a request lost with a
	// dying cluster node would otherwise wait out the whole start timeout.
	// The runner refuses a second delivery (TURN_EXISTS) by the run's
	// start marker. A runner whose NATS node died is away until it
	// reconnects elsewhere: ride that out, not NO_RUNNER.
	started, err := startOnRunner(r.Context(), s, func(ctx context.Context) (protocol.TurnStarted, error) {
		return bus.CallResending(ctx, s.nc, protocol.StartAgentRun, req, s.startResending())
	})
	if err != nil {
		s.hub.unfollow(req.TurnID, live)
		if errors.Is(err, protocol.ErrUnavailable) {
			err = (&protocol.Error{Kind: protocol.Unavailable, Message: "No turn runner is available. Try again in a moment."}).WithCode("NO_RUNNER")
		}
		respond.Error(w, s.log, err)
		return
	}
	s.relay(w, r, started.TurnID, relaySource{live: live, final: protocol.AgentRunEventDone}, true)
}

// parseAgentRun validates the body of POST /api/agent/run; the workspace
// is the one the authorization step resolved ("" for "personal"), the
// user the one it authenticated.
func parseAgentRun(f input.Fields, sc teamauth.Scope) (protocol.AgentRunRequest, error) {
	var req protocol.AgentRunRequest
	q, present, ok := f.Str("question")
	if !present || !ok || q == "" {
		return req, protocol.Errorf(protocol.Invalid, "question is required")
	}
	req.Question = q
	var err error
	for key, dst := range map[string]*string{"shape": &req.Shape, "model": &req.Model, "persona": &req.Persona} {
		if *dst, _, err = f.OptString(key); err != nil {
			return req, err
		}
	}
	if sc.Workspace != "" {
		if err := input.CheckSegment(sc.Field, sc.Workspace); err != nil {
			return req, err
		}
		req.Workspace = sc.Workspace
	}
	req.User = sc.User
	for key, dst := range map[string]*int{"maxSteps": &req.MaxSteps, "maxRetrievalsPerStep": &req.MaxRetrievalsPerStep} {
		raw, ok := f[key]
		if !ok || string(raw) == "null" {
			continue
		}
		if err := json.Unmarshal(raw, dst); err != nil || *dst < 1 {
			return req, protocol.Errorf(protocol.Invalid, "%s must be a positive whole number", key)
		}
	}
	return req, nil
}
