package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/injection"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/sse"
	"github.com/waggle-os/core/libs/telemetry"
	"github.com/waggle-os/core/services/gateway/internal/httpx"
	"github.com/waggle-os/core/services/gateway/internal/teamauth"
)

// HeaderTurnID names the turn of an event stream, so a client can resume
// or cancel it.
const HeaderTurnID = "X-Waggle-Turn-Id"

// parseChat validates a chat body in the contract's order and builds the
// turn request. Every rejection happens here, before a stream exists.
func (s *Service) parseChat(f httpx.Fields) (protocol.TurnRequest, error) {
	var req protocol.TurnRequest
	msg, present, ok := f.Str("message")
	if !present || !ok || msg == "" {
		return req, protocol.Errorf(http.StatusBadRequest, "message is required")
	}
	if max := s.cfg.MaxMessageLength; max > 0 {
		if n := httpx.UTF16Len(msg); n > max {
			return req, protocol.Errorf(http.StatusBadRequest, "Message too long (%d chars, max %d)", n, max).WithCode("MESSAGE_TOO_LONG")
		}
	}
	// Flags stay server-side: telling an attacker which pattern fired
	// helps them get around it.
	if injection.Scan(msg, injection.UserInput).Blocked() {
		return req, protocol.Errorf(http.StatusBadRequest, "Message blocked by security scanner").WithCode("INJECTION_DETECTED")
	}
	req.Message = msg

	// workspace wins over workspaceId, session over sessionId (DESIGN §9).
	wsName, ws, err := aliased(f, "workspace", "workspaceId")
	if err != nil {
		return req, err
	}
	sessName, sess, err := aliased(f, "session", "sessionId")
	if err != nil {
		return req, err
	}
	if wsName != "" {
		if err := httpx.CheckSegment(wsName, ws); err != nil {
			return req, err
		}
	}
	if sessName != "" {
		if err := httpx.CheckSegment(sessName, sess); err != nil {
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
		// the safe reading of a bad request is the normal gate.
		var a protocol.Autonomy
		if json.Unmarshal(raw, &a) == nil {
			req.Autonomy = a
		}
	}
	mt, _, err := f.OptString("multitask")
	if err != nil {
		return req, err
	}
	switch mt {
	case "", protocol.MultitaskQueue, protocol.MultitaskReject, protocol.MultitaskInterrupt:
		req.Multitask = mt
	default:
		return req, protocol.Errorf(http.StatusBadRequest, "multitask must be one of queue, reject, interrupt")
	}
	path, present, err := f.OptString("workspacePath")
	if err != nil {
		return req, err
	}
	if present {
		resolved, ok := insideDir(s.cfg.DataDir, path)
		if !ok {
			return req, protocol.Errorf(http.StatusBadRequest, "Invalid workspace path").WithCode("PATH_TRAVERSAL")
		}
		req.WorkspacePath = resolved
	} else if req.Workspace != "default" {
		req.WorkspacePath = filepath.Join(s.cfg.DataDir, "workspaces", req.Workspace, "files")
	}
	return req, nil
}

// aliased reads a field that has a legacy alias; it returns the name of
// the field used (for error messages), or "" when neither is present.
func aliased(f httpx.Fields, name, alias string) (string, string, error) {
	for _, key := range []string{name, alias} {
		v, present, ok := f.Str(key)
		if !present {
			continue
		}
		if !ok {
			return key, "", httpx.BadSegment(key)
		}
		return key, v, nil
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
	f, err := httpx.DecodeBody(w, r, s.cfg.BodyLimit)
	if err != nil {
		httpx.WriteError(w, s.log, err)
		return
	}
	req, err := s.parseChat(f)
	if err != nil {
		httpx.WriteError(w, s.log, err)
		return
	}
	req.TurnID = protocol.NewUUID()
	if u, ok := teamauth.UserFrom(r.Context()); ok {
		req.User = u.ID
	}
	// The relay's consumer is created while the runner starts the turn:
	// the gateway chose the turn id, so neither waits for the other.
	type made struct {
		cons jetstream.Consumer
		err  error
	}
	consCh := make(chan made, 1)
	go func() {
		cons, err := s.relayConsumer(r.Context(), req.TurnID, 0)
		consCh <- made{cons, err}
	}()
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	started, err := bus.Request[protocol.TurnStarted](ctx, s.nc, protocol.SubjTurnStart, req)
	cancel()
	c := <-consCh
	if err != nil {
		if c.cons != nil {
			s.deleteConsumer(c.cons)
		}
		if errors.Is(err, protocol.ErrUnavailable) {
			err = (&protocol.Error{Status: http.StatusServiceUnavailable, Message: "No turn runner is available. Try again in a moment."}).WithCode("NO_RUNNER")
		}
		httpx.WriteError(w, s.log, err)
		return
	}
	if c.err != nil {
		s.cancelTurn(started.TurnID, "relay-failed")
		httpx.WriteError(w, s.log, c.err)
		return
	}
	s.relay(w, r, started.TurnID, c.cons, true)
}

const (
	// relayBuffer is how many events a relay holds between the consumer
	// and the client; beyond it the consumer stops pulling.
	relayBuffer = 128
	// coalesceBacklog is the backlog that marks a client as lagging.
	coalesceBacklog = relayBuffer / 2
)

// relayConsumer creates the ordered consumer that reads one turn's events
// after event id after (0 = from the first).
func (s *Service) relayConsumer(ctx context.Context, turnID string, after uint64) (jetstream.Consumer, error) {
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{protocol.TurnEvents(turnID)},
		// The consumer is deleted when the relay ends; this only bounds how
		// long one lingers if this gateway dies mid-stream.
		InactiveThreshold: 30 * time.Second,
	}
	if after > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
	}
	cons, err := s.js.OrderedConsumer(ctx, protocol.StreamTurns, cfg)
	if err != nil {
		return nil, fmt.Errorf("gateway: relay consumer for %s: %w", turnID, err)
	}
	return cons, nil
}

// relay streams a turn's events from cons as SSE. It returns at the
// terminal event, when the client goes away or when the gateway shuts down;
// the consumer is deleted then. cancelOnGone asks the runner to cancel the
// turn when this client disconnects.
//
// Each event is one write and one flush. When the client reads slower than
// tokens arrive (coalesceBacklog events are waiting), consecutive token
// events already waiting are coalesced into one (their contents joined, in
// order; the id is the last one's), so a lagging client catches up instead
// of falling further behind. A client that keeps up gets every token as
// its own event. Nothing else is ever merged or reordered.
func (s *Service) relay(w http.ResponseWriter, r *http.Request, turnID string, cons jetstream.Consumer, cancelOnGone bool) {
	s.streamWG.Add(1)
	defer s.streamWG.Done()
	telemetry.StreamsOpen.Inc()
	defer telemetry.StreamsOpen.Dec()
	defer s.deleteConsumer(cons)
	stop := make(chan struct{})
	defer close(stop)
	msgs := make(chan jetstream.Msg, relayBuffer)
	// A slow client blocks this callback, which stops the consumer pulling:
	// the backlog waits in the stream, not in gateway memory.
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case msgs <- m:
		case <-stop:
		}
	})
	if err != nil {
		if cancelOnGone {
			s.cancelTurn(turnID, "relay-failed")
		}
		httpx.WriteError(w, s.log, err)
		return
	}
	defer cc.Stop()

	out, err := sse.Start(w, map[string]string{
		"Access-Control-Allow-Origin": s.streamOrigin(r),
		HeaderTurnID:                  turnID,
	})
	if err != nil {
		s.log.Error("stream start", "turn", turnID, "err", err)
		return
	}
	client := protocol.NewUUID()
	s.control(turnID, protocol.TurnControlMsg{Action: protocol.ControlAttach, Client: client})
	attach := time.NewTicker(protocol.AttachInterval)
	defer attach.Stop()
	gone := func() {
		if cancelOnGone {
			s.control(turnID, protocol.TurnControlMsg{Action: protocol.ControlDetach, Client: client, Reason: "client-disconnected"})
		}
	}
	keepAlive := time.NewTicker(s.cfg.KeepAlive)
	defer keepAlive.Stop()
	var held jetstream.Msg // a message read while coalescing, sent next
	for {
		var m jetstream.Msg
		if held != nil {
			m, held = held, nil
		} else {
			select {
			case m = <-msgs:
			case <-keepAlive.C:
				if err := out.Comment("keep-alive"); err != nil {
					gone()
					return
				}
				continue
			case <-attach.C:
				// Presence: a runner tells a slow client from a gone one
				// (and a gateway that died) by these heartbeats.
				s.control(turnID, protocol.TurnControlMsg{Action: protocol.ControlAttach, Client: client})
				continue
			case <-r.Context().Done():
				gone()
				return
			case <-s.streams.Done():
				return
			}
		}
		event := m.Headers().Get(protocol.HeaderEvent)
		if strings.HasPrefix(event, "_") {
			// Internal markers (a turn's start) are for services, not clients.
			continue
		}
		data := m.Data()
		if event == protocol.EventToken && len(msgs) >= coalesceBacklog {
			data, m, held = coalesceTokens(m, msgs)
		}
		meta, err := m.Metadata()
		if err != nil {
			continue
		}
		if err := out.Event(meta.Sequence.Stream, event, data); err != nil {
			gone()
			return
		}
		telemetry.RelayEvents.Inc()
		telemetry.RelayLag.Observe(time.Since(meta.Timestamp).Seconds())
		if protocol.IsTerminal(event) {
			return
		}
		keepAlive.Reset(s.cfg.KeepAlive)
	}
}

// coalesceTokens joins first with the token events already waiting in
// msgs. It returns the data to send, the last message merged (whose id the
// event carries) and a non-token message it had to read, if any.
func coalesceTokens(first jetstream.Msg, msgs <-chan jetstream.Msg) ([]byte, jetstream.Msg, jetstream.Msg) {
	var more []jetstream.Msg
	for {
		select {
		case m := <-msgs:
			if m.Headers().Get(protocol.HeaderEvent) != protocol.EventToken {
				return joinTokens(first, more), last(first, more), m
			}
			more = append(more, m)
			continue
		default:
		}
		return joinTokens(first, more), last(first, more), nil
	}
}

func last(first jetstream.Msg, more []jetstream.Msg) jetstream.Msg {
	if len(more) == 0 {
		return first
	}
	return more[len(more)-1]
}

func joinTokens(first jetstream.Msg, more []jetstream.Msg) []byte {
	if len(more) == 0 {
		return first.Data()
	}
	var b strings.Builder
	for _, m := range append([]jetstream.Msg{first}, more...) {
		var t protocol.TokenData
		if err := json.Unmarshal(m.Data(), &t); err == nil {
			b.WriteString(t.Content)
		}
	}
	data, err := marshalNoEscape(protocol.TokenData{Content: b.String()})
	if err != nil {
		return first.Data()
	}
	return data
}

func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
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
	body, _ := json.Marshal(msg)
	if err := s.nc.Publish(protocol.TurnControl(turnID), body); err != nil {
		s.log.Warn("publish turn control", "turn", turnID, "action", msg.Action, "err", err)
	}
}
