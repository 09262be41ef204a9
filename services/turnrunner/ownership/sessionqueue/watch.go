package sessionqueue

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// watch is this runner's replay of one session's log, shared by every
// turn of the session that waits here. It is owned by the Queue: started
// by the first acquire, stopped by the last release.
type watch struct {
	q *Queue
	s Session

	refs int // guarded by q.mu

	mu      sync.Mutex
	st      state
	changed chan struct{} // closed (and replaced) on every change of st
	// gen numbers the replays: a consumer of an earlier replay, still
	// delivering while it stops, must not touch the state of the next.
	gen uint64
	// again asks the replay goroutine to start over (restart).
	again chan struct{}

	cancel context.CancelFunc
	done   chan struct{}
}

func newWatch(q *Queue, s Session) *watch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watch{q: q, s: s, changed: make(chan struct{}), again: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go w.run(ctx)
	return w
}

// stop ends the replay and waits for its goroutine.
func (w *watch) stop() {
	w.cancel()
	<-w.done
}

// await calls ready with the replayed state after every change until it
// reports true or ctx ends.
func (w *watch) await(ctx context.Context, ready func(*state) bool) error {
	for {
		w.mu.Lock()
		ok := ready(&w.st)
		ch := w.changed
		w.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// set replaces the state under the lock and wakes the waiters.
func (w *watch) update(f func(*state)) {
	w.mu.Lock()
	f(&w.st)
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
}

func (w *watch) run(ctx context.Context) {
	defer close(w.done)
	for ctx.Err() == nil {
		if err := w.replay(ctx); err != nil && ctx.Err() == nil {
			w.q.log.Warn("replay a session queue", "session", w.s.String(), "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(w.q.cfg.Poll):
			}
		}
	}
}

// restart starts the replay over from the log's first message. The state
// is empty at once, so nobody acts on the stale one meanwhile.
func (w *watch) restart() {
	w.update(func(st *state) {
		*st = state{}
		w.gen++
	})
	select {
	case w.again <- struct{}{}:
	default:
	}
}

// replay reads the session's log from its first message, with an ordered
// consumer (which recreates itself after a reconnect, from the message
// after the last one it delivered), until ctx ends or the replay must
// start again.
func (w *watch) replay(ctx context.Context) error {
	var gen uint64
	w.update(func(st *state) {
		*st = state{}
		w.gen++
		gen = w.gen
	})
	select {
	case <-w.again: // this replay starts over anyway
	default:
	}
	cons, err := w.q.js.OrderedConsumer(ctx, StreamName, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{w.s.subject()},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return err
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		meta, err := m.Metadata()
		if err != nil {
			return
		}
		var r record
		if json.Unmarshal(m.Data(), &r) != nil {
			r = record{} // unreadable: replays as nothing
		}
		w.update(func(st *state) {
			if w.gen == gen && meta.Sequence.Stream > st.last {
				st.apply(meta.Sequence.Stream, r)
			}
		})
	})
	if err != nil {
		return err
	}
	defer cc.Stop()
	tick := time.NewTicker(w.q.cfg.Poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.again:
			return nil
		case <-tick.C:
			if err := w.checkHolder(ctx); err != nil && ctx.Err() == nil {
				w.q.log.Warn("check a session's holder", "session", w.s.String(), "err", err)
			}
		}
	}
}

// checkHolder passes the session's holder over when it is not alive: its
// turn finished or was ended without leaving the queue. Only a runner
// with turns waiting here asks (that is why the watch exists).
func (w *watch) checkHolder(ctx context.Context) error {
	w.mu.Lock()
	h, waiting := w.st.holder, len(w.st.queue) > 0
	w.mu.Unlock()
	if h.seq == 0 || !waiting {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, w.q.cfg.Poll)
	defer cancel()
	_, err := w.passOver(ctx, h)
	return err
}

// passOver appends the done record of holder h if its turn is not alive,
// and reports whether it did (or restarted the replay: h's join message
// is gone, so h was compacted away while this replay was behind, and the
// replay, not the holder, is out of date).
func (w *watch) passOver(ctx context.Context, h entry) (bool, error) {
	alive, err := w.q.cfg.Alive(ctx, h.turn)
	if err != nil || alive {
		return false, err
	}
	if _, err := w.q.stream.GetMsg(ctx, h.seq); errors.Is(err, jetstream.ErrMsgNotFound) {
		w.restart()
		return true, nil
	} else if err != nil {
		return false, err
	}
	w.q.log.Info("passing over a session holder that is gone", "session", w.s.String(), "turn", h.turn)
	if _, err := w.q.done(ctx, w.s, h.seq); err != nil {
		return false, err
	}
	return true, nil
}
