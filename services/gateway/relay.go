package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/libs/sse"
	"github.com/waggle-os/core/libs/telemetry"
	"github.com/waggle-os/core/services/gateway/internal/respond"
)

// coalesceBacklog is the backlog (events waiting for one relay) that marks
// a client as lagging.
const coalesceBacklog = 32

// relaySource says where a relay reads: the hub's live path (a new turn)
// or a private consumer after event id after (resume, follow).
type relaySource struct {
	live  *queue
	after uint64
	// final is the one event that ends the stream; "" means a chat turn's
	// done or error.
	final string
	// ref, when known, is the turn's session: a client behind the window of
	// a turn that ended is served the reply from the store.
	ref *protocol.SessionRef
}

// privateReadAhead is how many events a private consumer pulls ahead of
// its relay's queue.
const privateReadAhead = 8

// pullBytes is a consumer's read-ahead in bytes: want, but never less
// than one largest message (maxPayload) and a little.
func pullBytes(maxPayload int64, want int) int {
	return max(want, int(maxPayload)+4<<10)
}

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

// relay is one client's stream of one turn.
type relay struct {
	s      *Service
	w      http.ResponseWriter
	r      *http.Request
	turnID string
	src    relaySource
	client string // this follower's id in presence messages

	q            *queue
	closePrivate func()
	out          *sse.Writer
	batch        []event
	// taken is the stream sequence of the last event taken; lastNum its
	// number (protocol.HeaderEventNum), 0 before the first.
	taken   uint64
	lastNum uint64
	// numKnown is false while the number of the event at src.after is not
	// known (it was discarded): the first event read then decides.
	numKnown bool
	// ahead holds events whose number is past the next one, since
	// aheadSince: after a lost acknowledgement the runner re-publishes,
	// and a stream that changed leader may have stored a later event
	// before the lost one. The next number arriving drops them (their
	// copies follow it); if it does not come within gapWait, or too many
	// wait, the hole is real (events discarded) and the client is told.
	ahead      []event
	aheadSince time.Time
	// gapsSeen is the hub's gap count this live relay last checked
	// (missedLive).
	gapsSeen uint64
}

// gapWait is how long events past a hole wait for the missing ones (the
// runner's re-publish after a stream leader change: its suspicion delay
// and an election). A variable for tests.
var gapWait = 15 * time.Second

// maxAhead bounds the events held past a hole.
const maxAhead = 256

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
// that keeps up gets every event as the runner published it. Nothing else
// is ever merged or reordered. A client so far behind that the live path
// drops it continues from the stream after the last event it took; one
// behind the stream's window gets EventStreamGap for what was discarded.
func (s *Service) relay(w http.ResponseWriter, r *http.Request, turnID string, src relaySource, cancelOnFail bool) {
	s.streamWG.Add(1)
	defer s.streamWG.Done()
	telemetry.StreamsOpen.Inc()
	defer telemetry.StreamsOpen.Dec()
	s.release.started()
	defer s.release.ended()

	rl := &relay{s: s, w: w, r: r, turnID: turnID, src: src, client: protocol.NewUUID(), taken: src.after, numKnown: src.after == 0}
	defer rl.close()
	if err := rl.open(); err != nil {
		if cancelOnFail {
			s.cancelTurn(turnID, "relay-failed")
		}
		respond.Error(w, s.log, err)
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
	rl.out = out
	rl.run()
}

// open picks the relay's source: the hub's live queue, or a private
// consumer after src.after.
func (rl *relay) open() error {
	if rl.src.live != nil {
		rl.q = rl.src.live
		rl.gapsSeen = rl.s.hub.gapCount()
		return nil
	}
	if rl.src.after > 0 {
		rl.lastNum, rl.numKnown = rl.s.eventNum(rl.r.Context(), rl.turnID, rl.src.after)
	}
	return rl.openPrivate(rl.src.after)
}

// openPrivate reads the turn from the stream after event id after, with
// flow control: a full queue blocks the consumer's callback, which stops
// it pulling, so the backlog waits in the stream.
func (rl *relay) openPrivate(after uint64) error {
	cons, err := rl.s.relayConsumer(rl.r.Context(), rl.turnID, after)
	if err != nil {
		return err
	}
	pq := newQueue(privateQueueBytes)
	stop := make(chan struct{})
	// The read-ahead is a few events, not bytes: a pull whose byte limit
	// is below one event's size (a done carrying a long reply) would never
	// deliver it, and one sized for the largest event would let every
	// lagging client hold that much.
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if ev, ok := newEvent(m); ok {
			pq.put(ev, stop)
		}
	}, jetstream.PullMaxMessages(privateReadAhead))
	if err != nil {
		rl.s.deleteConsumer(cons)
		return err
	}
	if rl.closePrivate != nil {
		rl.closePrivate()
	}
	rl.closePrivate = func() { close(stop); pq.wake(); cc.Stop(); rl.s.deleteConsumer(cons) }
	rl.q = pq
	return nil
}

func (rl *relay) close() {
	if rl.closePrivate != nil {
		rl.closePrivate()
	}
	rl.dropLive()
}

// dropLive takes the relay's live queue out of the hub (if it still has
// one); the queue and what it holds are then garbage.
func (rl *relay) dropLive() {
	if rl.src.live != nil {
		rl.s.hub.unfollow(rl.turnID, rl.src.live)
		rl.src.live = nil
	}
}

// run is the relay's loop: deliver what is waiting, else wait for events,
// keep-alives, presence beats, the client or shutdown. A quiet turn (one
// waiting minutes for an approval) costs no bus request here: the runners
// end a turn no runner is left to finish, in the stream this relay follows.
func (rl *relay) run() {
	s := rl.s
	s.control(rl.turnID, protocol.TurnControlMsg{Action: protocol.ControlAttach, Client: rl.client})
	attach := time.NewTicker(protocol.AttachInterval)
	defer attach.Stop()
	keepAlive := time.NewTicker(s.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		var dropped bool
		rl.batch, dropped = rl.q.take(rl.batch)
		if len(rl.batch) > 0 {
			done, ok := rl.deliver()
			// What was written is not kept while the relay waits.
			clear(rl.batch)
			if !ok {
				rl.gone()
			}
			if done || !ok {
				return
			}
			keepAlive.Reset(s.cfg.KeepAlive)
			continue
		}
		if dropped {
			telemetry.RelayCatchUps.Inc()
			// The live queue is not read again: let the hub stop filling
			// it and let what it held go, or a lagging relay keeps a full
			// queue (and its turn's done, the whole reply) for the rest
			// of its stream beside what it reads from its own consumer.
			rl.dropLive()
			if rl.allDiscarded() {
				// The turn's events are all gone (it ended and the window
				// moved on): nothing is left to stream.
				rl.endFromStore()
				return
			}
			// The stream is read again after the last event taken, held
			// events included: hold them once.
			clear(rl.ahead)
			rl.ahead = rl.ahead[:0]
			if err := rl.openPrivate(rl.taken); err != nil {
				s.log.Warn("relay catch-up failed", "turn", rl.turnID, "err", err)
				return
			}
			continue
		}
		var gapTimer <-chan time.Time
		if len(rl.ahead) > 0 {
			gapTimer = time.After(time.Until(rl.aheadSince.Add(gapWait)))
		}
		select {
		case <-rl.q.ready:
		case <-gapTimer:
			done, ok := rl.releaseAhead()
			if !ok {
				rl.gone()
			}
			if done || !ok {
				return
			}
		case <-keepAlive.C:
			if err := rl.out.Comment("keep-alive"); err != nil {
				rl.gone()
				return
			}
			// An idle private relay checks, once per keep-alive, that its
			// turn did not end with every remaining event discarded.
			if rl.endedUnseen() || rl.missedLive() {
				return
			}
		case <-attach.C:
			// Presence: a runner tells a slow client from a gone one (and
			// a gateway that died) by these heartbeats.
			s.control(rl.turnID, protocol.TurnControlMsg{Action: protocol.ControlAttach, Client: rl.client})
		case <-rl.r.Context().Done():
			rl.gone()
			return
		case <-s.streams.Done():
			return
		}
	}
}

// gone reports that this follower left; the runner cancels the turn once
// no one has been attached for the disconnect grace.
func (rl *relay) gone() {
	rl.s.control(rl.turnID, protocol.TurnControlMsg{Action: protocol.ControlDetach, Client: rl.client, Reason: "client-disconnected"})
}

// deliver writes the batch taken. It reports whether the stream's final
// event was written (done) and whether the client is still there (ok).
func (rl *relay) deliver() (done, ok bool) {
	batch := rl.batch
	lagging := len(batch) > coalesceBacklog
	for i := 0; i < len(batch); i++ {
		m := batch[i]
		switch rl.place(m) {
		case placeCopy:
			rl.taken = m.seq
			continue
		case placeAhead:
			continue
		case placeHole:
			if done, ok := rl.releaseAhead(); done || !ok {
				return done, ok
			}
			if rl.place(m) != placeNext {
				continue // a copy of a released event
			}
		}
		rl.taken = m.seq
		event := m.name
		if strings.HasPrefix(event, "_") {
			continue // internal markers (a turn's start) are not for clients
		}
		data := m.data
		if event == protocol.EventToken && lagging {
			if j := rl.tokenRun(batch, i); j-i > 1 {
				data = joinTokens(batch[i:j])
				last := batch[j-1]
				m, rl.taken, i = last, last.seq, j-1
				rl.lastNum = last.num
			}
		}
		if err := rl.out.Event(m.seq, event, data); err != nil {
			return false, false
		}
		telemetry.RelayEvents.Inc()
		telemetry.RelayLag.Observe(time.Since(m.at).Seconds())
		if (rl.src.final == "" && protocol.IsTerminal(event)) || event == rl.src.final {
			return true, true
		}
	}
	return false, true
}

// tokenRun returns the end of the run of consecutive token events that
// starts at batch[i] (contiguous numbers: a gap ends the run).
func (rl *relay) tokenRun(batch []event, i int) int {
	j := i + 1
	for j < len(batch) && batch[j].name == protocol.EventToken {
		if n, prev := batch[j].num, batch[j-1].num; n != 0 && prev != 0 && n != prev+1 {
			break
		}
		j++
	}
	return j
}

// placement is what the relay does with an event, by its number.
type placement int

const (
	placeNext  placement = iota // deliver it
	placeCopy                   // a number delivered already: skip it
	placeAhead                  // past a hole: hold it (see relay.ahead)
	placeHole                   // past a hole that is real: release what is held, then deliver it
)

// place decides what to do with m and, for placeNext, takes its number.
func (rl *relay) place(m event) placement {
	n := m.num
	if n == 0 {
		return placeNext // an event without a number (a gateway's end of an orphaned turn)
	}
	if !rl.numKnown {
		// The client's last event was discarded, so its number is not
		// known: anything before n may be missing (Missed is then an upper
		// bound).
		rl.numKnown, rl.lastNum = true, 0
		if n > 1 {
			rl.ahead = append(rl.ahead[:0], m)
			return placeHole
		}
	}
	switch {
	case n <= rl.lastNum:
		return placeCopy
	case n == rl.lastNum+1:
		rl.lastNum = n
		if len(rl.ahead) > 0 {
			clear(rl.ahead)
			rl.ahead = rl.ahead[:0] // their copies follow in order
		}
		return placeNext
	case len(rl.ahead) < maxAhead:
		if len(rl.ahead) == 0 {
			rl.aheadSince = time.Now()
		}
		rl.ahead = append(rl.ahead, m)
		return placeAhead
	default:
		return placeHole
	}
}

// releaseAhead tells the client that events were discarded before the
// held ones and delivers those (the number they skip to becomes the next).
// It reports whether the stream's final event was written and whether the
// client is still there.
func (rl *relay) releaseAhead() (done, ok bool) {
	held := rl.ahead
	rl.ahead = nil
	if len(held) == 0 {
		return false, true
	}
	if !rl.sendGap(held[0].num - rl.lastNum - 1) {
		return false, false
	}
	rl.lastNum = held[0].num - 1
	batch := rl.batch
	rl.batch = nil
	defer func() { rl.batch = batch }()
	for _, m := range held {
		rl.batch = append(rl.batch[:0], m)
		if done, ok := rl.deliver(); done || !ok {
			return done, ok
		}
	}
	return false, true
}

// sendGap tells the client that missed events (0: an unknown number) were
// discarded before it read them. It reports false when the client is gone.
func (rl *relay) sendGap(missed uint64) bool {
	telemetry.RelayGaps.Inc()
	body, _ := marshalNoEscape(protocol.StreamGapData{Missed: missed, Message: protocol.StreamGapText})
	return rl.out.Event(rl.taken, protocol.EventStreamGap, body) == nil
}

// endFromStore ends the stream of a turn whose remaining events were all
// discarded: the client is told, then gets the turn's end from what the
// session store persisted — done with the stored reply, or error when the
// turn failed — so it is never left without a terminal event or silently
// truncated. Without a known session (a follower) or a stored reply, the
// gap is all it can be told.
func (rl *relay) endFromStore() {
	if !rl.sendGap(0) || rl.src.ref == nil || rl.src.final != "" {
		return
	}
	if event, body, ok := rl.storedEnd(); ok {
		_ = rl.out.Event(rl.taken, event, body)
	}
}

// storedEnd is the terminal event of the turn as the session store
// persisted it: done with the stored reply, or error when the turn
// failed; ok is false while no reply of the turn is stored (or the store
// cannot say).
func (rl *relay) storedEnd() (event string, body []byte, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), rl.s.cfg.RequestTimeout)
	defer cancel()
	h, err := bus.Call(ctx, rl.s.nc, protocol.ReadHistory, protocol.HistoryRequest{SessionRef: *rl.src.ref})
	if err != nil {
		rl.s.log.Warn("reply of a discarded turn", "turn", rl.turnID, "err", err)
		return "", nil, false
	}
	for i := len(h.Messages) - 1; i >= 0; i-- {
		m := h.Messages[i]
		if m.TurnID != rl.turnID || m.Role != protocol.RoleAssistant {
			continue
		}
		if m.Error != "" {
			body, _ := marshalNoEscape(protocol.ErrorData{Message: protocol.StreamGapEndedText})
			return protocol.EventError, body, true
		}
		body, _ := marshalNoEscape(protocol.EchoDone{Content: m.Content, ToolsUsed: []string{}})
		return protocol.EventDone, body, true
	}
	return "", nil, false
}

// endedUnseen ends the stream of a private relay whose turn ended while
// its client stalled and whose events the stream no longer holds: a
// consumer that stopped pulling past its inactivity limit has nothing
// left to deliver, so without this the client would wait for ever. A
// turn still running (no reply stored yet) is left to stream on, and so
// is a relay holding events past a hole: they (often the turn's done,
// the whole reply) go out when the hole is reported, and reading the
// reply again from the store would hold it twice for a client that may
// not read either.
func (rl *relay) endedUnseen() bool {
	return rl.closePrivate != nil && rl.mayEndFromStore() && rl.allDiscarded() && rl.endWithStoredReply()
}

// missedLive checks, on a live relay's keep-alive once after each gap of
// the hub (events the stream discarded before the hub read them), whether
// its turn's were among them: later events still in the stream are read
// from there (the queue is dropped: the catch-up path); with none left and
// the turn's end stored, the client is told of the gap and gets the end.
// A turn still running is left to stream on. Without a gap it asks the bus
// nothing: a quiet turn costs no request. It reports whether the stream
// was ended.
func (rl *relay) missedLive() bool {
	if rl.src.live == nil {
		return false
	}
	n := rl.s.hub.gapCount()
	if n == rl.gapsSeen {
		return false
	}
	rl.gapsSeen = n
	last, found, ok := rl.lastStored()
	switch {
	case !ok:
		return false // cannot tell; the next gap asks again
	case found && last > rl.taken:
		rl.src.live.drop()
		return false
	}
	return rl.mayEndFromStore() && rl.endWithStoredReply()
}

// mayEndFromStore reports whether the relay may end its stream with the
// stored reply: it knows the turn's session, the turn's own final event
// ends the stream (not a follower's src.final), and it holds no events
// past a hole (they, often the turn's done, go out when the hole is
// reported; reading the reply again would hold it twice).
func (rl *relay) mayEndFromStore() bool {
	return rl.src.ref != nil && rl.src.final == "" && len(rl.ahead) == 0
}

// endWithStoredReply tells the client of the gap and sends the turn's end
// as the session store persisted it; false while no reply is stored (the
// turn still runs).
func (rl *relay) endWithStoredReply() bool {
	event, body, ok := rl.storedEnd()
	if !ok {
		return false
	}
	telemetry.RelayCatchUps.Inc()
	if rl.sendGap(0) {
		_ = rl.out.Event(rl.taken, event, body)
	}
	return true
}

// allDiscarded reports whether the stream holds no event of the turn any
// more (and so none after the last one taken).
func (rl *relay) allDiscarded() bool {
	_, found, ok := rl.lastStored()
	return ok && !found
}

// lastStored is the stream sequence of the turn's last event still in the
// stream (found false when none is left); ok is false when the stream
// cannot say.
func (rl *relay) lastStored() (seq uint64, found, ok bool) {
	st, err := rl.s.js.Stream(rl.r.Context(), protocol.StreamTurns)
	if err != nil {
		return 0, false, false
	}
	m, err := st.GetLastMsgForSubject(rl.r.Context(), protocol.TurnEvents(rl.turnID))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, false, true
	case err != nil:
		return 0, false, false
	}
	return m.Sequence, true, true
}

// eventNum reads the number of the event stored at seq, if it is still
// there and belongs to turnID.
func (s *Service) eventNum(ctx context.Context, turnID string, seq uint64) (uint64, bool) {
	st, err := s.js.Stream(ctx, protocol.StreamTurns)
	if err != nil {
		return 0, false
	}
	m, err := st.GetMsg(ctx, seq)
	if err != nil || m.Subject != protocol.TurnEvents(turnID) {
		return 0, false
	}
	n, err := strconv.ParseUint(m.Header.Get(protocol.HeaderEventNum), 10, 64)
	return n, err == nil
}

// joinTokens merges token events into one token event's data.
func joinTokens(msgs []event) []byte {
	var b strings.Builder
	for _, m := range msgs {
		var t protocol.TokenData
		if err := json.Unmarshal(m.data, &t); err == nil {
			b.WriteString(t.Content)
		}
	}
	data, err := marshalNoEscape(protocol.TokenData{Content: b.String()})
	if err != nil {
		return msgs[0].data
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
