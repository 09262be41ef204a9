// Package sessionqueue orders the turns of each session: a session's turns
// queue up by appending to a JetStream stream, whose sequence is their
// order, so joining the queue and leaving it never lose a race.
package sessionqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/waggle-os/core/libs/bus"
)

// The session queue. Each session has a subject of StreamName; its log is
// the session's history of joins and leaves:
//
//   - join {turn, front}: a turn asks for the session. Its position is the
//     stream sequence of that message (the publish acknowledgement says
//     which). The message carries Nats-Msg-Id, so a publish retried after
//     a lost acknowledgement is one entry, at the same sequence.
//   - done {seq}: the turn that joined at seq is finished (or gave up, or
//     was passed over because its lease is gone).
//
// Every runner replays the same log in the same order through the same
// function (state.apply), so all of them agree on who holds the session:
// the first join while nobody holds it, then, at each done of the holder,
// the head of the queue. A "front" join (multitask interrupt) goes to the
// head of the queue instead of its tail. Nothing is ever read, changed and
// written back: both records are appends, which cannot conflict.
//
// Compaction: when the log up to a done record replays to an empty
// session (no holder, nobody waiting), every message before that record is
// purged. Replaying what is left from an empty session gives every answer
// the whole log gave, so purging needs no coordination either. A replay that was running while a purge removed
// messages it had not read yet may hold entries that are gone; such an
// entry can only delay the turns behind it, and it is dropped (the replay
// restarts) the first time it is checked as a holder: its join message no
// longer exists.

// StreamName is the JetStream stream of the session queues.
const StreamName = "WAGGLE_SESSION_QUEUES"

// subjectPrefix starts the subject of every session's queue.
const subjectPrefix = "waggle.turn.queue."

// Session names one session's queue. Both parts are protocol IDs (letters,
// digits, '-' and '_'), so each is one subject token.
type Session struct {
	Workspace string
	Session   string
}

func (s Session) subject() string { return subjectPrefix + s.Workspace + "." + s.Session }

func (s Session) String() string { return s.Workspace + "/" + s.Session }

// ErrGone is returned by Wait when the turn's entry is not in the queue
// any more: it was left, or passed over as dead.
var ErrGone = errors.New("sessionqueue: the turn is no longer in its session's queue")

// Config configures a Queue.
type Config struct {
	// Replicas of the stream (1 when 0).
	Replicas int
	// Alive reports whether the turn holding a session still runs (for the
	// turn runner: whether it has a lease). A holder that is not alive is
	// passed over by a runner with turns waiting behind it. It must not
	// report false for a turn that joined and has not yet left: a turn's
	// lease is written before it joins.
	Alive func(ctx context.Context, turnID string) (bool, error)
	// Poll is how often a runner with waiting turns checks that the
	// session's holder is alive (Heartbeat in production).
	Poll time.Duration
	// Logger gets warnings (slog.Default when nil).
	Logger *slog.Logger
	// Async makes a new stream without an fsync per write (see
	// ownership.OwnerConfig.Async: only where the session store's record
	// of accepted turns puts back what a crash of NATS loses).
	Async bool
}

// Queue is one runner's handle on the session queues.
type Queue struct {
	cfg    Config
	js     jetstream.JetStream
	stream jetstream.Stream
	log    *slog.Logger

	mu      sync.Mutex
	watches map[string]*watch // by subject, while someone on this runner needs them
	// idle maps a session's subject to a done record at which its log
	// replays to empty, as this runner's compaction saw it (Enter).
	idle   map[string]uint64
	closed bool
	// compactions run after Leave; Close waits for them.
	compactions sync.WaitGroup
}

// Open creates (or updates) the queue stream and returns a handle on it.
//
// The stream is file storage with an fsync per write, like the turn
// leases, unless cfg.Async: where nothing else records an accepted turn's
// place, a join is that record. With the asynchronous persist mode a kill
// -9 of NATS lost the last join (its flush window), and the turn, claimed
// after the restart, joined again at the tail — behind a turn sent after
// the restart, out of its order (e2e/distributed
// TestSessionFIFOAcrossFullRestart). With cfg.Async the session store
// records each accepted turn and its place, and the runner puts lost
// joins back before it takes new turns (ownership/recovery). A
// stream keeps the persist mode it was made with (JetStream cannot change
// it, and its entries must not be lost to an upgrade).
func Open(ctx context.Context, js jetstream.JetStream, cfg Config) (*Queue, error) {
	if cfg.Alive == nil {
		return nil, errors.New("sessionqueue: Config.Alive is required")
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	replicas := max(cfg.Replicas, 1)
	scfg := jetstream.StreamConfig{
		Name:        StreamName,
		Description: "Per-session queues of turns: join and done records; the sequence is the order",
		Subjects:    []string{subjectPrefix + ">"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		Discard:     jetstream.DiscardOld,
		// A join is retried with its Nats-Msg-Id after a lost ack.
		Duplicates:  2 * time.Minute,
		AllowDirect: true,
	}
	if cfg.Async && replicas == 1 {
		scfg.PersistMode = jetstream.AsyncPersistMode
	}
	if old, err := js.Stream(ctx, StreamName); err == nil && old.CachedInfo().Config.PersistMode != scfg.PersistMode {
		scfg.PersistMode = old.CachedInfo().Config.PersistMode
		if scfg.PersistMode == jetstream.AsyncPersistMode {
			cfg.Logger.Warn("keeping a session queue stream made without an fsync per write: a crash of NATS may put a turn out of its order")
		} else {
			cfg.Logger.Info("keeping a session queue stream made with an fsync per write (by an older version)")
		}
	}
	st, err := bus.EnsureStream(ctx, js, scfg)
	if err != nil {
		return nil, fmt.Errorf("sessionqueue: %w", err)
	}
	return &Queue{cfg: cfg, js: js, stream: st, log: cfg.Logger, watches: map[string]*watch{}, idle: map[string]uint64{}}, nil
}

// record is one message of a session's log.
type record struct {
	Op    string `json:"op"`              // "join" or "done"
	Turn  string `json:"turn,omitempty"`  // join: the turn
	Front bool   `json:"front,omitempty"` // join: ahead of the waiting turns
	Seq   uint64 `json:"seq,omitempty"`   // done: the join it ends
}

const (
	opJoin = "join"
	opDone = "done"
)

// Join appends turnID to the session's queue and returns its position
// (the join's stream sequence). msgID deduplicates a retried join: the
// same msgID within the stream's duplicate window returns the first
// join's sequence. front puts the turn ahead of every waiting turn (not of
// the holder).
func (q *Queue) Join(ctx context.Context, s Session, turnID, msgID string, front bool) (uint64, error) {
	seq, _, err := q.Enter(ctx, s, turnID, msgID, front)
	return seq, err
}

// Enter is Join that also reports held: true when the join is known to
// hold the session without reading the log (false says nothing: ask
// Holds or Holder). A session this runner last saw go idle — its own
// compaction replayed the log to empty at a done record — is joined with
// one conditional append: on condition that that done record is still the
// session's last message. If it is, the log replays to empty just before
// this join, so the join holds the session; if anything was appended
// since, the append is refused (nothing is stored) and the turn joins as
// usual.
func (q *Queue) Enter(ctx context.Context, s Session, turnID, msgID string, front bool) (seq uint64, held bool, err error) {
	body, _ := json.Marshal(record{Op: opJoin, Turn: turnID, Front: front})
	if at, ok := q.takeIdle(s); ok {
		ack, err := q.js.Publish(ctx, s.subject(), body, jetstream.WithMsgID(msgID), jetstream.WithExpectLastSequencePerSubject(at))
		if err == nil {
			// A duplicate is an earlier try's join: where it stands is
			// not known here.
			return ack.Sequence, !ack.Duplicate, nil
		}
		// Refused, or not acknowledged (stored or not): the plain join
		// below is the same entry if it was stored (same message id).
	}
	ack, err := q.js.Publish(ctx, s.subject(), body, jetstream.WithMsgID(msgID))
	if err != nil {
		return 0, false, fmt.Errorf("sessionqueue: join the queue of %s: %w", s, err)
	}
	return ack.Sequence, false, nil
}

// maxIdle bounds how many idle sessions a runner remembers (a forgotten
// one costs its next turn one read, not correctness).
const maxIdle = 10_000

// setIdle records that s's log replays to empty at its message seq, a
// done record.
func (q *Queue) setIdle(s Session, seq uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.idle) >= maxIdle {
		clear(q.idle)
	}
	q.idle[s.subject()] = seq
}

// takeIdle returns and forgets where s was last seen idle: once a turn
// joins, it is not idle there any more.
func (q *Queue) takeIdle(s Session) (uint64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	seq, ok := q.idle[s.subject()]
	delete(q.idle, s.subject())
	return seq, ok
}

// Leave ends the entry at seq (the holder giving the session to the next
// turn, or a waiting turn giving up its place): one append. The session's
// log is compacted afterwards, off the caller's path, when nothing is
// left in it.
func (q *Queue) Leave(ctx context.Context, s Session, seq uint64) error {
	done, err := q.done(ctx, s, seq)
	if err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.compactions.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), compactTimeout)
		defer cancel()
		q.compact(ctx, s, seq, done)
	})
	return nil
}

// compactTimeout bounds one compaction.
const compactTimeout = 10 * time.Second

// done appends the done record of seq and returns its sequence.
func (q *Queue) done(ctx context.Context, s Session, seq uint64) (uint64, error) {
	body, _ := json.Marshal(record{Op: opDone, Seq: seq})
	// Several runners may pass the same dead holder over at once; one
	// record is enough (a second would be ignored anyway).
	ack, err := q.js.Publish(ctx, s.subject(), body, jetstream.WithMsgID("done-"+strconv.FormatUint(seq, 10)))
	if err != nil {
		return 0, fmt.Errorf("sessionqueue: leave the queue of %s: %w", s, err)
	}
	return ack.Sequence, nil
}

// compact purges the session's log before the done at doneSeq when the
// log replays to nothing there. That done record stays: the log's last
// message is never purged, so a replay always reaches every sequence it
// waits for, and a done of an unknown entry replays as nothing. Failing
// to compact is harmless: a later leave compacts more.
func (q *Queue) compact(ctx context.Context, s Session, seq, doneSeq uint64) {
	upTo := uint64(0)
	// The common case, a session that was idle: its log is this join and
	// this done (after what an earlier compaction left), and a few reads
	// tell.
	if first, err := q.first(ctx, s); err == nil && first == seq {
		if next, err := q.next(ctx, s, seq+1); err == nil && next.Sequence == doneSeq {
			upTo = doneSeq
		}
	}
	if upTo == 0 {
		w := q.acquire(s)
		defer q.release(w)
		_ = w.await(ctx, func(st *state) bool {
			if st.last >= doneSeq && st.empty() {
				upTo = st.last
			}
			return st.last >= doneSeq
		})
	}
	if upTo == 0 {
		return
	}
	// upTo is a done record after which nobody holds or waits: the next
	// join there holds the session.
	q.setIdle(s, upTo)
	if err := q.stream.Purge(ctx, jetstream.WithPurgeSubject(s.subject()), jetstream.WithPurgeSequence(upTo)); err != nil && ctx.Err() == nil {
		q.log.Warn("compact a session queue", "session", s.String(), "err", err)
	}
}

// next is the first message of s's log at or after from (Sequence 0 when
// there is none).
func (q *Queue) next(ctx context.Context, s Session, from uint64) (*jetstream.RawStreamMsg, error) {
	m, err := q.stream.GetMsg(ctx, from, jetstream.WithGetMsgSubject(s.subject()))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return &jetstream.RawStreamMsg{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sessionqueue: read the queue of %s: %w", s, err)
	}
	return m, nil
}

// first is the sequence of the first join of s's log if nothing but the
// done record an earlier compaction left comes before it (0 otherwise).
// Such a join holds the session: the log replays as an idle session's
// first join.
func (q *Queue) first(ctx context.Context, s Session) (uint64, error) {
	m, err := q.next(ctx, s, 1)
	if err != nil || m.Sequence == 0 {
		return 0, err
	}
	var r record
	if json.Unmarshal(m.Data, &r) == nil && r.Op == opDone {
		if m, err = q.next(ctx, s, m.Sequence+1); err != nil || m.Sequence == 0 {
			return 0, err
		}
		r = record{}
		_ = json.Unmarshal(m.Data, &r)
	}
	if r.Op != opJoin {
		return 0, nil
	}
	return m.Sequence, nil
}

// Holds reports whether the entry at seq holds the session right now, by
// the cheapest test that can say yes: it is the first join of the
// session's log and nothing but a compaction's leftover done precedes it.
// False says nothing: use Wait.
func (q *Queue) Holds(ctx context.Context, s Session, seq uint64) (bool, error) {
	first, err := q.first(ctx, s)
	if err != nil {
		return false, err
	}
	return first == seq, nil
}

// Holder is the turn holding the session now ("" and 0 when nobody
// does), at least as far as seq: the replay has reached seq and the log's
// last message when Holder was called. A holder that is not alive
// (Config.Alive) is passed over first, as a waiting turn would.
func (q *Queue) Holder(ctx context.Context, s Session, seq uint64) (turnID string, holderSeq uint64, err error) {
	w := q.acquire(s)
	defer q.release(w)
	for {
		last, err := q.lastSeq(ctx, s)
		if err != nil {
			return "", 0, err
		}
		var h entry
		err = w.await(ctx, func(st *state) bool {
			if st.last < max(seq, last) {
				return false
			}
			h = st.holder
			return true
		})
		if err != nil || h.seq == 0 || h.seq == seq {
			return h.turn, h.seq, err
		}
		passed, err := w.passOver(ctx, h)
		if err != nil || !passed {
			return h.turn, h.seq, err
		}
		// Passed over (or the replay restarted): look again, at least as
		// far as the done record.
	}
}

// Find looks for turnID's entry in the session's queue (a turn taken over
// from another runner). It returns its sequence, or 0 when the turn has
// none.
func (q *Queue) Find(ctx context.Context, s Session, turnID string) (uint64, error) {
	last, err := q.lastSeq(ctx, s)
	if err != nil || last == 0 {
		return 0, err
	}
	w := q.acquire(s)
	defer q.release(w)
	var seq uint64
	err = w.await(ctx, func(st *state) bool {
		if st.last < last {
			return false
		}
		seq = st.find(turnID)
		return true
	})
	return seq, err
}

// lastSeq is the sequence of the last message of s's log (0: empty).
func (q *Queue) lastSeq(ctx context.Context, s Session) (uint64, error) {
	m, err := q.stream.GetLastMsgForSubject(ctx, s.subject())
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sessionqueue: read the queue of %s: %w", s, err)
	}
	return m.Sequence, nil
}

// Wait returns once the entry at seq holds the session, or ctx ends, or
// the entry is gone (ErrGone). While it waits, a holder that is not alive
// (Config.Alive) is passed over.
func (q *Queue) Wait(ctx context.Context, s Session, seq uint64) error {
	w := q.acquire(s)
	defer q.release(w)
	gone := false
	err := w.await(ctx, func(st *state) bool {
		if st.holder.seq == seq {
			return true
		}
		if st.last >= seq && !st.has(seq) {
			gone = true
			return true
		}
		return false
	})
	if err == nil && gone {
		return ErrGone
	}
	return err
}

// acquire returns the running replay of s's log, starting one if needed.
func (q *Queue) acquire(s Session) *watch {
	q.mu.Lock()
	defer q.mu.Unlock()
	subj := s.subject()
	w := q.watches[subj]
	if w == nil {
		w = newWatch(q, s)
		q.watches[subj] = w
	}
	w.refs++
	return w
}

// release stops the replay of w once nobody on this runner needs it.
func (q *Queue) release(w *watch) {
	q.mu.Lock()
	w.refs--
	last := w.refs == 0
	if last {
		delete(q.watches, w.s.subject())
	}
	q.mu.Unlock()
	if last {
		w.stop()
	}
}

// Close waits for the compactions under way and stops every replay
// (they normally stop with their last user). Call it once nothing waits.
func (q *Queue) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.compactions.Wait()
	q.mu.Lock()
	ws := make([]*watch, 0, len(q.watches))
	for subj, w := range q.watches {
		ws = append(ws, w)
		delete(q.watches, subj)
	}
	q.mu.Unlock()
	for _, w := range ws {
		w.stop()
	}
}
