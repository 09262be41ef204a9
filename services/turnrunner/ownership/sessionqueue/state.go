package sessionqueue

import "slices"

// entry is one join still in a session's queue.
type entry struct {
	seq  uint64
	turn string
}

// state is a session's queue as its log replays up to last.
type state struct {
	last   uint64
	holder entry   // seq 0: nobody holds the session
	queue  []entry // waiting, next first
}

// apply replays one record at stream sequence seq. Every runner applies
// the same records in the same order, so all agree.
func (st *state) apply(seq uint64, r record) {
	st.last = seq
	switch r.Op {
	case opJoin:
		e := entry{seq: seq, turn: r.Turn}
		switch {
		case st.holder.seq == 0:
			st.holder = e
		case r.Front:
			st.queue = slices.Insert(st.queue, 0, e)
		default:
			st.queue = append(st.queue, e)
		}
	case opDone:
		if st.holder.seq == r.Seq {
			st.holder = entry{}
			if len(st.queue) > 0 {
				st.holder = st.queue[0]
				st.queue = slices.Delete(st.queue, 0, 1)
			}
			return
		}
		st.queue = slices.DeleteFunc(st.queue, func(e entry) bool { return e.seq == r.Seq })
	}
}

// empty reports whether nobody holds the session or waits for it.
func (st *state) empty() bool { return st.holder.seq == 0 && len(st.queue) == 0 }

// has reports whether the entry at seq holds the session or waits.
func (st *state) has(seq uint64) bool {
	return st.holder.seq == seq || slices.ContainsFunc(st.queue, func(e entry) bool { return e.seq == seq })
}

// find is the sequence of turnID's entry (0: none).
func (st *state) find(turnID string) uint64 {
	if st.holder.turn == turnID && st.holder.seq != 0 {
		return st.holder.seq
	}
	for _, e := range st.queue {
		if e.turn == turnID {
			return e.seq
		}
	}
	return 0
}
