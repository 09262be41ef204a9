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
	// Follow before the turn exists: the gateway picked the id, so the
	// live path sees every event from the first.
	live := s.hub.follow(req.TurnID)
	started, err := s.startOnRunner(r.Context(), protocol.SubjTurnStart, req)
	if err != nil {
		s.hub.unfollow(req.TurnID, live)
		if errors.Is(err, protocol.ErrUnavailable) {
			err = (&protocol.Error{Status: http.StatusServiceUnavailable, Message: "No turn runner is available. Try again in a moment."}).WithCode("NO_RUNNER")
		}
		httpx.WriteError(w, s.log, err)
		return
	}
	s.relay(w, r, started.TurnID, relaySource{live: live}, true)
}

// coalesceBacklog is the backlog (events waiting for one relay) that marks
// a client as lagging.
const coalesceBacklog = 32

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

// startOnRunner asks a runner to start a turn or run. A runner that is
// shutting down (or full) answers 503 at once; the runners' queue group
// then hands the retry to another one, so a rolling restart does not fail
// a chat.
func (s *Service) startOnRunner(ctx context.Context, subject string, req any) (protocol.TurnStarted, error) {
	var started protocol.TurnStarted
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		started, err = bus.Request[protocol.TurnStarted](rctx, s.nc, subject, req)
		cancel()
		// protocol.ErrUnavailable itself means no runner at all: a retry
		// cannot help. A 503 a runner sent is a new error value.
		if e := protocol.AsError(err); e == nil || e.Status != http.StatusServiceUnavailable || errors.Is(err, protocol.ErrUnavailable) {
			return started, err
		}
	}
	return started, err
}

// relaySource says where a relay reads: the hub's live path (a new turn)
// or a private consumer after event id after (resume, follow).
type relaySource struct {
	live  *queue
	after uint64
	// final is the one event that ends the stream; "" means a chat turn's
	// done or error.
	final string
}

// relay streams a turn's events as SSE. It returns at the terminal event,
// when the client goes away or when the gateway shuts down. cancelOnFail
// cancels the turn when the relay cannot even start (nobody else follows
// it yet).
//
// Each event is one write and one flush. The relay takes every event
// waiting at once; when more than coalesceBacklog are waiting (the client
// or the relay lags), consecutive token events among them are coalesced
// into one (their contents joined, in order; the id is the last one's), so
// a lagging client catches up instead of falling further behind. A client
// that keeps up gets every token as its own event. Nothing else is ever
// merged or reordered. A client so far behind that the live path drops it
// continues from the stream after the last event it took.
func (s *Service) relay(w http.ResponseWriter, r *http.Request, turnID string, src relaySource, cancelOnFail bool) {
	s.streamWG.Add(1)
	defer s.streamWG.Done()
	telemetry.StreamsOpen.Inc()
	defer telemetry.StreamsOpen.Dec()

	var q *queue
	var closePrivate func()
	defer func() {
		if closePrivate != nil {
			closePrivate()
		}
	}()
	// openPrivate reads the turn from the stream after event id after, with
	// flow control: a full queue blocks the consumer's callback, which stops
	// it pulling, so the backlog waits in the stream.
	openPrivate := func(after uint64) error {
		cons, err := s.relayConsumer(r.Context(), turnID, after)
		if err != nil {
			return err
		}
		pq := newQueue(privateQueueLimit)
		stop := make(chan struct{})
		cc, err := cons.Consume(func(m jetstream.Msg) { pq.put(m, stop) })
		if err != nil {
			s.deleteConsumer(cons)
			return err
		}
		closePrivate = func() { close(stop); pq.wake(); cc.Stop(); s.deleteConsumer(cons) }
		q = pq
		return nil
	}
	if src.live != nil {
		q = src.live
		defer s.hub.unfollow(turnID, src.live)
	} else if err := openPrivate(src.after); err != nil {
		if cancelOnFail {
			s.cancelTurn(turnID, "relay-failed")
		}
		httpx.WriteError(w, s.log, err)
		return
	}

	out, err := sse.Start(w, map[string]string{
		"Access-Control-Allow-Origin": s.streamOrigin(r),
		HeaderTurnID:                  turnID,
	})
	if err != nil {
		if cancelOnFail {
			s.cancelTurn(turnID, "relay-failed")
		}
		s.log.Error("stream start", "turn", turnID, "err", err)
		return
	}
	client := protocol.NewUUID()
	s.control(turnID, protocol.TurnControlMsg{Action: protocol.ControlAttach, Client: client})
	attach := time.NewTicker(protocol.AttachInterval)
	defer attach.Stop()
	// Every follower reports leaving; the runner cancels the turn once no
	// one has been attached for the disconnect grace.
	gone := func() {
		s.control(turnID, protocol.TurnControlMsg{Action: protocol.ControlDetach, Client: client, Reason: "client-disconnected"})
	}
	orphan := &orphanWatch{s: s, turnID: turnID}
	idleSince := time.Now()
	watch := time.NewTicker(2 * time.Second)
	defer watch.Stop()
	keepAlive := time.NewTicker(s.cfg.KeepAlive)
	defer keepAlive.Stop()
	var batch []jetstream.Msg
	var taken uint64 // stream sequence of the last event taken
	for {
		var dropped bool
		batch, dropped = q.take(batch)
		if len(batch) == 0 {
			if dropped {
				telemetry.RelayCatchUps.Inc()
				if err := openPrivate(taken); err != nil {
					s.log.Warn("relay catch-up failed", "turn", turnID, "err", err)
					return
				}
				continue
			}
			select {
			case <-q.ready:
			case <-keepAlive.C:
				if err := out.Comment("keep-alive"); err != nil {
					gone()
					return
				}
			case <-attach.C:
				// Presence: a runner tells a slow client from a gone one
				// (and a gateway that died) by these heartbeats.
				s.control(turnID, protocol.TurnControlMsg{Action: protocol.ControlAttach, Client: client})
			case <-watch.C:
				// A quiet stream may be a turn whose runner died with no
				// other runner left to take it over: then end it cleanly
				// (the error event reaches this relay like any other).
				if time.Since(idleSince) >= orphanIdle {
					orphan.tick(r.Context())
				}
			case <-r.Context().Done():
				gone()
				return
			case <-s.streams.Done():
				return
			}
			continue
		}
		idleSince = time.Now()
		lagging := len(batch) > coalesceBacklog
		for i := 0; i < len(batch); i++ {
			m := batch[i]
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			taken = meta.Sequence.Stream
			event := m.Headers().Get(protocol.HeaderEvent)
			if strings.HasPrefix(event, "_") {
				continue // internal markers (a turn's start) are not for clients
			}
			data := m.Data()
			if event == protocol.EventToken && lagging {
				j := i + 1
				for j < len(batch) && batch[j].Headers().Get(protocol.HeaderEvent) == protocol.EventToken {
					j++
				}
				if j-i > 1 {
					data = joinTokens(batch[i:j])
					if meta, err = batch[j-1].Metadata(); err != nil {
						continue
					}
					taken, i = meta.Sequence.Stream, j-1
				}
			}
			if err := out.Event(meta.Sequence.Stream, event, data); err != nil {
				gone()
				return
			}
			telemetry.RelayEvents.Inc()
			telemetry.RelayLag.Observe(time.Since(meta.Timestamp).Seconds())
			if (src.final == "" && protocol.IsTerminal(event)) || event == src.final {
				return
			}
		}
		keepAlive.Reset(s.cfg.KeepAlive)
	}
}

// joinTokens merges token events into one token event's data.
func joinTokens(msgs []jetstream.Msg) []byte {
	var b strings.Builder
	for _, m := range msgs {
		var t protocol.TokenData
		if err := json.Unmarshal(m.Data(), &t); err == nil {
			b.WriteString(t.Content)
		}
	}
	data, err := marshalNoEscape(protocol.TokenData{Content: b.String()})
	if err != nil {
		return msgs[0].Data()
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
