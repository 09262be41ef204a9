package gateway

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/injection"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/forward"
	"github.com/waggle-os/core/services/gateway/internal/input"
	"github.com/waggle-os/core/services/gateway/internal/respond"
	"github.com/waggle-os/core/services/gateway/internal/teamauth"
)

// HeaderTurnID names the turn of an event stream, so a client can resume
// or cancel it.
const HeaderTurnID = "X-Waggle-Turn-Id"

// parseChat validates a chat body in the contract's order and builds the
// turn request. Every rejection happens here, before a stream exists.
func (s *Service) parseChat(f input.Fields, sc teamauth.Scope) (protocol.TurnRequest, error) {
	var req protocol.TurnRequest
	msg, present, ok := f.Str("message")
	if !present || !ok || msg == "" {
		return req, protocol.Errorf(protocol.Invalid, "message is required")
	}
	if max := s.cfg.MaxMessageLength; max > 0 {
		if n := protocol.UTF16Len(msg); n > max {
			return req, protocol.Errorf(protocol.Invalid, "Message too long (%d chars, max %d)", n, max).WithCode("MESSAGE_TOO_LONG")
		}
	}
	// Flags stay server-side: telling an attacker which pattern fired
	// helps them get around it.
	if injection.Scan(msg, injection.UserInput).Blocked() {
		return req, protocol.Errorf(protocol.Invalid, "Message blocked by security scanner").WithCode("INJECTION_DETECTED")
	}
	req.Message = msg

	// The workspace is the one the authorization step resolved (its
	// aliases agree); the session's aliases must agree too.
	ws := sc.Workspace
	if sc.Field != "" {
		if err := input.CheckSegment(sc.Field, ws); err != nil {
			return req, err
		}
	}
	sessName, sess, err := aliased(f, "session", "sessionId")
	if err != nil {
		return req, err
	}
	if sessName != "" {
		if err := input.CheckSegment(sessName, sess); err != nil {
			return req, err
		}
	}
	req.Workspace = ws
	if req.Workspace == "" {
		req.Workspace = "default"
	}
	req.Session = sess
	if req.Session == "" {
		req.Session = req.Workspace
	}

	if req.Model, _, err = f.OptString("model"); err != nil {
		return req, err
	}
	if req.Persona, _, err = f.OptString("persona"); err != nil {
		return req, err
	}
	if raw, ok := f["autonomy"]; ok {
		// A malformed autonomy object means "no elevation", never an error:
		// the safe reading of a bad request is the normal gate. The reading
		// is strict (exact keys, no repeats) so that nothing in front of
		// the gateway can read the same bytes as a lower level. On a team
		// server the runner caps the level at the team's policy.
		req.Autonomy = protocol.ParseAutonomy(raw)
	}
	mt, _, err := f.OptString("multitask")
	if err != nil {
		return req, err
	}
	switch mt {
	case "", protocol.MultitaskQueue, protocol.MultitaskReject, protocol.MultitaskInterrupt:
		req.Multitask = mt
	default:
		return req, protocol.Errorf(protocol.Invalid, "multitask must be one of queue, reject, interrupt")
	}
	path, present, err := f.OptString("workspacePath")
	if err != nil {
		return req, err
	}
	if present && s.cfg.Auth == AuthRequired {
		// A team server's turns work in their own workspace's directory
		// only; one answer for every path, so it reveals no path either.
		return req, protocol.Errorf(protocol.Invalid, "workspacePath cannot be set on a team server").WithCode("WORKSPACE_PATH_REFUSED")
	}
	if present {
		resolved, ok := insideDir(s.cfg.DataDir, path)
		if !ok {
			return req, protocol.Errorf(protocol.Invalid, "Invalid workspace path").WithCode("PATH_TRAVERSAL")
		}
		req.WorkspacePath = resolved
	} else if req.Workspace != "default" {
		req.WorkspacePath = filepath.Join(s.cfg.DataDir, "workspaces", req.Workspace, "files")
	}
	return req, nil
}

// aliased reads a field that has a legacy alias; it returns the name of
// the field used (for error messages), or "" when neither is present
// (null is absent). When both are sent they must agree — an empty or null
// one beside a set one included — or the request is refused: guessing
// which one counts is how a check and a handler come to disagree.
func aliased(f input.Fields, name, alias string) (string, string, error) {
	type value struct {
		key, v  string
		present bool
	}
	var got []value
	for _, k := range []string{name, alias} {
		if _, found := f[k]; !found {
			continue
		}
		v, present, ok := f.Str(k) // null: not present, ""
		if !ok {
			return k, "", input.BadSegment(k)
		}
		got = append(got, value{k, v, present})
	}
	if len(got) == 2 && got[0].v != got[1].v {
		return "", "", protocol.Errorf(protocol.Invalid, "%s and %s disagree", name, alias).WithCode("ALIAS_CONFLICT")
	}
	for _, g := range got {
		if g.present {
			return g.key, g.v, nil
		}
	}
	return "", "", nil
}

// insideDir resolves p (relative paths against the working directory, as
// path.resolve does) and reports whether it is dir or below it.
func insideDir(dir, p string) (string, bool) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", false
	}
	if abs == dir || strings.HasPrefix(abs, dir+string(filepath.Separator)) {
		return abs, true
	}
	return "", false
}

// chat is POST /api/chat: validate, start the turn on a runner, then relay
// its events as SSE until the terminal event.
func (s *Service) chat(w http.ResponseWriter, r *http.Request) {
	f, err := input.Decode(w, r, s.cfg.BodyLimit)
	if err != nil {
		respond.Error(w, s.log, err)
		return
	}
	sc, _ := teamauth.ScopeFrom(r.Context())
	req, err := s.parseChat(f, sc)
	if err != nil {
		respond.Error(w, s.log, err)
		return
	}
	if s.refuseIfStorageFull(w) {
		return
	}
	req.TurnID = protocol.NewUUID()
	req.User = sc.User
	// Follow before the turn exists: the gateway picked the id, so the
	// live path sees every event from the first.
	live := s.hub.follow(req.TurnID)
	// A turn's start is sent again when no answer comes in a few seconds:
	// on a cluster losing a node a request can be lost on the way, and the
	// runner refuses a second delivery (TURN_EXISTS) by the turn's lease
	// (startResending).
	started, err := startOnRunner(r.Context(), s, func(ctx context.Context) (protocol.TurnStarted, error) {
		return bus.CallResending(ctx, s.nc, protocol.StartTurn, req, s.startResending())
	})
	if err != nil {
		err = s.storageFailure(err)
		s.hub.unfollow(req.TurnID, live)
		if errors.Is(err, protocol.ErrUnavailable) {
			err = (&protocol.Error{Kind: protocol.Unavailable, Message: "No turn runner is available. Try again in a moment."}).WithCode("NO_RUNNER")
		}
		respond.Error(w, s.log, err)
		return
	}
	s.relay(w, r, started.TurnID, relaySource{live: live, ref: &protocol.SessionRef{Workspace: req.Workspace, Session: req.Session}}, true)
}

// startOnRunner asks a runner to start a turn or run. A runner that is
// shutting down (or full) answers 503 at once; the runners' queue group
// then hands the retry to another one, so a rolling restart does not fail
// a chat. A start that gets no answer in StartTimeout means the runners
// are overloaded: 503 RUNNER_BUSY, never a 500. Under a burst a start is
// slower, never refused for it: the runner's writes take the whole
// StartTimeout if they need it, and the resends of a start still being
// handled do not turn into a refusal (startResending).
func startOnRunner(ctx context.Context, s *Service, call func(context.Context) (protocol.TurnStarted, error)) (protocol.TurnStarted, error) {
	var started protocol.TurnStarted
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, s.cfg.StartTimeout)
		started, err = call(rctx)
		cancel()
		if hasCode(err, protocol.ErrTurnExists.Code) {
			// The gateway picked the turn id, so the turn that exists is
			// this very request's, made by a send whose answer never came
			// (lost in an election), or by an earlier attempt that failed
			// after its lease write landed: whether it runs is unknown
			// here, and the client did nothing wrong (never a 409). It is
			// told to try again.
			s.log.Warn("a start found its own turn made by a send that did not answer", "attempt", attempt+1)
			return started, protocol.ErrBusUnavailable
		}
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			s.log.Warn("no runner answered a start in time", "timeout", s.cfg.StartTimeout)
			return started, protocol.ErrRunnerBusy
		}
		// protocol.ErrUnavailable itself means no runner at all: a retry
		// cannot help. An Unavailable a runner sent is a new error value.
		// Only a runner that took nothing (busy, or shutting down) is
		// asked again with the same turn id: one that failed on the bus
		// (BUS_UNAVAILABLE, BUS_TIMEOUT) may have written the turn's lease
		// or place in its session's queue before the failure, and a second
		// attempt would build on that half-made turn (a retried start that
		// found its own join reused and its place passed over ended
		// "cancelled" in TestRollingRestart). The client is told to retry,
		// with a new turn.
		if e := protocol.AsError(err); e == nil || e.Kind != protocol.Unavailable || errors.Is(err, protocol.ErrUnavailable) ||
			(e.Code != "" && e.Code != protocol.ErrRunnerBusy.Code) {
			return started, err
		}
	}
	return started, err
}

// startResending is how a start (a chat's turn, a retrieval run) is sent
// again while unanswered. A runner refuses a copy of a start whose turn
// exists with TURN_EXISTS: from a resend that refusal never counts, and
// from the first send it waits for the other sends' answers — a resend
// handled first (by another runner, or before its first send in a busy
// runner's queue) made the turn and answers its success.
func (s *Service) startResending() bus.Resending {
	return bus.Resending{After: s.cfg.StartResendAfter, Unanswered: forward.Unanswered, Duplicate: func(err error) bool {
		return hasCode(err, protocol.ErrTurnExists.Code)
	}}
}

// deleteConsumer removes a relay's ephemeral consumer at once instead of
// leaving it to the inactivity threshold, so consumers do not pile up at
// high turn rates.
func (s *Service) deleteConsumer(cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.js.DeleteConsumer(ctx, protocol.StreamTurns, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		s.log.Debug("delete relay consumer", "consumer", info.Name, "err", err)
	}
}

// cancelTurn tells the turn's runner to stop it.
func (s *Service) cancelTurn(turnID, reason string) {
	s.control(turnID, protocol.TurnControlMsg{Action: protocol.ControlCancel, Reason: reason})
}

// control publishes a control message to the turn's runner.
func (s *Service) control(turnID string, msg protocol.TurnControlMsg) {
	if err := bus.Publish(s.nc, protocol.TurnControl(turnID), msg); err != nil {
		s.log.Warn("publish turn control", "turn", turnID, "action", msg.Action, "err", err)
	}
}
